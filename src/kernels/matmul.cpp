// Matrix products: dispatch by weight type through the kernel table of the active ISA
// (kernels/dispatch.h, read once per call), threading and scratch buffers. The arithmetic lives in
// the per-ISA kernel files behind kernels/kernel_abi.h:
//   quantized (Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q2_K Q3_K Q4_K Q5_K Q6_K IQ4_NL IQ4_XS MXFP4): weights repacked at
//       load (pack.cpp),
//       activations quantized once per call to int8 blocks, int8 x int8 dot products.
//   lattice i-quants (IQ2_XXS IQ2_XS IQ2_S IQ3_XXS IQ3_S IQ1_S IQ1_M): weights row-major as in the file,
//       activations quantized once per call to Q8K records, per-super-block integer dots (iq_gemm).
//   F32 / F16 / BF16: row-major weights used in place; f32 FMA, or where the table has the bf16
//       path (AVX-512 BF16) for n_tokens >= 2 bf16 dot products (vdpbf16ps) with activations
//       converted to bf16 once per call (F16 weights get a bf16 copy at load for that).
//   anything else (Q8_1, ...): the generic dequantize-and-dot path below.
#include "kernels/matmul.h"

#include <algorithm>
#include <atomic>
#include <vector>

#include "core/cpu.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "kernels/dispatch.h"
#include "kernels/ops.h"
#include "kernels/pack.h"
#include "quant/blocks.h"
#include "quant/quant.h"

namespace tmill {

using namespace kern;

PreparedMatrix::PreparedMatrix(const Matrix& m) : src_(m) {
  if (!m.valid() || m.rows <= 0 || m.cols <= 0) return;
  // The bf16 copy of F16 weights only where the CPU has a kernel that reads it.
  int kind = pack_kind_for(m.type, kernel_table(detected_isa()).gemm_bf16x16 != nullptr);
  if (kind != kPackNone && kind != kPackBf16Copy && m.cols % pack_block_cols(kind) != 0) kind = kPackNone;
  size_t bytes = 0;
  packed = pack_weights(m, kind, &bytes);
  packed_kind = packed ? kind : kPackNone;
  if (packed) own_bytes_ += bytes;
  // Kernels that read the file layout (float GEMV and GEMM, the generic path) read a huge-page copy.
  if (packed_kind == kPackNone || packed_kind == kPackBf16Copy) {
    resident_ = resident_copy(m);
    if (resident_) {
      src_.data = resident_.get();
      own_bytes_ += m.bytes();
    }
  }
}

void matmul_reference(const Matrix& w, const float* x, int64_t ldx, float* y, int64_t ldy, int64_t n_tokens) {
  std::vector<float> row(static_cast<size_t>(w.cols));
  for (int64_t r = 0; r < w.rows; ++r) {
    dequantize_row(w.type, w.row(r), row.data(), w.cols);
    for (int64_t t = 0; t < n_tokens; ++t) {
      const float* xt = x + t * ldx;
      float acc = 0.0f;
      for (int64_t c = 0; c < w.cols; ++c) acc += row[c] * xt[c];
      y[t * ldy + r] = acc;
    }
  }
}

void get_row(const Matrix& w, int64_t r, float* dst) { dequantize_row(w.type, w.row(r), dst, w.cols); }

namespace {

// Per-thread scratch for converted activations (grows, never shrinks; 64-byte aligned).
uint8_t* scratch(size_t bytes) {
  thread_local std::shared_ptr<void> buf;
  thread_local size_t cap = 0;
  if (bytes > cap) {
    cap = std::max(bytes, cap * 2);
    buf = aligned_buffer(cap);
  }
  return static_cast<uint8_t*>(buf.get());
}

size_t round64(size_t n) { return (n + 63) / 64 * 64; }

// Below this much weight data per call, fork/join costs more than the second core gains.
constexpr size_t kParallelMinBytes = 48 << 10;
// Weight bytes a task works on in GEMM (stays in the core's L2 while the token tiles pass).
constexpr size_t kGemmChunkBytes = 160 << 10;
// GEMV (one token) chunks per thread, handed out dynamically. Fewer, longer sequential streams are
// faster: one-stream decode, alternating per step in one process (510 steps per mode), 2 against 8
// chunks per thread: Q4_0 +12.6 %, Q4_0 pure +2.6..11.5 %, F16 +0.4..3.2 %; 4 against 8 +1.3..5.7 %,
// 2 against 4 +0.5..4.3 %, a static split (1) against 8 +2.6..3.1 %. Two leave the dynamic hand-out
// some slack for a core that another process slows down.
constexpr int64_t kGemvChunksPerThread = 2;

// Kinds whose activations are Q8K records (256-column super-blocks).
bool is_kquant_kind(int kind) {
  return kind == kPackQ4_K || kind == kPackQ5_K || kind == kPackQ6_K || kind == kPackIQ4_XS || kind == kPackQ2_K ||
         kind == kPackQ3_K;
}

enum class Path { Quant, IqRows, Bf16, Float, Generic };

// Paths whose activations are quantized records (Q8 or Q8K).
bool quantized_act(Path p) { return p == Path::Quant || p == Path::IqRows; }

// Activation format of a quantized product: Q8 records with a zero point, or Q8K records.
struct ActFormat {
  bool kq = false;
  int offset = 0;
  bool operator==(const ActFormat& o) const { return kq == o.kq && offset == o.offset; }
};

// One product of a matmul_many call, split into n_tasks independent tasks.
struct Job {
  const PreparedMatrix* w = nullptr;
  float* y = nullptr;
  int64_t ldy = 0;
  Path path = Path::Generic;
  QGemmFn qfn = nullptr;
  QGemm2Fn qfn2 = nullptr;       // two full tiles per weight pass, where the ISA has one
  IqGemmFn ifn = nullptr;        // IqRows: the i-quant kernel (groups are 16 row-major rows)
  FGemmFn ffn = nullptr;
  GemmBf16Fn bfn = nullptr;      // Bf16 path: row-major BF16 weights
  GemmBf16x16Fn bx16fn = nullptr;  // Bf16 path: the x16 copy of F16 weights
  ActFormat fmt;
  const uint8_t* act = nullptr;  // quantized activations (Quant): act_off bytes into the scratch
  size_t act_off = 0, tile_bytes = 0;
  int64_t nb = 0, groups = 0;
  int64_t chunk = 0;             // groups (Quant) or rows (others) per task
  int64_t n_chunks = 0, tc = 0, n_tc = 1;  // tiles per task and task count along tokens (Quant GEMM)
  size_t bytes = 0;              // weight bytes streamed per pass
  int64_t n_tasks = 0;
};

// Groups of 16 rows per GEMM task (all token tiles): ~kGemmChunkBytes of weights, so they stay in L2
// while the tiles pass, but at least 2 tasks per thread.
int64_t gemm_group_chunk(int64_t groups, size_t group_bytes, int P) {
  int64_t chunk = std::max<int64_t>(1, static_cast<int64_t>(kGemmChunkBytes / std::max<size_t>(group_bytes, 1)));
  if (P > 1) chunk = std::min(chunk, std::max<int64_t>(1, (groups + 2 * P - 1) / (2 * P)));
  return chunk;
}

void plan_job(Job& j, int64_t n, int P, const KernelTable& kt) {
  const PreparedMatrix& pw = *j.w;
  const Matrix& m = pw.source();
  const int kind = pw.packed_kind;
  const int iq = m.cols % QK_K == 0 ? iq_kind(m.type) : -1;
  if ((kind != kPackNone && kind != kPackBf16Copy) || iq >= 0) {
    size_t group_bytes;
    if (iq >= 0) {  // row-major i-quants: tasks are groups of kRows rows, as the packed kinds
      j.path = Path::IqRows;
      j.ifn = kt.iq_gemm[iq];
      j.fmt = ActFormat{true, 0};
      j.nb = m.cols / QK_K;
      group_bytes = m.row_bytes * kRows;
    } else {
      j.path = Path::Quant;
      const bool kq = is_kquant_kind(kind);
      j.qfn = kt.qgemm[kind];
      if (n >= 2 * kTile) j.qfn2 = kt.qgemm2[kind];
      j.fmt = ActFormat{kq, kq ? 0 : q8_zero_point(kind)};
      j.nb = m.cols / pack_block_cols(kind);
      group_bytes = static_cast<size_t>(j.nb) * kGroupBlockBytes[kind];
    }
    j.groups = (m.rows + kRows - 1) / kRows;
    j.bytes = group_bytes * static_cast<size_t>(j.groups);
    const int64_t tiles = (n + kTile - 1) / kTile;
    if (n == 1) {
      // GEMV: stream the weights once, in kGemvChunksPerThread chunks per thread.
      j.chunk = std::max<int64_t>(1, j.groups / (kGemvChunksPerThread * P));
      j.tc = j.n_tc = 1;
    } else {
      // GEMM: tasks are (group chunk, tile range); a chunk's weights stay in L2 while tiles pass.
      j.chunk = gemm_group_chunk(j.groups, group_bytes, P);
      const int64_t n_gc = (j.groups + j.chunk - 1) / j.chunk;
      j.n_tc = (P > 1 && n_gc < 2 * P) ? std::min<int64_t>(tiles, (2 * P + n_gc - 1) / n_gc) : 1;
      j.tc = (tiles + j.n_tc - 1) / j.n_tc;
      if (j.qfn2 && j.tc % 2 == 1 && j.tc < tiles) ++j.tc;  // keep tile pairs together
      j.n_tc = (tiles + j.tc - 1) / j.tc;
    }
    j.n_chunks = (j.groups + j.chunk - 1) / j.chunk;
    j.n_tasks = j.n_chunks * j.n_tc;
    return;
  }
  const bool fl = m.type == DType::F32 || m.type == DType::F16 || m.type == DType::BF16;
  if (!fl) {
    j.path = Path::Generic;
    j.bytes = m.bytes();
    j.chunk = 16;
  } else {
    const bool bf16 = n >= 2 && kt.gemm_bf16 && (m.type == DType::BF16 || kind == kPackBf16Copy);
    j.path = bf16 ? Path::Bf16 : Path::Float;
    const int type = m.type == DType::F32 ? kFloatF32 : m.type == DType::F16 ? kFloatF16 : kFloatBF16;
    if (!bf16) j.ffn = kt.fgemm[type];
    j.bfn = kt.gemm_bf16;
    j.bx16fn = kt.gemm_bf16x16;
    if (bf16 && kind == kPackBf16Copy) {
      // x16 copy: tasks are chunks of 16-row groups (all tokens), sized to stay in L2
      j.groups = (m.rows + kRows - 1) / kRows;
      const size_t group_bytes = static_cast<size_t>(bf16_x16_pairs(m.cols)) * 64;
      j.bytes = group_bytes * static_cast<size_t>(j.groups);
      j.chunk = gemm_group_chunk(j.groups, group_bytes, P);
      j.n_chunks = (j.groups + j.chunk - 1) / j.chunk;
      j.n_tasks = j.n_chunks;
      return;
    }
    const size_t rb = m.row_bytes;
    j.bytes = rb * static_cast<size_t>(m.rows);
    if (n == 1) {
      j.chunk = std::max<int64_t>(4, m.rows / (kGemvChunksPerThread * P) / 4 * 4);
    } else {
      j.chunk = std::max<int64_t>(4, static_cast<int64_t>(kGemmChunkBytes / std::max<size_t>(rb, 1)) / 4 * 4);
      if (P > 1) j.chunk = std::min(j.chunk, std::max<int64_t>(4, (m.rows + 2 * P - 1) / (2 * P) / 4 * 4));
    }
  }
  j.n_chunks = (m.rows + j.chunk - 1) / j.chunk;
  j.n_tasks = j.n_chunks;
}

void run_task(const Job& j, int64_t task, const float* x, int64_t ldx, const uint16_t* xb, int64_t ldxb,
              int64_t n) {
  const PreparedMatrix& pw = *j.w;
  const Matrix& m = pw.source();
  if (quantized_act(j.path)) {
    const int64_t g0 = (task / j.n_tc) * j.chunk, g1 = std::min(j.groups, g0 + j.chunk);
    const int64_t tiles = (n + kTile - 1) / kTile;
    const int64_t k0 = (task % j.n_tc) * j.tc, k1 = std::min(tiles, k0 + j.tc);
    if (j.path == Path::IqRows) {  // all the task's tiles in one call: kernels may decode a row once for all
      const int64_t r0 = g0 * kRows, r1 = std::min(m.rows, g1 * kRows);
      j.ifn(static_cast<const uint8_t*>(m.data), m.row_bytes, j.nb, r0, r1, j.act + static_cast<size_t>(k0) * j.tile_bytes,
            j.tile_bytes, std::min(n, k1 * kTile) - k0 * kTile, j.y + k0 * kTile * j.ldy, j.ldy);
      return;
    }
    const auto* w = static_cast<const uint8_t*>(pw.packed.get());
    int64_t k = k0;
    if (j.qfn2)
      for (; k + 1 < k1 && (k + 2) * kTile <= n; k += 2)
        j.qfn2(w, j.nb, g0, g1, j.act + static_cast<size_t>(k) * j.tile_bytes,
               j.act + static_cast<size_t>(k + 1) * j.tile_bytes, j.y + k * kTile * j.ldy, j.ldy, m.rows);
    for (; k < k1; ++k) {
      const int T = static_cast<int>(std::min<int64_t>(kTile, n - k * kTile));
      j.qfn(w, j.nb, g0, g1, j.act + static_cast<size_t>(k) * j.tile_bytes, T, j.y + k * kTile * j.ldy, j.ldy,
            m.rows);
    }
    return;
  }
  const int64_t r0 = task * j.chunk, r1 = std::min(m.rows, r0 + j.chunk);
  switch (j.path) {
    case Path::Bf16: {
      if (pw.packed_kind == kPackBf16Copy) {  // F16 weights: the x16 bf16 copy, by groups
        const int64_t g0 = task * j.chunk, g1 = std::min(j.groups, g0 + j.chunk);
        j.bx16fn(static_cast<const uint16_t*>(pw.packed.get()), bf16_x16_pairs(m.cols), xb, ldxb, j.y, j.ldy, m.rows,
                 g0, g1, n);
        return;
      }
      j.bfn(static_cast<const uint16_t*>(m.data), m.row_bytes, m.cols, xb, ldxb, j.y, j.ldy, r0, r1, n);
      return;
    }
    case Path::Float: j.ffn(m.data, m.row_bytes, m.cols, x, ldx, j.y, j.ldy, r0, r1, n); return;
    default: {
      std::vector<float> row(static_cast<size_t>(m.cols));
      for (int64_t r = r0; r < r1; ++r) {
        dequantize_row(m.type, m.row(r), row.data(), m.cols);
        for (int64_t t = 0; t < n; ++t) {
          const float* xt = x + t * ldx;
          float acc = 0.0f;
          for (int64_t c = 0; c < m.cols; ++c) acc += row[c] * xt[c];
          j.y[t * j.ldy + r] = acc;
        }
      }
    }
  }
}

void quantize_tiles(const ActFormat& f, const float* x, int64_t ldx, int64_t n, int64_t cols, const KernelTable& kt,
                    uint8_t* act, size_t tile_bytes, int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; ++i) {
    const int T = static_cast<int>(std::min<int64_t>(kTile, n - i * kTile));
    const float* xt = x + i * kTile * ldx;
    uint8_t* dst = act + static_cast<size_t>(i) * tile_bytes;
    if (f.kq) kt.quant_act_q8k(xt, ldx, T, cols, dst);
    else kt.quant_act_q8(xt, ldx, T, cols, f.offset, dst);
  }
}

}  // namespace

namespace {

// SwiGLU folded into a product's conversion (matmul_swiglu): gate is the product's input x.
struct Swiglu {
  float* gate = nullptr;
  const float* up = nullptr;
  int64_t ldu = 0;
};

// matmul_many, and with `sw` (count == 1 only) matmul_swiglu: x (= sw->gate) is then overwritten row
// by row with silu(x) * up just before those rows are converted.
void products(const MatmulOutput* outs, int count, const float* x, int64_t ldx, int64_t n, ThreadPool* pool,
              const Swiglu* sw) {
  if (n <= 0 || count <= 0) return;
  const KernelTable& kt = kernels();  // one table for the whole call
  const int P = pool ? pool->size() : 1;
  constexpr int kMaxJobs = 8;
  TM_ASSERT(count <= kMaxJobs, "matmul_many: too many outputs");
  Job jobs[kMaxJobs];
  const int64_t cols = outs[0].w->cols();
  int n_jobs = 0;
  for (int i = 0; i < count; ++i) {
    if (outs[i].w->rows() <= 0) continue;
    TM_ASSERT(outs[i].w->cols() == cols, "matmul_many: weights differ in columns");
    Job& j = jobs[n_jobs++];
    j.w = outs[i].w;
    j.y = outs[i].y;
    j.ldy = outs[i].ldy;
    plan_job(j, n, P, kt);
  }
  if (n_jobs == 0) return;

  // Activation conversions, once per distinct format.
  const int64_t tiles = (n + kTile - 1) / kTile;
  ActFormat fmts[kMaxJobs];
  size_t fmt_off[kMaxJobs], fmt_tile[kMaxJobs];
  int n_fmts = 0;
  size_t total = 0;
  bool need_bf16 = false;
  for (int i = 0; i < n_jobs; ++i) {
    Job& j = jobs[i];
    if (j.path == Path::Bf16) need_bf16 = true;
    if (!quantized_act(j.path)) continue;
    int f = 0;
    while (f < n_fmts && !(fmts[f] == j.fmt)) ++f;
    if (f == n_fmts) {
      fmts[f] = j.fmt;
      fmt_tile[f] = static_cast<size_t>(j.nb) * kTile * (j.fmt.kq ? kQ8KRecordBytes : kQ8RecordBytes);
      fmt_off[f] = total;
      total += round64(fmt_tile[f] * static_cast<size_t>(tiles));
      ++n_fmts;
    }
    j.tile_bytes = fmt_tile[f];
    j.act_off = fmt_off[f];
  }
  const int64_t ldxb = bf16_copy_stride(cols);
  const size_t bf16_off = total;
  if (need_bf16) total += round64(static_cast<size_t>(n * ldxb) * 2);
  uint8_t* buf = scratch(total);
  for (int i = 0; i < n_jobs; ++i)
    if (quantized_act(jobs[i].path)) jobs[i].act = buf + jobs[i].act_off;
  auto* xb = reinterpret_cast<uint16_t*>(buf + bf16_off);
  // Work items: one per (format, tile) and one per kBf16Rows tokens of the bf16 copy, so both
  // cores share a prompt's conversion (512 x 4864 floats before the FFN down projection). With `sw`
  // (one product, so one format at most) each item first applies SwiGLU to its rows; products
  // that read x as floats get items of kBf16Rows rows for that alone.
  constexpr int64_t kBf16Rows = 2 * kTile;
  TM_ASSERT(!sw || (count == 1 && n_fmts + (need_bf16 ? 1 : 0) <= 1), "matmul_swiglu: one product");
  const bool row_items = need_bf16 || (sw && n_fmts == 0);
  const int64_t bf16_items = row_items ? (n + kBf16Rows - 1) / kBf16Rows : 0;
  const int64_t conv_items = n_fmts * tiles + bf16_items;
  auto swiglu = [&](int64_t t0, int64_t t1) {
    if (!sw) return;
    for (int64_t t = t0; t < t1; ++t) silu_mul(sw->gate + t * ldx, sw->up + t * sw->ldu, cols);
  };
  auto convert = [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      if (i < n_fmts * tiles) {
        const int f = static_cast<int>(i / tiles);
        const int64_t k = i % tiles;
        swiglu(k * kTile, std::min(n, (k + 1) * kTile));
        quantize_tiles(fmts[f], x, ldx, n, cols, kt, buf + fmt_off[f], fmt_tile[f], k, k + 1);
      } else {
        const int64_t t0 = (i - n_fmts * tiles) * kBf16Rows, t1 = std::min(n, t0 + kBf16Rows);
        swiglu(t0, t1);
        if (need_bf16) kt.to_bf16(x + t0 * ldx, ldx, t1 - t0, cols, xb + t0 * ldxb, ldxb);
      }
    }
  };

  // All tasks of all jobs in one parallel region. The conversion items are shared out inside it:
  // each thread first claims and converts items until none are left, then waits for the items
  // others are still converting (only ever a running thread, so no deadlock), then runs products.
  // That saves a fork/join per call and spreads even a two-tile conversion over both cores.
  int64_t n_tasks = 0;
  size_t bytes = 0;
  for (int i = 0; i < n_jobs; ++i) {
    n_tasks += jobs[i].n_tasks;
    bytes += jobs[i].bytes * static_cast<size_t>(quantized_act(jobs[i].path) ? tiles : (n + 5) / 6);
  }
  std::atomic<int64_t> conv_next{0}, conv_done{0};
  auto converted = [&] {
    if (conv_done.load(std::memory_order_acquire) == conv_items) return;
    for (int64_t i; (i = conv_next.fetch_add(1, std::memory_order_relaxed)) < conv_items;) {
      convert(i, i + 1);
      conv_done.fetch_add(1, std::memory_order_release);
    }
    while (conv_done.load(std::memory_order_acquire) != conv_items) cpu_relax();
  };
  auto body = [&](int64_t t0, int64_t t1, int) {
    converted();
    int ji = 0;
    int64_t base = 0;
    for (int64_t t = t0; t < t1; ++t) {
      while (t >= base + jobs[ji].n_tasks) base += jobs[ji++].n_tasks;
      run_task(jobs[ji], t - base, x, ldx, xb, ldxb, n);
    }
  };
  if (pool && P > 1 && bytes >= kParallelMinBytes && n_tasks > 1) pool->parallel_for(n_tasks, 1, body);
  else body(0, n_tasks, 0);
}

}  // namespace

void matmul_many(const MatmulOutput* outs, int count, const float* x, int64_t ldx, int64_t n, ThreadPool* pool) {
  products(outs, count, x, ldx, n, pool, nullptr);
}

void matmul_swiglu(const PreparedMatrix& w, float* gate, int64_t ldg, const float* up, int64_t ldu, float* y,
                   int64_t ldy, int64_t n_tokens, ThreadPool* pool) {
  const MatmulOutput out{&w, y, ldy};
  if (w.rows() <= 0) {  // no product to fuse into: the activations are still the caller's result
    for (int64_t t = 0; t < n_tokens; ++t) silu_mul(gate + t * ldg, up + t * ldu, w.cols());
    return;
  }
  const Swiglu sw{gate, up, ldu};
  products(&out, 1, gate, ldg, n_tokens, pool, &sw);
}

void matmul(const PreparedMatrix& pw, const float* x, int64_t ldx, float* y, int64_t ldy, int64_t n_tokens,
            ThreadPool* pool) {
  const MatmulOutput out{&pw, y, ldy};
  matmul_many(&out, 1, x, ldx, n_tokens, pool);
}

}  // namespace tmill
