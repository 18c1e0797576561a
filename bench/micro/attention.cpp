// Paged attention for one query token (one KV head, its GQA group of query heads) over a context of
// N tokens, the decode-time call. Reports GFLOPS (QK and PV: 4 * group * head_dim * N flops) and the
// KV bytes read per second. The cache (L2-resident for short contexts) is built with paged_kv_store.
//   build/bench/bench_attention --benchmark_filter='BM_Attention/F16/hd:64/g:7'
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

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

// A decode step's attention for a batch (one thread): `seqs` sequences x `layers` layers, each
// (sequence, layer) with its own blocks, scattered through one pool (as the block manager hands
// them out), so the KV comes from DRAM as in the engine (75 MB for 32 x 24 x 192 positions).
void run_batch(benchmark::State& st, DType t, int64_t hd, int64_t group, int64_t n_ctx, int64_t seqs, int64_t layers,
               int64_t n_head_kv = 2, int64_t kc = 1) {
  const int64_t bs = 16, per_seq = (n_ctx + bs - 1) / bs, blocks = per_seq * seqs * layers;
  const size_t tb = kv_tile_bytes(t, hd, bs);
  const size_t kvb = static_cast<size_t>(blocks * n_head_kv) * tb;
  // 2 MiB-aligned, on ordinary pages like the engine's KV mapping (huge pages made no difference
  // with the prefetch, bench/KERNELS.md).
  auto mk = [&] {
    constexpr size_t kAlign = size_t{2} << 20;
    void* p = std::aligned_alloc(kAlign, (kvb + kAlign - 1) / kAlign * kAlign);
    std::memset(p, 0, kvb);
    return std::unique_ptr<uint8_t, void (*)(void*)>(static_cast<uint8_t*>(p), std::free);
  };
  auto kbuf = mk(), vbuf = mk();
  uint8_t* k = kbuf.get();
  uint8_t* v = vbuf.get();
  std::mt19937 rng(1);
  std::vector<int32_t> perm(static_cast<size_t>(blocks));
  for (int64_t b = 0; b < blocks; ++b) perm[static_cast<size_t>(b)] = static_cast<int32_t>(b);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> kr(static_cast<size_t>(n_head_kv * hd)), vr(kr.size());
  PagedKvView view{k, v, t, n_head_kv, bs, hd};
  for (int64_t sl = 0; sl < seqs * layers; ++sl)
    for (int64_t p = 0; p < n_ctx; ++p) {
      for (auto& x : kr) x = nd(rng);
      for (auto& x : vr) x = nd(rng);
      paged_kv_store(view, perm.data() + sl * per_seq, p, kr.data(), vr.data());
    }
  std::vector<float> q(static_cast<size_t>(kc * group * hd)), out(q.size());
  for (auto& x : q) x = nd(rng);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (auto _ : st) {
    for (int64_t l = 0; l < layers; ++l)
      for (int64_t s = 0; s < seqs; ++s)
        for (int64_t h = 0; h < n_head_kv; h += kc)
          paged_attention_heads(q.data(), group, h, std::min(kc, n_head_kv - h), view,
                                perm.data() + (s * layers + l) * per_seq, n_ctx, scale, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  const double flops = 4.0 * static_cast<double>(group * hd * n_ctx * n_head_kv * seqs * layers);
  st.counters["GFLOPS"] = benchmark::Counter(flops * 1e-9 * static_cast<double>(st.iterations()), benchmark::Counter::kIsRate);
  st.counters["KV_GB/s"] = benchmark::Counter(2.0 * static_cast<double>(tb) * static_cast<double>(n_head_kv * per_seq * seqs * layers) *
                                                  1e-9 * static_cast<double>(st.iterations()),
                                              benchmark::Counter::kIsRate);
}

}  // namespace

int main(int argc, char** argv) {
  for (DType t : {DType::F16, DType::BF16, DType::I8, DType::F8_E4M3, DType::F32})
    for (const auto& shape : {std::pair<int64_t, int64_t>{64, 7}, {128, 4}, {64, 1}, {128, 1}})
      for (int64_t n : {128, 512, 4096}) {
        const int64_t hd = shape.first, g = shape.second;  // (clang 14 cannot capture structured bindings)
        const std::string name = std::string("BM_Attention/") + dtype_name(t) + "/hd:" + std::to_string(hd) +
                                 "/g:" + std::to_string(g) + "/ctx:" + std::to_string(n);
        benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) { run(st, t, hd, g, n); });
      }
  for (DType t : {DType::F16, DType::I8, DType::F8_E4M3})
    benchmark::RegisterBenchmark((std::string("BM_AttentionDecodeStep/") + dtype_name(t) + "/hd:64/g:7/ctx:192/seqs:32/layers:24").c_str(),
                                 [=](benchmark::State& st) { run_batch(st, t, 64, 7, 192, 32, 24); })
        ->Unit(benchmark::kMillisecond);
  // The same with both KV heads per call: no faster (9.1 vs 9.4 ms, 2026-12-03; seven query heads per
  // 2 KiB tile keep it compute-bound), so forward.cpp runs several heads per call only for groups <= 4.
  benchmark::RegisterBenchmark("BM_AttentionDecodeStep/F16/hd:64/g:7/ctx:192/seqs:32/layers:24/heads:2",
                               [=](benchmark::State& st) { run_batch(st, DType::F16, 64, 7, 192, 32, 24, 2, 2); })
      ->Unit(benchmark::kMillisecond);
  // OLMoE-1B-7B's 16-stream decode step: 16 KV heads of 128 dims, one query head each (403 MB of KV),
  // one head per call or all 16 (each block's 16 tiles read as one 64 KiB run), as forward.cpp does.
  for (int64_t kc : {1, 16})
    benchmark::RegisterBenchmark(
        ("BM_AttentionDecodeStep/F16/hd:128/g:1/kvh:16/ctx:192/seqs:16/layers:16/heads:" + std::to_string(kc)).c_str(),
        [=](benchmark::State& st) { run_batch(st, DType::F16, 128, 1, 192, 16, 16, 16, kc); })
        ->Unit(benchmark::kMillisecond);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
