// The MoE FFN of one layer (model/moe.h MoeFfn::run) at real expert shapes, random weights:
//   BM_Moe/<shape>/<type>/n:T/threads:N   T tokens routed by a random router; GB/s counts the bytes
//                                          of the experts the step touched (the roofline's numerator)
// Shapes: olmoe (64 experts, top-8, 2048 -> 1024), qwen3moe (128 experts, top-8, 2048 -> 768).
// Enough layers' worth of expert sets rotate that every iteration reads its experts from DRAM.
// Run e.g.  bench_moe --benchmark_filter='olmoe/Q4_0' --benchmark_repetitions=5
//           --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/fp16.h"
#include "core/thread_pool.h"
#include "kernels/matmul.h"
#include "model/moe.h"

using namespace tmill;

namespace {

using Clock = std::chrono::steady_clock;

struct MoeShape {
  const char* name;
  int64_t n_embd, n_ff_exp, n_expert, n_used;
};
const MoeShape kShapes[] = {{"olmoe", 2048, 1024, 64, 8}, {"qwen3moe", 2048, 768, 128, 8}};

// Random blocks with a sane f16 scale in each block's first two bytes (Q8_0/Q4_0/Q5_0/IQ4_NL/IQ4_XS),
// E8M0 exponent first for MXFP4.
void fill(DType t, std::vector<uint8_t>& b, uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i + 8 <= b.size(); i += 8) {
    const uint64_t v = rng();
    std::memcpy(&b[i], &v, 8);
  }
  const auto& info = dtype_info(t);
  const size_t blocks = b.size() / info.type_size;
  const uint16_t s = fp32_to_fp16(0.01f);
  for (size_t k = 0; k < blocks; ++k) {
    if (t == DType::MXFP4) b[k * info.type_size] = 121;
    else std::memcpy(&b[k * info.type_size], &s, 2);
  }
}

struct Layer {
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<float> router;
  std::vector<Matrix> gate, up, down;
  PreparedMoe moe;
  size_t expert_bytes = 0;  // gate + up + down of one expert
};

struct Set {
  ModelConfig cfg;
  std::vector<std::unique_ptr<Layer>> layers;
};

Set& layers(const MoeShape& sh, DType t) {
  static std::unique_ptr<Set> cur;
  static std::string key;
  const std::string k = std::string(sh.name) + dtype_name(t);
  if (cur && key == k) return *cur;
  cur.reset();
  cur = std::make_unique<Set>();
  ModelConfig& c = cur->cfg;
  c.n_embd = sh.n_embd;
  c.n_ff_exp = sh.n_ff_exp;
  c.n_expert = sh.n_expert;
  c.n_expert_used = sh.n_used;
  c.arch.moe_norm_topk = false;
  const size_t rb_in = *dtype_row_bytes(t, static_cast<uint64_t>(sh.n_embd));
  const size_t rb_ff = *dtype_row_bytes(t, static_cast<uint64_t>(sh.n_ff_exp));
  const size_t per_expert = 2 * rb_in * sh.n_ff_exp + rb_ff * sh.n_embd;
  // 1 GiB of experts in all: far beyond the L3
  const size_t n_layers = std::max<size_t>(2, (size_t{1} << 30) / (per_expert * sh.n_expert));
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  for (size_t l = 0; l < n_layers; ++l) {
    auto L = std::make_unique<Layer>();
    L->expert_bytes = per_expert;
    L->router.resize(static_cast<size_t>(sh.n_expert * sh.n_embd));
    for (auto& v : L->router) v = nd(rng);
    std::vector<std::pair<const Matrix*, PreparedMatrix*>> jobs;
    const Matrix router{DType::F32, sh.n_expert, sh.n_embd, L->router.data(), static_cast<size_t>(sh.n_embd) * 4,
                        "ffn_gate_inp"};
    L->moe.router = PreparedMatrix(router);
    L->gate.reserve(static_cast<size_t>(sh.n_expert));
    for (int64_t e = 0; e < sh.n_expert; ++e) {
      auto mk = [&](int64_t rows, int64_t cols, size_t rb, const char* name) {
        L->bytes.emplace_back(rb * static_cast<size_t>(rows));
        fill(t, L->bytes.back(), l * 1000 + L->bytes.size());
        return Matrix{t, rows, cols, L->bytes.back().data(), rb, name};
      };
      L->gate.push_back(mk(sh.n_ff_exp, sh.n_embd, rb_in, "ffn_gate_exps"));
      L->up.push_back(mk(sh.n_ff_exp, sh.n_embd, rb_in, "ffn_up_exps"));
      L->down.push_back(mk(sh.n_embd, sh.n_ff_exp, rb_ff, "ffn_down_exps"));
      L->moe.gate.emplace_back(L->gate.back());
      L->moe.up.emplace_back(L->up.back());
      L->moe.down.emplace_back(L->down.back());
    }
    cur->layers.push_back(std::move(L));
  }
  key = k;
  return *cur;
}

ThreadPool* pool(int n) {
  static std::map<int, std::unique_ptr<ThreadPool>> pools;
  auto& p = pools[n];
  if (!p) p = std::make_unique<ThreadPool>(n);
  return p.get();
}

void run_moe(benchmark::State& state, const MoeShape& sh, DType t, int64_t n, int threads) {
  Set& s = layers(sh, t);
  std::vector<float> x(static_cast<size_t>(n * sh.n_embd)), y(x.size());
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  ThreadPool* p = pool(threads);
  MoeFfn ffn;
  double best = 1e30, bytes_sum = 0, time_sum = 0, best_bytes = 0;
  size_t li = 0;
  for (auto _ : state) {
    state.PauseTiming();
    for (auto& v : x) v = nd(rng);  // fresh tokens: fresh routing
    state.ResumeTiming();
    const Layer& L = *s.layers[li];
    li = li + 1 == s.layers.size() ? 0 : li + 1;
    const auto t0 = Clock::now();
    ffn.run(s.cfg, L.moe, x.data(), y.data(), sh.n_embd, n, p);
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    const double bytes = static_cast<double>(ffn.active_experts().size() * L.expert_bytes);
    bytes_sum += bytes;
    time_sum += dt;
    if (dt < best) best = dt, best_bytes = bytes;
  }
  state.counters["GB/s"] = bytes_sum / time_sum / 1e9;
  state.counters["best_GB/s"] = best_bytes / best / 1e9;
  state.counters["experts"] = bytes_sum / static_cast<double>(state.iterations()) /
                              static_cast<double>(s.layers[0]->expert_bytes);
}

void register_all() {
  for (const MoeShape& sh : kShapes)
    for (DType t : {DType::Q4_0, DType::Q8_0, DType::IQ4_XS, DType::MXFP4})
      for (int64_t n : {1, 4, 16, 64})
        for (int th : {1, 2}) {
          const std::string name = std::string("BM_Moe/") + sh.name + "/" + dtype_name(t) + "/n:" + std::to_string(n) +
                                   "/threads:" + std::to_string(th);
          benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& st) { run_moe(st, sh, t, n, th); })
              ->Unit(benchmark::kMicrosecond)
              ->UseRealTime();
        }
}

}  // namespace

int main(int argc, char** argv) {
  register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
