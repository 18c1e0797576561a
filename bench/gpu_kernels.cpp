// The CUDA backend's kernels one at a time on the device (issue 26), for the figures a whole-model
// bench cannot separate: the decode GEMV's weight bandwidth per type (Llama-3-8B's matrices), the
// tensor-core GEMM's rate at a prompt's 512 tokens, the prefill attention's over a 4096-token prompt
// and the decode attention's KV bandwidth at 64 sequences of 1024 positions. Each figure is the
// median of 5 timings of 20 back-to-back launches (launch overhead hidden behind the queue), on the
// gpu::Ops table the engine uses. Random weights: the kernels' speed does not depend on the values.
//
//   bench_gpu_kernels [cuda|cuda-emu] [bandwidth bytes/s, default 4.8e12 (H200)]
//
// cuda-emu runs tiny shapes once on the CPU's emulator of CUDA: it checks the program, not speed.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "gpu/kernels.h"
#include "gpu/ops.h"

using namespace tmill;

namespace {

struct Bench {
  gpu::Ops& ops;
  bool emu;
  double bw;
  std::string gpu;
  std::vector<void*> bufs;

  ~Bench() {
    for (void* p : bufs) ops.release(p);
  }
  void* alloc_random(size_t bytes, uint32_t seed, bool floats = false) {
    auto p = ops.alloc(bytes);
    if (!p.ok()) {
      std::fprintf(stderr, "bench_gpu_kernels: %s\n", p.error().c_str());
      std::exit(1);
    }
    bufs.push_back(*p);
    std::vector<uint8_t> h(bytes);
    uint32_t s = seed * 2654435761u + 1;
    if (floats) {
      auto* f = reinterpret_cast<float*>(h.data());
      for (size_t i = 0; i < bytes / 4; ++i) {
        s = s * 1664525u + 1013904223u;
        f[i] = static_cast<float>(static_cast<int32_t>(s >> 8) % 2001 - 1000) * 1e-3f;
      }
    } else {
      for (auto& b : h) {
        s = s * 1664525u + 1013904223u;
        b = static_cast<uint8_t>(s >> 24);
      }
    }
    check(ops.upload(*p, h.data(), bytes), "upload");
    return *p;
  }
  static void check(const Status& st, const char* what) {
    if (!st.ok()) {
      std::fprintf(stderr, "bench_gpu_kernels: %s: %s\n", what, st.error().c_str());
      std::exit(1);
    }
  }
  // Seconds per launch of f: the median of 5 timings of `reps` launches each, after one warm-up.
  template <class F>
  double time(F&& f) {
    const int reps = emu ? 1 : 20, rounds = emu ? 1 : 5;
    check(f(), "warm-up launch");
    check(ops.synchronize(), "warm-up");
    std::vector<double> t;
    for (int r = 0; r < rounds; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < reps; ++i) check(f(), "launch");
      check(ops.synchronize(), "synchronize");
      t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
  }
};

void gemv(Bench& b, DType type, int64_t rows, int64_t cols) {
  const size_t rb = *dtype_row_bytes(type, static_cast<uint64_t>(cols));
  void* w = b.alloc_random(rb * static_cast<size_t>(rows), 1);
  auto* x = static_cast<float*>(b.alloc_random(static_cast<size_t>(cols) * 4, 2, true));
  auto* y = static_cast<float*>(b.alloc_random(static_cast<size_t>(rows) * 4, 3, true));
  const double s = b.time([&] { return b.ops.matmul(type, w, rows, cols, rb, x, 1, y, nullptr, 0); });
  const double gbs = static_cast<double>(rb) * static_cast<double>(rows) / s;
  std::printf("gpu_bench: %s gemv %s %lldx%lld: %.1f us, %.0f GB/s of weights = %.0f %% of %.1f TB/s\n", b.gpu.c_str(),
              dtype_name(type), static_cast<long long>(rows), static_cast<long long>(cols), s * 1e6, gbs / 1e9,
              100 * gbs / b.bw, b.bw / 1e12);
}

void gemm_tc(Bench& b, DType type, int64_t n, int64_t rows, int64_t cols) {
  const size_t rb = *dtype_row_bytes(type, static_cast<uint64_t>(cols));
  void* w = b.alloc_random(rb * static_cast<size_t>(rows), 4);
  auto* x = static_cast<float*>(b.alloc_random(static_cast<size_t>(n * cols) * 4, 5, true));
  auto* y = static_cast<float*>(b.alloc_random(static_cast<size_t>(n * rows) * 4, 6, true));
  const size_t ws = b.ops.matmul_workspace_bytes();
  void* wsp = b.alloc_random(ws, 7);
  const double s = b.time([&] { return b.ops.matmul(type, w, rows, cols, rb, x, n, y, wsp, ws); });
  std::printf("gpu_bench: %s gemm %s %lld tokens x %lldx%lld: %.1f us, %.1f TFLOPS\n", b.gpu.c_str(), dtype_name(type),
              static_cast<long long>(n), static_cast<long long>(rows), static_cast<long long>(cols), s * 1e6,
              2.0 * static_cast<double>(n * rows * cols) / s / 1e12);
}

// n_seq sequences of ctx positions each: decode (one query token per sequence, the last position) or
// prefill (every position of one sequence a query token, in the engine's tiles).
void attention(Bench& b, bool prefill, int64_t n_seq, int64_t ctx) {
  const int64_t n_head = 32, n_kv = 8, hd = 128, bs = 16, nb = (ctx + bs - 1) / bs;
  const int64_t n_tok = prefill ? ctx : n_seq;
  const size_t tile = static_cast<size_t>(hd * bs) * 2;
  const auto blocks = static_cast<size_t>(n_seq * nb);
  auto* kt = static_cast<uint8_t*>(b.alloc_random(blocks * static_cast<size_t>(n_kv) * tile, 8));
  auto* vt = static_cast<uint8_t*>(b.alloc_random(blocks * static_cast<size_t>(n_kv) * tile, 9));
  std::vector<int32_t> tables(static_cast<size_t>(n_tok * nb)), n_ctx(static_cast<size_t>(n_tok)), tiles;
  for (int64_t t = 0; t < n_tok; ++t) {
    const int64_t seq = prefill ? 0 : t;
    for (int64_t k = 0; k < nb; ++k) tables[static_cast<size_t>(t * nb + k)] = static_cast<int32_t>(seq * nb + k);
    n_ctx[static_cast<size_t>(t)] = static_cast<int32_t>(prefill ? t + 1 : ctx);
  }
  if (prefill) {
    const int64_t T = gpu::attention_tile_tokens(n_head, n_kv, hd);
    for (int64_t t = 0; t < n_tok; t += T) {
      tiles.push_back(static_cast<int32_t>(t));
      tiles.push_back(static_cast<int32_t>(std::min(T, n_tok - t)));
    }
  }
  auto put = [&](const std::vector<int32_t>& v) {
    auto p = b.ops.alloc(v.size() * 4);
    if (!p.ok()) {
      std::fprintf(stderr, "bench_gpu_kernels: %s\n", p.error().c_str());
      std::exit(1);
    }
    b.bufs.push_back(*p);
    Bench::check(b.ops.upload(*p, v.data(), v.size() * 4), "upload");
    return static_cast<const int32_t*>(*p);
  };
  gpu::GpuAttnArgs a;
  a.q = static_cast<const float*>(b.alloc_random(static_cast<size_t>(n_tok * n_head * hd) * 4, 10, true));
  a.out = static_cast<float*>(b.alloc_random(static_cast<size_t>(n_tok * n_head * hd) * 4, 11, true));
  a.n_tokens = n_tok, a.n_head = n_head, a.n_head_kv = n_kv, a.head_dim = hd;
  a.k_tiles = kt, a.v_tiles = vt, a.block_size = bs;
  a.block_tables = put(tables), a.max_blocks = nb, a.n_ctx = put(n_ctx);
  a.scale = 0.088f, a.max_ctx = ctx;
  a.partial_floats = gpu::attention_partial_capacity(n_head, n_kv, hd);
  a.partial = static_cast<float*>(b.alloc_random(static_cast<size_t>(a.partial_floats) * 4, 12, true));
  if (prefill) a.tiles = put(tiles), a.n_tiles = static_cast<int64_t>(tiles.size() / 2);
  const double s = b.time([&] { return b.ops.attention(a); });
  if (prefill) {
    const double flops = 4.0 * static_cast<double>(hd * n_head) * static_cast<double>(ctx) * static_cast<double>(ctx + 1) / 2;
    std::printf("gpu_bench: %s prefill attention %lld tokens (32/8 heads, head_dim 128, %s): %.2f ms, %.1f TFLOPS\n",
                b.gpu.c_str(), static_cast<long long>(ctx),
                gpu::attention_prefill_on_tensor_cores(n_head, n_kv, hd) ? "tensor cores" : "scalar", s * 1e3, flops / s / 1e12);
  } else {
    const double bytes = 2.0 * static_cast<double>(n_seq * ctx * n_kv * hd) * 2;
    std::printf("gpu_bench: %s decode attention %lld seqs x %lld positions: %.1f us, %.0f GB/s of KV = %.0f %% of %.1f TB/s\n",
                b.gpu.c_str(), static_cast<long long>(n_seq), static_cast<long long>(ctx), s * 1e6, bytes / s / 1e9,
                100 * bytes / s / b.bw, b.bw / 1e12);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dev = argc > 1 ? argv[1] : "cuda";
  const double bw = argc > 2 ? std::atof(argv[2]) : 4.8e12;
  if (dev != "cuda" && dev != "cuda-emu") {
    std::fprintf(stderr, "usage: bench_gpu_kernels [cuda|cuda-emu] [bandwidth bytes/s]\n");
    return 2;
  }
  gpu::Ops& ops = dev == "cuda" ? gpu::cuda_ops() : gpu::cuda_emu_ops();
  auto devs = ops.devices();
  if (!devs.ok()) {
    std::fprintf(stderr, "bench_gpu_kernels: %s\n", devs.error().c_str());
    return 1;
  }
  Bench b{ops, dev == "cuda-emu", bw, devs->front().name, {}};
  const bool emu = b.emu;  // tiny shapes: the emulator runs a CUDA thread as a fiber
  for (DType t : {DType::BF16, DType::Q8_0, DType::Q4_K, DType::Q6_K}) {
    if (emu) {
      gemv(b, t, 64, 512);
      continue;
    }
    gemv(b, t, 4096, 4096);   // wq / wo
    gemv(b, t, 14336, 4096);  // gate / up
    gemv(b, t, 4096, 14336);  // down
  }
  for (DType t : {DType::BF16, DType::Q8_0}) gemm_tc(b, t, emu ? 64 : 512, emu ? 128 : 4096, emu ? 256 : 4096);
  attention(b, true, 1, emu ? 96 : 4096);
  attention(b, false, emu ? 2 : 64, emu ? 64 : 1024);
  return 0;
}
