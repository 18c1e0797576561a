// Paged attention for one query token (one KV head, its GQA group of query heads) over a context of
// N tokens, the decode-time call. Reports GFLOPS (QK and PV: 4 * group * head_dim * N flops) and the
// KV bytes read per second. The cache (L2-resident for short contexts) is built with paged_kv_store.
//   build/bench/bench_attention --benchmark_filter='BM_Attention/F16/hd:64/g:7'
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "kernels/attention.h"

using namespace tmill;

namespace {

void run(benchmark::State& st, DType t, int64_t hd, int64_t group, int64_t n_ctx) {
  const int64_t bs = 16, n_head_kv = 2, blocks = (n_ctx + bs - 1) / bs;
  const size_t tb = kv_tile_bytes(t, hd, bs);
  std::vector<uint8_t> k(static_cast<size_t>(blocks * n_head_kv) * tb), v(k.size());
  PagedKvView view{k.data(), v.data(), t, n_head_kv, bs, hd};
  std::vector<int32_t> table(static_cast<size_t>(blocks));
  for (int64_t b = 0; b < blocks; ++b) table[static_cast<size_t>(b)] = static_cast<int32_t>((b * 7) % blocks);
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> kr(static_cast<size_t>(n_head_kv * hd)), vr(kr.size());
  for (int64_t p = 0; p < n_ctx; ++p) {
    for (auto& x : kr) x = nd(rng);
    for (auto& x : vr) x = nd(rng);
    paged_kv_store(view, table.data(), p, kr.data(), vr.data());
  }
  std::vector<float> q(static_cast<size_t>(group * hd)), out(q.size());
  for (auto& x : q) x = nd(rng);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (auto _ : st) {
    paged_attention_group(q.data(), group, 1, view, table.data(), n_ctx, scale, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  const double flops = 4.0 * static_cast<double>(group * hd * n_ctx);
  st.counters["GFLOPS"] = benchmark::Counter(flops * 1e-9 * static_cast<double>(st.iterations()), benchmark::Counter::kIsRate);
}

}  // namespace

int main(int argc, char** argv) {
  for (DType t : {DType::F16, DType::BF16, DType::I8, DType::F32})
    for (const auto& shape : {std::pair<int64_t, int64_t>{64, 7}, {128, 4}, {64, 1}})
      for (int64_t n : {128, 512, 4096}) {
        const int64_t hd = shape.first, g = shape.second;  // (clang 14 cannot capture structured bindings)
        const std::string name = std::string("BM_Attention/") + dtype_name(t) + "/hd:" + std::to_string(hd) +
                                 "/g:" + std::to_string(g) + "/ctx:" + std::to_string(n);
        benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) { run(st, t, hd, g, n); });
      }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
