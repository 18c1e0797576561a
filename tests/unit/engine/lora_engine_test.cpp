// LoRA adapters through the engine: greedy output with an adapter equals the output of the model
// with the adapter merged into its weights; a batch mixing adapters and the base model gives each
// request the tokens it gets alone; the prefix cache never serves one adapter's K/V to another;
// adapters load and unload at run time, also while the engine thread runs.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <mutex>
#include <map>
#include <thread>

#include "convert/dummy.h"
#include "convert/lora.h"
#include "engine/engine.h"
#include "test_support.h"

using namespace tmill;

namespace {

std::string base_path(const std::string& shape) {
  static std::map<std::string, std::string> cache;
  if (auto it = cache.find(shape); it != cache.end()) return it->second;
  DummyOptions o;
  o.shape = *find_shape(shape);
  o.dtype = DType::F32;
  o.seed = 11;
  const std::string path = test::temp_dir() + "/lora-engine-" + shape + ".gguf";
  EXPECT_TRUE(write_dummy_model(o, path).ok());
  return cache[shape] = path;
}

std::string adapter_path(const std::string& base, const std::string& tag, std::vector<std::string> targets, uint64_t seed,
                         float spread = 0.1f) {
  DummyLoraOptions o;
  o.spread = spread;
  o.base_path = base;
  o.targets = std::move(targets);
  o.seed = seed;
  o.rank = 8;
  const std::string path = test::temp_dir() + "/lora-engine-" + tag + ".gguf";
  auto st = write_dummy_lora(o, path);
  EXPECT_TRUE(st.ok()) << st.error();
  return path;
}

std::unique_ptr<Engine> make_engine(const std::string& model, std::vector<LoraSpec> loras = {}, int32_t max_loras = 8,
                                    const std::string& device = "cpu") {
  EngineConfig c;
  c.model_path = model;
  c.device = device;
  if (device != "cpu") c.gpu_memory_utilization = 0.25;
  c.threads = 2;
  c.max_num_seqs = 16;
  c.loras = std::move(loras);
  c.max_loras = max_loras;
  auto e = Engine::create(c);
  EXPECT_TRUE(e.ok()) << e.error();
  return std::move(e).value();
}

struct Out {
  std::vector<int32_t> tokens;
  int32_t cached = 0;
  FinishReason reason = FinishReason::None;
};

std::vector<Out> run_all(Engine& e, const std::vector<GenerateRequest>& reqs) {
  std::vector<Out> out(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    Out* o = &out[i];
    auto id = e.submit(reqs[i], [o](const RequestOutput& r) {
      o->tokens.insert(o->tokens.end(), r.token_ids.begin(), r.token_ids.end());
      o->cached = r.cached_prompt_tokens;
      if (r.finished) o->reason = r.finish_reason;
    });
    EXPECT_TRUE(id.ok()) << id.error();
  }
  e.run_until_idle();
  return out;
}

GenerateRequest greedy(std::vector<int32_t> prompt, std::string lora = "", float scale = 1.0f, int32_t n = 24) {
  GenerateRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = n;
  r.ignore_eos = true;
  r.sampling.temperature = 0;
  r.lora = std::move(lora);
  r.lora_scale = scale;
  return r;
}

std::vector<int32_t> prompt_of(int32_t len, int32_t salt) {
  std::vector<int32_t> p = {1};
  for (int32_t i = 1; i < len; ++i) p.push_back(3 + (i * 7 + salt * 13) % 500);
  return p;
}

}  // namespace

class LoraEngine : public ::testing::TestWithParam<std::string> {};

// The correctness rule: greedy tokens with the adapter == greedy tokens of the merged model.
TEST_P(LoraEngine, GreedyWithAdapterEqualsMergedModel) {
  const std::string base = base_path(GetParam());
  // strong enough to move tiny-qwen2 off repeating its input token (its tied embedding dominates)
  const std::string lora = adapter_path(base, GetParam() + "-all", {"all"}, 21, 0.3f);
  const std::string merged = test::temp_dir() + "/lora-engine-merged-" + GetParam() + ".gguf";
  ASSERT_TRUE(merge_lora(base, {{lora, 0.8f}}, merged).ok());
  auto with = make_engine(base, {{"ad", lora}});
  auto want = make_engine(merged);
  std::vector<GenerateRequest> reqs, plain;
  for (int s = 0; s < 4; ++s) {
    reqs.push_back(greedy(prompt_of(5 + 9 * s, s), "ad", 0.8f));
    plain.push_back(greedy(prompt_of(5 + 9 * s, s)));
  }
  const auto got = run_all(*with, reqs), exp = run_all(*want, plain), base_out = run_all(*with, plain);
  int differs = 0;
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(got[i].tokens, exp[i].tokens) << GetParam() << " request " << i;
    differs += got[i].tokens != base_out[i].tokens;
  }
  EXPECT_GT(differs, 0) << "the adapter must change some output for this test to mean anything";
}

INSTANTIATE_TEST_SUITE_P(Tiny, LoraEngine, ::testing::Values("tiny-llama", "tiny-qwen2", "tiny-phi3"));

// Requests of two adapters, two scales and the base model, submitted together, several with the same
// prompt (so a prefix cache keyed without the adapter would serve the wrong K/V): each gets the
// tokens it gets alone on a fresh engine.
TEST(LoraEngineBatch, MixedBatchGivesEachRequestItsTokensAlone) {
  const std::string base = base_path("tiny-llama");
  const std::vector<LoraSpec> loras = {{"a", adapter_path(base, "mix-a", {"all"}, 31)},
                                       {"b", adapter_path(base, "mix-b", {"attn_v", "ffn_down"}, 32)}};
  const auto shared = prompt_of(40, 7);
  const std::vector<GenerateRequest> reqs = {greedy(shared, "a"),       greedy(shared),
                                             greedy(shared, "b"),       greedy(shared, "a", 0.5f),
                                             greedy(prompt_of(9, 3), "b"), greedy(prompt_of(13, 4)),
                                             greedy(shared, "a", 0.0f)};  // scale 0: the base model
  std::vector<Out> alone;
  for (const auto& r : reqs) {
    auto e = make_engine(base, loras);
    alone.push_back(run_all(*e, {r})[0]);
  }
  EXPECT_NE(alone[0].tokens, alone[1].tokens);
  EXPECT_NE(alone[0].tokens, alone[3].tokens);  // the scale matters
  EXPECT_EQ(alone[6].tokens, alone[1].tokens);
  auto e = make_engine(base, loras);
  const auto together = run_all(*e, reqs);
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(together[i].tokens, alone[i].tokens) << "request " << i;
  // Again on the warm cache: the same (adapter, scale) hits its blocks, and still the same tokens.
  const auto again = run_all(*e, {reqs[0], reqs[2], reqs[1]});
  EXPECT_EQ(again[0].tokens, alone[0].tokens);
  EXPECT_EQ(again[1].tokens, alone[2].tokens);
  EXPECT_EQ(again[2].tokens, alone[1].tokens);
  EXPECT_EQ(again[0].cached, 32);
}

// LoRA on the GPU engine path (gpu-oracle; cuda-emu: the CUDA kernels on the emulator): two adapters at
// two scales and the base model in one batch -- phi3's fused attn_qkv among them -- give the CPU
// engine's tokens, request by request; an adapter loaded while the engine runs serves at once, and
// after an unload its requests are refused while the base model serves on.
void expect_gpu_lora(const std::string& device) {
  for (const char* shape : {"tiny-llama", "tiny-phi3"}) {
    SCOPED_TRACE(shape);
    const std::string base = base_path(shape);
    const std::vector<LoraSpec> loras = {{"a", adapter_path(base, std::string(shape) + "-gpu-a", {"all"}, 71, 0.3f)}};
    const std::string b_path =
        adapter_path(base, std::string(shape) + "-gpu-b", {std::string(shape) == "tiny-phi3" ? "attn_qkv" : "attn_v", "ffn_down"}, 72, 0.3f);
    const auto shared = prompt_of(40, 7);
    const std::vector<GenerateRequest> reqs = {greedy(shared, "a"), greedy(shared), greedy(shared, "b"),
                                               greedy(shared, "a", 0.5f), greedy(prompt_of(9, 3), "b"),
                                               greedy(prompt_of(13, 4))};
    auto cpu = make_engine(base, loras);
    auto gpu = make_engine(base, loras, 8, device);
    ASSERT_TRUE(cpu->load_lora("b", b_path).ok());
    auto loaded = gpu->load_lora("b", b_path);  // at run time, on the device's engine
    ASSERT_TRUE(loaded.ok()) << loaded.error();
    const auto want = run_all(*cpu, reqs), got = run_all(*gpu, reqs);
    for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(got[i].tokens, want[i].tokens) << "request " << i;
    EXPECT_NE(want[0].tokens, want[1].tokens);  // the adapters matter
    EXPECT_NE(want[2].tokens, want[1].tokens);
    ASSERT_TRUE(gpu->unload_lora("b").ok());
    EXPECT_FALSE(gpu->submit(greedy(shared, "b"), {}).ok());
    EXPECT_EQ(run_all(*gpu, {reqs[1]})[0].tokens, want[1].tokens);
  }
}
TEST(LoraEngineGpu, GpuOracleGivesTheCpuEnginesTokens) { expect_gpu_lora("gpu-oracle"); }
TEST(LoraEngineGpu, CudaEmuGivesTheCpuEnginesTokens) {
  TM_SKIP_EMULATOR_ENGINE_RUNS();
  expect_gpu_lora("cuda-emu");
}

// The prefix cache keeps adapters apart: after a base request, the same prompt under an adapter
// finds nothing cached; the same adapter and scale again finds its blocks.
TEST(LoraEngineBatch, PrefixCacheIsKeyedByAdapterAndScale) {
  const std::string base = base_path("tiny-llama");
  auto e = make_engine(base, {{"a", adapter_path(base, "cache-a", {"attn_q"}, 41)}});
  const auto p = prompt_of(40, 9);
  EXPECT_EQ(run_all(*e, {greedy(p, "", 1, 2)})[0].cached, 0);
  EXPECT_EQ(run_all(*e, {greedy(p, "", 1, 2)})[0].cached, 32);
  EXPECT_EQ(run_all(*e, {greedy(p, "a", 1, 2)})[0].cached, 0);
  EXPECT_EQ(run_all(*e, {greedy(p, "a", 0.5f, 2)})[0].cached, 0);
  EXPECT_EQ(run_all(*e, {greedy(p, "a", 1, 2)})[0].cached, 32);
}

TEST(LoraEngineApi, LoadUnloadListAndTheirErrors) {
  const std::string base = base_path("tiny-llama");
  const std::string a = adapter_path(base, "api-a", {"attn_q"}, 51);
  auto e = make_engine(base, {{"", a}}, 2);  // named after the file
  ASSERT_EQ(e->loras().size(), 1u);
  EXPECT_EQ(e->loras()[0].name, "lora-engine-api-a");
  EXPECT_EQ(e->loras()[0].rank, 8);
  EXPECT_EQ(e->loras()[0].alpha, 16.0f);
  EXPECT_EQ(e->loras()[0].n_tensors, 2);
  auto second = e->load_lora("x", a);
  ASSERT_TRUE(second.ok()) << second.error();
  EXPECT_NE(second->id, e->loras()[0].id);
  auto dup = e->load_lora("x", a);
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.error().find("already loaded"), std::string::npos) << dup.error();
  auto full = e->load_lora("y", a);
  ASSERT_FALSE(full.ok());
  EXPECT_NE(full.error().find("--max-loras"), std::string::npos) << full.error();
  ASSERT_TRUE(e->unload_lora("x").ok());
  auto un = e->unload_lora("x");
  ASSERT_FALSE(un.ok());
  EXPECT_NE(un.error().find("'x'"), std::string::npos);
  auto bad = e->load_lora("q3", adapter_path(base_path("tiny-qwen3"), "api-q3", {"attn_q"}, 52));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().find("architecture"), std::string::npos) << bad.error();
  // a request naming an unknown adapter: NotFound on the "model" field
  auto problem = e->check(greedy({1, 2, 3}, "x"));
  ASSERT_TRUE(problem.has_value());
  EXPECT_EQ(problem->kind, RequestProblem::Kind::NotFound);
  EXPECT_EQ(problem->field, "model");
  EXPECT_FALSE(e->submit(greedy({1, 2, 3}, "x"), [](const RequestOutput&) {}).ok());
  auto nan = greedy({1, 2, 3}, "lora-engine-api-a", std::nanf(""));
  ASSERT_TRUE(e->check(nan).has_value());
  EXPECT_EQ(e->check(nan)->field, "lora_scale");
  // a bad start-up adapter fails the engine with its path named
  EngineConfig c;
  c.model_path = base;
  c.loras = {{"bad", base}};
  auto failed = Engine::create(c);
  ASSERT_FALSE(failed.ok());
  EXPECT_NE(failed.error().find("general.type"), std::string::npos) << failed.error();
}

// Load and unload while the engine thread runs requests; a request keeps its adapter when it is
// unloaded mid-generation and produces the same tokens as without the unload.
TEST(LoraEngineApi, LoadAndUnloadWhileTheEngineRuns) {
  const std::string base = base_path("tiny-llama");
  const std::string a = adapter_path(base, "live-a", {"all"}, 61);
  const auto p = prompt_of(12, 5);
  std::vector<int32_t> want;
  {
    auto e = make_engine(base, {{"a", a}});
    want = run_all(*e, {greedy(p, "a", 1, 40)})[0].tokens;
  }
  EngineConfig c;
  c.model_path = base;
  c.threads = 2;
  c.debug_step_delay_s = 0.002;
  auto er = Engine::create(c);
  ASSERT_TRUE(er.ok());
  auto& e = **er;
  e.start();
  std::atomic<bool> busy_done{false};
  ASSERT_TRUE(e.submit(greedy(prompt_of(20, 1), "", 1, 60), [&](const RequestOutput& o) {
                 if (o.finished) busy_done = true;
               }).ok());
  ASSERT_TRUE(e.load_lora("a", a).ok());
  std::mutex mu;
  std::vector<int32_t> got;
  std::atomic<bool> done{false};
  ASSERT_TRUE(e.submit(greedy(p, "a", 1, 40), [&](const RequestOutput& o) {
                 std::lock_guard<std::mutex> lock(mu);
                 got.insert(got.end(), o.token_ids.begin(), o.token_ids.end());
                 if (o.finished) done = true;
               }).ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(e.unload_lora("a").ok());
  EXPECT_TRUE(e.loras().empty());
  for (int i = 0; i < 2000 && !(done && busy_done); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  e.stop();
  ASSERT_TRUE(done && busy_done);
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(got, want);
}

// vLLM's --max-lora-rank: an adapter of a larger rank is refused at load, at create and at run time,
// naming both; one within it loads.
TEST(LoraEngine, MaxLoraRankRefusesLargerAdapters) {
  const std::string base = base_path("tiny-llama");
  const std::string a = adapter_path(base, "rank8", {"attn_q"}, 5);  // rank 8
  EngineConfig c;
  c.model_path = base;
  c.threads = 2;
  c.max_lora_rank = 4;
  c.loras = {{"a", a}};
  auto e = Engine::create(c);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().find("LoRA adapter 'a' has rank 8, above --max-lora-rank 4"), std::string::npos) << e.error();
  c.loras.clear();
  e = Engine::create(c);
  ASSERT_TRUE(e.ok()) << e.error();
  auto late = (*e)->load_lora("b", a);
  ASSERT_FALSE(late.ok());
  EXPECT_NE(late.error().find("rank 8, above --max-lora-rank 4"), std::string::npos) << late.error();
  EXPECT_TRUE((*e)->loras().empty());
  c.max_lora_rank = 8;
  c.loras = {{"a", a}};
  e = Engine::create(c);
  ASSERT_TRUE(e.ok()) << e.error();
  EXPECT_EQ((*e)->loras().at(0).rank, 8);
}
