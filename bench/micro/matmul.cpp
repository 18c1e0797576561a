// Matmul micro-benchmarks at Qwen2.5-0.5B shapes (hidden 896, FFN 4864, vocab 151936):
// (bench/micro/matmul.cpp -> target bench_matmul)
//   BM_Gemv/<type>/<rows>x<cols>/threads:N   one token: weight bandwidth (GB/s of file bytes)
//   BM_Gemm/<type>/<rows>x<cols>/n:T/threads:N  T tokens: GOPS (2 * rows * cols * T / time)
//   BM_MemRead/N                             streaming read from DRAM (the bandwidth limit), from
//                                            huge pages as the weights are (kern::aligned_buffer)
//   BM_MemReadHw/N                           the same with no software prefetch (hardware prefetchers only)
//   BM_MemRead4K/N                           the same from 4 KiB pages (a plain std::vector)
// Weights are random bytes with sane scales (no NaN/Inf): values do not change the speed.
// Run e.g.  bench_matmul --benchmark_filter='Gemv/Q8_0' --benchmark_repetitions=5
//           --benchmark_report_aggregates_only=true
// (TOKENMILL_ISA=avx2|scalar measures the fallback paths.)
// GCC 12 reports false "uninitialized" warnings from inside its AVX-512 intrinsics (the
// _mm512_undefined_* idiom) in peak_vnni, as in the kernel files.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>  // BM_MemRead's stream and the BM_Peak* loops (x86-64 only)
#endif

#include "core/cpu.h"
#include "core/dtype.h"
#include "core/fp16.h"
#include "core/thread_pool.h"
#include "kernels/dispatch.h"
#include "kernels/matmul.h"
#include "kernels/pack.h"

using namespace tmill;

namespace {

using Clock = std::chrono::steady_clock;

// The fastest single iteration: on a shared, oversubscribed machine the mean measures the other
// tenants; the best iteration of a call much shorter than a scheduler slice is the quiet speed.
void set_best(benchmark::State& state, double bytes, double ops, double best_s) {
  if (bytes > 0) state.counters["best_GB/s"] = bytes / best_s / 1e9;
  state.counters["best_GOPS"] = ops / best_s / 1e9;
}

// Enough copies of a weight that one pass over all of them (8x the 32 MiB L3) comes from DRAM, as
// in a real forward pass where ~500 MB of weights stream per token; iterations rotate through them.
constexpr size_t kRotateBytes = size_t{256} << 20;

struct Weights {
  size_t bytes_per_copy = 0;
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<std::unique_ptr<PreparedMatrix>> prepared;
};

// Offsets of the f16 scale fields inside one block, per type (all other bytes are free levels).
std::vector<int> scale_offsets(DType t) {
  switch (t) {
    case DType::Q8_0: case DType::Q4_0: case DType::Q5_0: case DType::IQ4_NL: case DType::IQ4_XS: return {0};
    case DType::IQ2_XXS: case DType::IQ2_XS: case DType::IQ2_S: case DType::IQ3_XXS: case DType::IQ3_S:
    case DType::IQ1_S: return {0};
    case DType::Q4_1: case DType::Q5_1: return {0, 2};
    case DType::Q4_K: case DType::Q5_K: return {0, 2};
    case DType::Q6_K: return {208};
    case DType::Q2_K: return {80, 82};
    case DType::Q3_K: return {108};
    default: return {};
  }
}

void fill_random(DType t, std::vector<uint8_t>& b, uint64_t n_elements) {
  std::mt19937_64 rng(42);
  for (size_t i = 0; i + 8 <= b.size(); i += 8) {
    const uint64_t v = rng();
    std::memcpy(&b[i], &v, 8);
  }
  const auto& info = dtype_info(t);
  if (t == DType::F32) {
    std::uniform_real_distribution<float> ud(-1, 1);
    for (uint64_t i = 0; i < n_elements; ++i) {
      const float f = ud(rng);
      std::memcpy(&b[4 * i], &f, 4);
    }
  } else if (t == DType::F16 || t == DType::BF16) {
    std::uniform_real_distribution<float> ud(-1, 1);
    for (uint64_t i = 0; i < n_elements; ++i) {
      const uint16_t h = t == DType::F16 ? fp32_to_fp16(ud(rng)) : fp32_to_bf16(ud(rng));
      std::memcpy(&b[2 * i], &h, 2);
    }
  } else if (t == DType::MXFP4) {
    // E8M0 exponent byte first in each block: 2^(121 - 128) ~ 0.008 (random bytes would give
    // subnormal or infinite scales).
    for (uint64_t k = 0; k < n_elements / 32; ++k) b[k * info.type_size] = 121;
  } else if (t == DType::IQ1_M) {
    // The fp16 scale lives in the top nibbles of the four u16 scale words (bytes 49, 51, 53, 55).
    const uint16_t s = fp32_to_fp16(0.01f);
    for (uint64_t k = 0; k < n_elements / 256; ++k)
      for (int w = 0; w < 4; ++w) {
        uint8_t& hi = b[k * info.type_size + 49 + 2 * w];
        hi = static_cast<uint8_t>((hi & 15) | (((s >> (4 * w)) & 15) << 4));
      }
  } else {
    const uint16_t s = fp32_to_fp16(0.01f);
    const uint64_t blocks = n_elements / static_cast<uint64_t>(info.block_size);
    for (uint64_t k = 0; k < blocks; ++k)
      for (int off : scale_offsets(t)) std::memcpy(&b[k * info.type_size + off], &s, 2);
  }
}

// One weight set alive at a time (the vocab matrix is large).
Weights& weights(DType t, int64_t rows, int64_t cols) {
  static std::unique_ptr<Weights> cur;
  static std::string key;
  const std::string k = std::string(dtype_name(t)) + std::to_string(rows) + "x" + std::to_string(cols);
  if (!cur || key != k) {
    cur.reset();
    cur = std::make_unique<Weights>();
    const size_t rb = *dtype_row_bytes(t, static_cast<uint64_t>(cols));
    cur->bytes_per_copy = rb * static_cast<size_t>(rows);
    const size_t copies = std::max<size_t>(1, kRotateBytes / cur->bytes_per_copy);
    for (size_t i = 0; i < copies; ++i) {
      cur->bytes.emplace_back(cur->bytes_per_copy);
      fill_random(t, cur->bytes.back(), static_cast<uint64_t>(rows * cols));
      cur->prepared.push_back(std::make_unique<PreparedMatrix>(Matrix{t, rows, cols, cur->bytes.back().data(), rb, "w"}));
    }
    key = k;
  }
  return *cur;
}

ThreadPool* pool(int n) {
  static std::map<int, std::unique_ptr<ThreadPool>> pools;
  auto& p = pools[n];
  if (!p) p = std::make_unique<ThreadPool>(n);
  return p.get();
}

void run_matmul(benchmark::State& state, DType t, int64_t rows, int64_t cols, int64_t n, int threads) {
  Weights& w = weights(t, rows, cols);
  std::vector<float> x(static_cast<size_t>(n * cols)), y(static_cast<size_t>(n * rows));
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  for (auto& v : x) v = nd(rng);
  ThreadPool* p = pool(threads);
  double best = 1e30;
  size_t copy = 0;
  for (auto _ : state) {
    const PreparedMatrix& pm = *w.prepared[copy];
    copy = copy + 1 == w.prepared.size() ? 0 : copy + 1;
    const auto t0 = Clock::now();
    matmul(pm, x.data(), cols, y.data(), rows, n, p);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  const double it = static_cast<double>(state.iterations());
  const double bytes = static_cast<double>(w.bytes_per_copy), ops = 2.0 * static_cast<double>(rows * cols * n);
  state.counters["GB/s"] =
      benchmark::Counter(bytes * it, benchmark::Counter::kIsRate, benchmark::Counter::OneK::kIs1000);
  state.counters["GOPS"] = benchmark::Counter(ops * it, benchmark::Counter::kIsRate, benchmark::Counter::OneK::kIs1000);
  set_best(state, bytes, ops, best);
}

#if defined(__x86_64__)
// Streaming read with 256-bit loads and a software prefetch 2 KiB ahead (what a well-behaved GEMV
// kernel can hope for), or (Pf false) with the hardware prefetchers alone: on AMD EPYC (Zen 5)
// 2026-12-05 that read ~10 % faster on two threads, ~25 % on one (bench/KERNELS.md), so the host's
// roofline is the larger of BM_MemRead and BM_MemReadHw. Iterations read 4 MiB slices of a 256 MiB
// buffer in turn (like one weight matrix), so every slice comes from DRAM and an iteration (~0.2 ms) is
// short enough to run between other tenants.
template <bool Pf>
__attribute__((target("avx2"), noinline)) uint64_t read_stream(const uint8_t* p, size_t n) {
  __m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
  for (size_t i = 0; i < n; i += 128) {
    if constexpr (Pf) {
      _mm_prefetch(reinterpret_cast<const char*>(p + i + 2048), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(p + i + 2048 + 64), _MM_HINT_T0);
    }
    a = _mm256_add_epi64(a, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    b = _mm256_add_epi64(b, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    c = _mm256_add_epi64(c, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    d = _mm256_add_epi64(d, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d));
  return static_cast<uint64_t>(_mm256_extract_epi64(s, 0) + _mm256_extract_epi64(s, 3));
}
#else
template <bool Pf>
uint64_t read_stream(const uint8_t*, size_t) { return 0; }  // not reached: detected_isa() is Scalar
#endif

constexpr size_t kStreamTotal = size_t{256} << 20;

// 256 MiB either way, made once and shared by the benchmarks that read it: kern::aligned_buffer (2 MiB
// aligned, huge pages, like the weights) or a std::vector (4 KiB pages unless the kernel's THP mode is
// "always"); 64-byte aligned.
template <bool Huge>
const uint8_t* stream_buffer() {
  static std::shared_ptr<void> huge = Huge ? kern::aligned_buffer(kStreamTotal) : nullptr;
  static std::vector<uint64_t> small(Huge ? 0 : kStreamTotal / 8 + 8, 1);
  const uint8_t* base = Huge ? static_cast<const uint8_t*>(huge.get()) : reinterpret_cast<const uint8_t*>(small.data());
  return base + (64 - reinterpret_cast<uintptr_t>(base) % 64) % 64;
}

template <bool Huge, bool Pf = true>
void mem_read(benchmark::State& state) {
  if (detected_isa() < Isa::Avx2) {
    state.SkipWithError("needs AVX2");
    return;
  }
  const int threads = static_cast<int>(state.range(0));
  constexpr size_t kTotal = kStreamTotal, kSlice = size_t{4} << 20;
  const uint8_t* base = stream_buffer<Huge>();
  ThreadPool* p = pool(threads);
  std::vector<uint64_t> sums(static_cast<size_t>(threads) * 8);
  double best = 1e30;
  size_t slice = 0;
  for (auto _ : state) {
    const uint8_t* s0 = base + slice * kSlice;
    slice = (slice + 1) % (kTotal / kSlice);
    const auto t0 = Clock::now();
    p->run([&](int tid, int nt) {
      const size_t per = kSlice / static_cast<size_t>(nt);
      sums[static_cast<size_t>(tid) * 8] = read_stream<Pf>(s0 + per * static_cast<size_t>(tid), per);
    });
    benchmark::DoNotOptimize(sums.data());
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  state.counters["best_GB/s"] = static_cast<double>(kSlice) / best / 1e9;
  state.counters["GB/s"] = benchmark::Counter(static_cast<double>(kSlice) * static_cast<double>(state.iterations()),
                                              benchmark::Counter::kIsRate, benchmark::Counter::OneK::kIs1000);
}

// ---- activation quantization (one 8-token tile of the FFN down projection's input, L1/L2-hot):
// float elements converted per second.
void quant_act(benchmark::State& state) {
  constexpr int kT = 8;
  constexpr int64_t kCols = 4864;
  std::vector<float> x(static_cast<size_t>(kT * kCols));
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (float& v : x) v = nd(rng);
  std::vector<uint8_t> rec(static_cast<size_t>(kCols / 32 * kT * kern::kQ8RecordBytes));
  for (auto _ : state) {
    kern::kernel_table(Isa::Avx512).quant_act_q8(x.data(), kCols, kT, kCols, 128, rec.data());
    benchmark::DoNotOptimize(rec.data());
    benchmark::ClobberMemory();
  }
  state.counters["Gelem/s"] = benchmark::Counter(static_cast<double>(kT * kCols) * static_cast<double>(state.iterations()),
                                                 benchmark::Counter::kIsRate, benchmark::Counter::OneK::kIs1000);
}

// ---- instruction throughput limits (AVX-512 machines only): 12 independent accumulator chains
constexpr long kPeakLoops = 20000;

#if defined(__x86_64__)
__attribute__((target("avx512f,avx512bw,avx512vnni"), noinline)) int peak_vnni(long n) {
  __m512i a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_epi32(i);
  __m512i b = _mm512_set1_epi8(1), c = _mm512_set1_epi8(2);
  for (long k = 0; k < n; ++k) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) a[i] = _mm512_dpbusd_epi32(a[i], b, c);
    __asm__ volatile("" : "+v"(b));
  }
  __m512i s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_epi32(s, a[i]);
  return _mm_cvtsi128_si32(_mm512_castsi512_si128(s));
}
__attribute__((target("avx512f,avx512bf16"), noinline)) float peak_bf16(long n) {
  __m512 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(static_cast<float>(i));
  __m512bh b = (__m512bh)_mm512_set1_epi16(0x3f80), c = (__m512bh)_mm512_set1_epi16(0x3a80);
  for (long k = 0; k < n; ++k) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) a[i] = _mm512_dpbf16_ps(a[i], b, c);
    __asm__ volatile("" : "+v"(b));
  }
  __m512 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, a[i]);
  return _mm512_cvtss_f32(s);
}
__attribute__((target("avx512f,fma"), noinline)) float peak_fma(long n) {
  __m512 a[12];
  for (int i = 0; i < 12; ++i) a[i] = _mm512_set1_ps(static_cast<float>(i));
  __m512 b = _mm512_set1_ps(0.999f), c = _mm512_set1_ps(0.001f);
  for (long k = 0; k < n; ++k) {
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) a[i] = _mm512_fmadd_ps(a[i], b, c);
    __asm__ volatile("" : "+v"(b));
  }
  __m512 s = a[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, a[i]);
  return _mm512_cvtss_f32(s);
}
#else
// Not reached (detected_isa() is Scalar): stand-ins so the file builds on other processors.
int peak_vnni(long) { return 0; }
float peak_bf16(long) { return 0; }
float peak_fma(long) { return 0; }
#endif

// ops per instruction: vpdpbusd 64 MACs = 128 ops, vdpbf16ps 32 MACs = 64, vfmadd 16 FMAs = 32.
void peak(benchmark::State& state, int which) {
  if (detected_isa() < Isa::Avx512) {
    state.SkipWithError("needs AVX-512");
    return;
  }
  const int threads = static_cast<int>(state.range(0));
  ThreadPool* p = pool(threads);
  const double per_instr = which == 0 ? 128 : which == 1 ? 64 : 32;
  double best = 1e30;
  volatile float sink = 0;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    p->run([&](int, int) {
      if (which == 0) sink = static_cast<float>(peak_vnni(kPeakLoops));
      else if (which == 1) sink = peak_bf16(kPeakLoops);
      else sink = peak_fma(kPeakLoops);
    });
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  const double ops = per_instr * 12 * kPeakLoops * threads;
  state.counters["GOPS"] = benchmark::Counter(ops * static_cast<double>(state.iterations()),
                                              benchmark::Counter::kIsRate, benchmark::Counter::OneK::kIs1000);
  set_best(state, 0, ops, best);
}

// Fork/join cost of one parallel region with an empty body (what a matmul pays to use both cores).
void pool_overhead(benchmark::State& state) {
  ThreadPool* p = pool(static_cast<int>(state.range(0)));
  std::atomic<int64_t> sink{0};
  double best = 1e30;
  for (auto _ : state) {
    const auto t0 = Clock::now();
    p->parallel_for(64, 1, [&](int64_t b, int64_t, int) { sink.fetch_add(b, std::memory_order_relaxed); });
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  state.counters["best_us"] = best * 1e6;
}

struct Shape {
  int64_t rows, cols;
};

const Shape kShapes[] = {{896, 896}, {128, 896}, {4864, 896}, {896, 4864}, {151936, 896}};

void register_all() {
  const DType gemv_types[] = {DType::Q8_0, DType::Q4_0, DType::F16, DType::BF16, DType::F32,
                              DType::Q4_K, DType::Q6_K, DType::Q5_K, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                              DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4, DType::Q2_K, DType::Q3_K, DType::IQ2_XXS,
                              DType::IQ2_XS, DType::IQ2_S, DType::IQ3_XXS, DType::IQ3_S, DType::IQ1_S, DType::IQ1_M};
  for (DType t : gemv_types) {
    for (const Shape& s : kShapes) {
      if (s.cols % dtype_info(t).block_size != 0) continue;  // K-quants need 256 | cols (only 896x4864 here)
      const std::string shape = std::to_string(s.rows) + "x" + std::to_string(s.cols);
      for (int th : {1, 2}) {
        const std::string name = std::string("BM_Gemv/") + dtype_name(t) + "/" + shape + "/threads:" + std::to_string(th);
        benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) { run_matmul(st, t, s.rows, s.cols, 1, th); })
            ->Unit(benchmark::kMicrosecond)
            ->UseRealTime();
      }
      // The vocab matrix: a prompt needs only its last token's logits, batched decode one per stream
      // (16 and 32 are the batched-decode figures).
      const bool vocab = s.rows > 5000 && s.cols == 896;
      for (int64_t n : {16, 32, 64, 512}) {
        if (vocab && n > 32) continue;
        for (int th : {1, 2}) {
          const std::string name = std::string("BM_Gemm/") + dtype_name(t) + "/" + shape + "/n:" + std::to_string(n) +
                                   "/threads:" + std::to_string(th);
          benchmark::RegisterBenchmark(name.c_str(),
                                       [=](benchmark::State& st) { run_matmul(st, t, s.rows, s.cols, n, th); })
              ->Unit(benchmark::kMicrosecond)
              ->UseRealTime();
        }
      }
    }
  }
  if (detected_isa() >= Isa::Avx512)
    benchmark::RegisterBenchmark("BM_QuantActQ8/8x4864", quant_act)->UseRealTime();
  benchmark::RegisterBenchmark("BM_PeakVnni", [](benchmark::State& st) { peak(st, 0); })->Arg(1)->Arg(2)->UseRealTime();
  benchmark::RegisterBenchmark("BM_PeakBf16", [](benchmark::State& st) { peak(st, 1); })->Arg(1)->Arg(2)->UseRealTime();
  benchmark::RegisterBenchmark("BM_PeakFma", [](benchmark::State& st) { peak(st, 2); })->Arg(1)->Arg(2)->UseRealTime();
  benchmark::RegisterBenchmark("BM_PoolForkJoin", pool_overhead)->Arg(1)->Arg(2)->UseRealTime();
  benchmark::RegisterBenchmark("BM_MemRead", mem_read<true>)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("BM_MemReadHw", mem_read<true, false>)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
  benchmark::RegisterBenchmark("BM_MemRead4K", mem_read<false>)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
