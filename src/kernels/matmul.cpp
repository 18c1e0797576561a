// Matrix products: run-time dispatch (weight type x ISA), threading and scratch buffers.
// The arithmetic lives in the per-ISA kernel files behind kernels/kernel_abi.h:
//   quantized (Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q4_K Q5_K Q6_K): weights repacked at load (pack.cpp),
//       activations quantized once per call to int8 blocks, int8 x int8 dot products.
//   F32 / F16 / BF16: row-major weights used in place; f32 FMA, or on AVX-512 for n_tokens >= 2
//       bf16 dot products (vdpbf16ps) with activations converted to bf16 once per call (F16
//       weights get a bf16 copy at load for that).
//   anything else (Q2_K, Q3_K, Q8_1, IQ*...): the generic dequantize-and-dot path below.
#include "kernels/matmul.h"

#include <algorithm>
#include <vector>

#include "core/cpu.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "kernels/kernel_abi.h"
#include "kernels/pack.h"
#include "quant/quant.h"

namespace tmill {

using namespace kern;

PreparedMatrix::PreparedMatrix(const Matrix& m) : src_(m) {
  if (!m.valid() || m.rows <= 0 || m.cols <= 0) return;
  int kind = pack_kind_for(m.type, detected_isa() == Isa::Avx512);
  if (kind != kPackNone && kind != kPackBf16Copy && m.cols % pack_block_cols(kind) != 0) kind = kPackNone;
  size_t bytes = 0;
  packed = pack_weights(m, kind, &bytes);
  packed_kind = packed ? kind : kPackNone;
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

int threads_of(ThreadPool* pool) { return pool ? pool->size() : 1; }

// Runs fn(begin, end) over [0, n) in chunks of `grain`, on the pool when worthwhile.
template <class F>
void parallel(ThreadPool* pool, bool worth_it, int64_t n, int64_t grain, F&& fn) {
  if (!pool || pool->size() <= 1 || !worth_it || n <= grain) {
    fn(int64_t{0}, n);
    return;
  }
  pool->parallel_for(n, grain, [&](int64_t b, int64_t e, int) { fn(b, e); });
}

// Below this much weight data per call, fork/join costs more than the second core gains.
constexpr size_t kParallelMinBytes = 48 << 10;
// Weight bytes a thread works on per task in GEMM (stays in its L2 while token tiles pass).
constexpr size_t kGemmChunkBytes = 160 << 10;

int zero_point(int kind) {
  switch (kind) {
    case kPackQ8_0: return 128;
    case kPackQ4_0: return 8;
    case kPackQ5_0: return 16;
    default: return -1;  // Q4_1 / Q5_1: bias = +sum(x) for the min term
  }
}

void quantized_matmul(const PreparedMatrix& pw, const float* x, int64_t ldx, float* y, int64_t ldy, int64_t n,
                      ThreadPool* pool, Isa isa) {
  const int kind = pw.packed_kind;
  const bool kq = kind == kPackQ4_K || kind == kPackQ5_K || kind == kPackQ6_K;
  QGemmFn fn = nullptr;
  if (isa == Isa::Avx512) fn = kq ? qgemm_kquant_avx512(kind) : qgemm_legacy_avx512(kind);
  if (!fn && isa >= Isa::Avx2) fn = kq ? qgemm_kquant_avx2(kind) : qgemm_legacy_avx2(kind);
  if (!fn) fn = qgemm_scalar(kind);

  const int64_t rows = pw.rows(), cols = pw.cols();
  const int64_t nb = cols / pack_block_cols(kind);
  const int64_t groups = (rows + kRows - 1) / kRows;
  const size_t group_bytes = static_cast<size_t>(nb) * kGroupBlockBytes[kind];
  const auto* w = static_cast<const uint8_t*>(pw.packed.get());

  // Activations: tiles of kTile tokens, each nb records.
  const int64_t tiles = (n + kTile - 1) / kTile;
  const size_t rec = kq ? kQ8KRecordBytes : kQ8RecordBytes;
  const size_t tile_bytes = static_cast<size_t>(nb) * kTile * rec;
  uint8_t* act = scratch(tile_bytes * static_cast<size_t>(tiles));
  const int offset = zero_point(kind);
  auto quant_tiles = [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int T = static_cast<int>(std::min<int64_t>(kTile, n - i * kTile));
      const float* xt = x + i * kTile * ldx;
      uint8_t* dst = act + static_cast<size_t>(i) * tile_bytes;
      if (kq) {
        if (isa == Isa::Avx512) quant_act_q8k_avx512(xt, ldx, T, cols, dst);
        else if (isa == Isa::Avx2) quant_act_q8k_avx2(xt, ldx, T, cols, dst);
        else quant_act_q8k_scalar(xt, ldx, T, cols, dst);
      } else {
        if (isa == Isa::Avx512) quant_act_q8_avx512(xt, ldx, T, cols, offset, dst);
        else if (isa == Isa::Avx2) quant_act_q8_avx2(xt, ldx, T, cols, offset, dst);
        else quant_act_q8_scalar(xt, ldx, T, cols, offset, dst);
      }
    }
  };
  parallel(pool, tiles >= 4, tiles, 1, quant_tiles);

  const int P = threads_of(pool);
  const bool worth_it = group_bytes * static_cast<size_t>(groups) * static_cast<size_t>(tiles) >= kParallelMinBytes;
  if (n == 1) {
    // GEMV: stream the weights once; ~8 chunks per thread balance a noisy machine.
    const int64_t grain = std::max<int64_t>(1, groups / (8 * P));
    parallel(pool, worth_it, groups, grain,
             [&](int64_t g0, int64_t g1) { fn(w, nb, g0, g1, act, 1, y, ldy, rows); });
    return;
  }
  // GEMM: tasks are (group chunk, tile range); a group chunk's weights stay in L2 while the tiles pass.
  int64_t gc = std::max<int64_t>(1, static_cast<int64_t>(kGemmChunkBytes / std::max<size_t>(group_bytes, 1)));
  if (P > 1) gc = std::min(gc, std::max<int64_t>(1, (groups + 2 * P - 1) / (2 * P)));
  const int64_t n_gc = (groups + gc - 1) / gc;
  int64_t n_tc = 1;
  if (P > 1 && n_gc < 2 * P) n_tc = std::min<int64_t>(tiles, (2 * P + n_gc - 1) / n_gc);
  const int64_t tc = (tiles + n_tc - 1) / n_tc;
  n_tc = (tiles + tc - 1) / tc;
  parallel(pool, worth_it, n_gc * n_tc, 1, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t g0 = (i / n_tc) * gc, g1 = std::min(groups, g0 + gc);
      const int64_t k0 = (i % n_tc) * tc, k1 = std::min(tiles, k0 + tc);
      for (int64_t k = k0; k < k1; ++k) {
        const int T = static_cast<int>(std::min<int64_t>(kTile, n - k * kTile));
        fn(w, nb, g0, g1, act + static_cast<size_t>(k) * tile_bytes, T, y + k * kTile * ldy, ldy, rows);
      }
    }
  });
}

void float_matmul(const PreparedMatrix& pw, const float* x, int64_t ldx, float* y, int64_t ldy, int64_t n,
                  ThreadPool* pool, Isa isa) {
  const Matrix& m = pw.source();
  const int type = m.type == DType::F32 ? 0 : m.type == DType::F16 ? 1 : 2;
  const int P = threads_of(pool);
  const bool bf16_path =
      n >= 2 && isa == Isa::Avx512 && (m.type == DType::BF16 || pw.packed_kind == kPackBf16Copy);
  const size_t row_bytes = bf16_path && m.type == DType::F16 ? static_cast<size_t>(bf16_copy_stride(m.cols)) * 2
                                                              : m.row_bytes;
  const bool worth_it = row_bytes * static_cast<size_t>(m.rows) * static_cast<size_t>((n + 5) / 6) >= kParallelMinBytes;
  int64_t grain;
  if (n == 1) {
    grain = std::max<int64_t>(4, m.rows / (8 * P) / 4 * 4);
  } else {
    grain = std::max<int64_t>(4, static_cast<int64_t>(kGemmChunkBytes / row_bytes) / 4 * 4);
    if (P > 1) grain = std::min(grain, std::max<int64_t>(4, (m.rows + 2 * P - 1) / (2 * P) / 4 * 4));
  }
  if (bf16_path) {
    const int64_t ldxb = bf16_copy_stride(m.cols);
    auto* xb = reinterpret_cast<uint16_t*>(scratch(static_cast<size_t>(n * ldxb) * 2));
    to_bf16_avx512(x, ldx, n, m.cols, xb, ldxb);
    const auto* w = m.type == DType::BF16 ? static_cast<const uint16_t*>(m.data)
                                          : static_cast<const uint16_t*>(pw.packed.get());
    parallel(pool, worth_it, m.rows, grain, [&](int64_t r0, int64_t r1) {
      gemm_bf16_avx512(w, row_bytes, m.cols, xb, ldxb, y, ldy, r0, r1, n);
    });
    return;
  }
  FGemmFn fn = isa == Isa::Avx512 ? fgemm_avx512(type) : isa == Isa::Avx2 ? fgemm_avx2(type) : fgemm_scalar(type);
  parallel(pool, worth_it, m.rows, grain,
           [&](int64_t r0, int64_t r1) { fn(m.data, m.row_bytes, m.cols, x, ldx, y, ldy, r0, r1, n); });
}

// Any type quant/ can dequantize: each row dequantized once and dotted with every token.
void generic_matmul(const Matrix& w, const float* x, int64_t ldx, float* y, int64_t ldy, int64_t n,
                    ThreadPool* pool) {
  auto body = [&](int64_t r0, int64_t r1) {
    std::vector<float> row(static_cast<size_t>(w.cols));
    for (int64_t r = r0; r < r1; ++r) {
      dequantize_row(w.type, w.row(r), row.data(), w.cols);
      for (int64_t t = 0; t < n; ++t) {
        const float* xt = x + t * ldx;
        float acc = 0.0f;
        for (int64_t c = 0; c < w.cols; ++c) acc += row[c] * xt[c];
        y[t * ldy + r] = acc;
      }
    }
  };
  parallel(pool, true, w.rows, 16, body);
}

}  // namespace

void matmul(const PreparedMatrix& pw, const float* x, int64_t ldx, float* y, int64_t ldy, int64_t n_tokens,
            ThreadPool* pool) {
  if (n_tokens <= 0 || pw.rows() <= 0) return;
  const Isa isa = active_isa();
  if (pw.packed_kind != kPackNone && pw.packed_kind != kPackBf16Copy) {
    quantized_matmul(pw, x, ldx, y, ldy, n_tokens, pool, isa);
    return;
  }
  const DType t = pw.source().type;
  if (t == DType::F32 || t == DType::F16 || t == DType::BF16) {
    float_matmul(pw, x, ldx, y, ldy, n_tokens, pool, isa);
    return;
  }
  generic_matmul(pw.source(), x, ldx, y, ldy, n_tokens, pool);
}

}  // namespace tmill
