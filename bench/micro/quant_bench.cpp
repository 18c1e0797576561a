// Scalar reference (de)quantizer throughput per type, elements per second, one thread.
//   build-*/bench/bench_quant_bench [--benchmark_filter=Q4_K]
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "core/dtype.h"
#include "quant/quant.h"

namespace {
using namespace tmill;

constexpr int64_t kCols = 4096, kRows = 16;

const std::vector<float>& data() {
  static const std::vector<float> x = [] {
    std::mt19937 rng(1);
    std::normal_distribution<float> nd;
    std::vector<float> v(kCols * kRows);
    for (auto& f : v) f = nd(rng);
    return v;
  }();
  return x;
}

void BM_Quantize(benchmark::State& state, DType t, bool imatrix) {
  const auto& x = data();
  std::vector<float> imp(kCols, 1.0f);
  for (int64_t c = 0; c < kCols; c += 7) imp[c] = 10.0f;
  const size_t rb = *dtype_row_bytes(t, kCols);
  std::vector<uint8_t> q(rb * kRows);
  for (auto _ : state) {
    for (int64_t r = 0; r < kRows; ++r)
      quantize_row(t, x.data() + r * kCols, q.data() + r * rb, kCols, imatrix ? imp.data() : nullptr);
    benchmark::DoNotOptimize(q.data());
  }
  state.SetItemsProcessed(state.iterations() * kCols * kRows);
}

void BM_Dequantize(benchmark::State& state, DType t) {
  const auto& x = data();
  const size_t rb = *dtype_row_bytes(t, kCols);
  std::vector<uint8_t> q(rb * kRows);
  for (int64_t r = 0; r < kRows; ++r) quantize_row(t, x.data() + r * kCols, q.data() + r * rb, kCols);
  std::vector<float> y(x.size());
  for (auto _ : state) {
    dequantize_row(t, q.data(), y.data(), kCols * kRows);
    benchmark::DoNotOptimize(y.data());
  }
  state.SetItemsProcessed(state.iterations() * kCols * kRows);
}

const DType kTypes[] = {DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0,
                        DType::Q8_1, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K,
                        DType::IQ4_NL, DType::IQ4_XS};

[[maybe_unused]] const bool kRegistered = [] {
  for (DType t : kTypes) {
    const std::string n = dtype_name(t);
    benchmark::RegisterBenchmark(("quantize/" + n).c_str(), BM_Quantize, t, false);
    if (dtype_info(t).quantized && t != DType::Q8_0 && t != DType::Q8_1 && t != DType::Q8_K)
      benchmark::RegisterBenchmark(("quantize_imatrix/" + n).c_str(), BM_Quantize, t, true);
    benchmark::RegisterBenchmark(("dequantize/" + n).c_str(), BM_Dequantize, t);
  }
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
