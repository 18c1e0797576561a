// End-to-end engine properties: streaming, batching, prefix caching, preemption and chunk size must
// not change a greedy output; seeds reproduce inside batches; n > 1; stop strings; aborts.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <optional>

#include "convert/dummy.h"
#include "engine/engine.h"
#include "model/kv_storage.h"
#include "model/model.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

using namespace tmill;

namespace {

std::string stories_path() { return test::source_path("models/stories260K/stories260K.gguf"); }

std::string tiny_model_path(const std::string& shape) {
  static std::map<std::string, std::string> cache;
  auto it = cache.find(shape);
  if (it != cache.end()) return it->second;
  DummyOptions o;
  o.shape = *find_shape(shape);
  o.dtype = DType::F32;
  o.seed = 11;
  std::string path = test::temp_dir() + "/" + shape + ".gguf";
  EXPECT_TRUE(write_dummy_model(o, path).ok());
  return cache[shape] = path;
}

struct Collected {
  std::vector<int32_t> tokens;
  std::string text;
  bool finished = false;
  FinishReason reason = FinishReason::None;
  std::string stop_reason;
  std::vector<std::vector<int32_t>> by_choice = std::vector<std::vector<int32_t>>(4);
};

std::unique_ptr<Engine> make_engine(const std::string& model, int32_t budget = 1024, uint64_t kv_bytes = 0,
                                    bool prefix_caching = true, int threads = 2, bool free_window = true,
                                    int64_t kv_tokens = 0) {
  EngineConfig c;
  c.kv_cache_tokens = kv_tokens;
  c.free_out_of_window_kv = free_window;
  c.model_path = model;
  c.threads = threads;
  c.max_num_batched_tokens = budget;
  c.kv_cache_bytes = kv_bytes;
  c.enable_prefix_caching = prefix_caching;
  c.max_num_seqs = 32;
  auto e = Engine::create(c);
  EXPECT_TRUE(e.ok()) << e.error();
  return std::move(e).value();
}

// Submits all requests at once and runs the engine until they are done.
std::vector<Collected> run_all(Engine& e, const std::vector<GenerateRequest>& reqs) {
  std::vector<Collected> out(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    Collected* c = &out[i];
    auto id = e.submit(reqs[i], [c](const RequestOutput& o) {
      if (o.index == 0) {
        c->tokens.insert(c->tokens.end(), o.token_ids.begin(), o.token_ids.end());
        c->text += o.text;
      }
      c->by_choice[o.index].insert(c->by_choice[o.index].end(), o.token_ids.begin(), o.token_ids.end());
      if (o.finished && o.index == 0) {
        c->finished = true;
        c->reason = o.finish_reason;
        c->stop_reason = o.stop_reason;
      }
    });
    EXPECT_TRUE(id.ok()) << id.error();
  }
  e.run_until_idle();
  return out;
}

GenerateRequest greedy(std::vector<int32_t> prompt, int32_t max_tokens) {
  GenerateRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 0;
  return r;
}

std::vector<int32_t> prompt_of(int32_t len, int32_t salt, int32_t n_vocab) {
  std::vector<int32_t> p = {1};
  for (int32_t i = 1; i < len; ++i) p.push_back(3 + (i * 7 + salt * 13) % (n_vocab - 3));
  return p;
}

}  // namespace

TEST(Engine, Stories260KGreedyMatchesLlama2c) {
  auto e = make_engine(stories_path());
  auto out = run_all(*e, {greedy({1}, 200)});
  std::ifstream f(test::source_path("models/stories260K/expected_greedy_200.txt"));
  std::string expected((std::istreambuf_iterator<char>(f)), {});
  while (!expected.empty() && expected.back() == '\n') expected.pop_back();
  EXPECT_EQ(out[0].text, expected);
  EXPECT_EQ(out[0].tokens.size(), 200u);
  EXPECT_EQ(out[0].reason, FinishReason::Length);
}

class Invariance : public ::testing::TestWithParam<std::string> {};

// Greedy outputs are token-identical alone or in a batch of 16 with others of different lengths,
// with any prefill chunk size, with or without prefix caching, and under preemption.
TEST_P(Invariance, GreedyOutputDoesNotDependOnBatching) {
  const std::string model = GetParam() == "stories" ? stories_path() : tiny_model_path(GetParam());
  auto probe = make_engine(model);
  const int32_t n_vocab = probe->model_info().n_vocab;
  std::vector<GenerateRequest> reqs;
  for (int32_t i = 0; i < 16; ++i) reqs.push_back(greedy(prompt_of(5 + 9 * i, i, n_vocab), 12 + (i % 5) * 7));
  // Requests 8..15 extend request 7's 68-token prompt (prefix-cache hits on its full blocks).
  for (int32_t i = 8; i < 16; ++i) {
    auto p = reqs[7].prompt;
    p.push_back(3 + i);
    p.push_back(4 + i);
    reqs[i].prompt = p;
  }
  // Alone, one at a time, no prefix caching, big budget: the reference behaviour.
  std::vector<std::vector<int32_t>> alone;
  {
    auto e = make_engine(model, 4096, 0, /*prefix_caching=*/false);
    for (auto& r : reqs) alone.push_back(run_all(*e, {r})[0].tokens);
  }
  struct Variant {
    const char* name;
    int32_t budget;
    uint64_t kv_bytes;
    bool prefix;
    bool free_window = true;  // tiny-mistral: blocks behind its window go back to the pool
  };
  auto loaded = Model::load(model);
  ASSERT_TRUE(loaded.ok()) << loaded.error();
  const ModelConfig& cfg = (*loaded)->config();
  const int64_t bs = EngineConfig{}.block_size;
  // (mamba, mamba2: no K/V -- blocks only count positions -- so their budget is given in tokens too)
  const uint64_t per_token =
      std::max<uint64_t>(1, KvLayout::for_model(cfg, bs, 0, DType::F32).bytes_per_block() / static_cast<uint64_t>(bs));
  const Variant variants[] = {
      {"batched", 4096, 0, true},
      {"chunk1", 1, 0, true},
      {"chunk7", 7, 0, false},
      {"chunk64", 64, 0, true},
      // ~4 requests' worth of blocks for 16 requests: forces preemption and recomputation
      {"preempt", 64, per_token * 16 * 24, true, /*free_window=*/false},  // (freeing would avoid it)
  };
  for (const Variant& v : variants) {
    // (recurrent models: the same blocks, in tokens, with a state slot for each of the 32 sequences
    // on top -- a byte budget would give most of it to states and run few sequences at once)
    const bool by_tokens = v.kv_bytes > 0 && cfg.n_ssm_layers() > 0;
    auto e = make_engine(model, v.budget, by_tokens ? 0 : v.kv_bytes, v.prefix, 2, v.free_window,
                         by_tokens ? static_cast<int64_t>(v.kv_bytes / per_token) : 0);
    auto got = run_all(*e, reqs);
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_TRUE(got[i].finished) << v.name << " request " << i;
      EXPECT_EQ(got[i].tokens, alone[i]) << v.name << " request " << i;
    }
    const auto st = e->stats();
    if (std::string(v.name) == "preempt") {
      EXPECT_GT(st.num_preemptions, 0u);
    }
    // with a small budget request 7's prompt blocks are cached before requests 8..15 are admitted
    // (recurrent models: no prefix cache -- a state sums its whole sequence -- and at most as many
    // sequences at once as the plan's state slots)
    if (std::string(v.name) == "chunk64") {
      if (cfg.n_ssm_layers() > 0) EXPECT_EQ(st.kv.prefix_hit_tokens, 0);
      else EXPECT_GT(st.kv.prefix_hit_tokens, 0);
    }
    if (cfg.n_ssm_layers() > 0 && std::string(v.name) == "preempt") {
      EXPECT_EQ(e->memory_plan().num_state_slots, 32);
    }
    // everything freed: no block held by a live request
    EXPECT_EQ(st.num_running, 0);
    EXPECT_EQ(st.num_waiting, 0);
    EXPECT_EQ(st.kv.usage, 0.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, Invariance, ::testing::Values("stories", "tiny-llama", "tiny-qwen2", "tiny-qwen3",
                                                                 "tiny-phi3", "tiny-qwen3moe", "tiny-qwen2moe",
                                                                 "tiny-olmoe", "tiny-mixtral", "tiny-gemma2",
                                                                 "tiny-gemma3", "tiny-mistral", "tiny-lfm2",
                                                                 "tiny-lfm2moe", "tiny-granitehybrid", "tiny-qwen35",
                                                                 "tiny-nemotron-h", "tiny-nemotron-h-moe",
                                                                 "tiny-qwen3next", "tiny-falcon-h1", "tiny-mamba",
                                                                 "tiny-mamba2", "tiny-jamba"));

// Recurrent models (granitehybrid's Mamba-2 mixers): the plan gives a state slot per sequence that
// runs at once and turns the prefix cache off; speculative decoding, whose rejected drafts would need
// the state before them, is refused by name.
TEST(Engine, RecurrentModelsPlanStateSlotsAndRefuseSpeculation) {
  const std::string model = tiny_model_path("tiny-granitehybrid");
  {
    EngineConfig c;
    c.model_path = model;
    c.threads = 1;
    c.max_num_seqs = 5;
    auto e = Engine::create(c);
    ASSERT_TRUE(e.ok()) << e.error();
    const MemoryPlan& p = (*e)->memory_plan();
    EXPECT_EQ(p.num_state_slots, 5);
    EXPECT_GT(p.state_bytes, 0u);
    EXPECT_LT(p.state_bytes, p.kv_bytes);
    EXPECT_NE(p.note.find("recurrent state: 5 sequence slots"), std::string::npos) << p.note;
  }
  EngineConfig c;
  c.model_path = model;
  c.threads = 1;
  c.speculative.method = "ngram";
  c.speculative.num_speculative_tokens = 3;
  auto e = Engine::create(c);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().find("speculative decoding is not supported for models with recurrent layers (granitehybrid)"),
            std::string::npos) << e.error();
}

// Attention-free models (mamba2) have no K/V: the whole budget goes to state slots, and the blocks,
// which cost nothing, only count the positions of as many sequences of the context; --max-model-len
// sets that context (their files say 2^20; the tiny dummy 256), a --kv-cache-tokens size the positions.
TEST(Engine, AttentionFreeModelsPlanStatesAndFreeBlocks) {
  const std::string model = tiny_model_path("tiny-mamba2");
  EngineConfig c;
  c.model_path = model;
  c.threads = 1;
  c.max_num_seqs = 3;
  {
    auto e = Engine::create(c);
    ASSERT_TRUE(e.ok()) << e.error();
    const MemoryPlan& p = (*e)->memory_plan();
    EXPECT_EQ(p.num_state_slots, 3);
    EXPECT_EQ(p.kv_bytes, p.state_bytes);  // (no K/V)
    EXPECT_EQ(p.max_model_len, 256);
    EXPECT_EQ(p.num_blocks, 3 * 256 / 16);
    EXPECT_NE(p.note.find("recurrent state: 3 sequence slots"), std::string::npos) << p.note;
  }
  c.max_model_len = 100;
  {
    auto e = Engine::create(c);
    ASSERT_TRUE(e.ok()) << e.error();
    EXPECT_EQ((*e)->memory_plan().max_model_len, 100);
    EXPECT_EQ((*e)->memory_plan().num_blocks, 3 * 7);  // ceil(100 / 16) per slot
  }
  c.max_model_len = 0;
  c.kv_cache_tokens = 64;
  auto e = Engine::create(c);
  ASSERT_TRUE(e.ok()) << e.error();
  EXPECT_EQ((*e)->memory_plan().num_blocks, 4);
  EXPECT_EQ((*e)->memory_plan().max_model_len, 64);
  // a file that says 2^20 positions, as the converter writes for Mamba: 65536 unless asked otherwise
  DummyOptions o;
  o.shape = *find_shape("tiny-mamba2");
  o.shape.n_ctx = 1 << 20;
  o.dtype = DType::F32;
  const std::string long_path = test::temp_dir() + "/tiny-mamba2-2p20.gguf";
  ASSERT_TRUE(write_dummy_model(o, long_path).ok());
  EngineConfig l;
  l.model_path = long_path;
  l.threads = 1;
  l.max_num_seqs = 2;
  auto le = Engine::create(l);
  ASSERT_TRUE(le.ok()) << le.error();
  EXPECT_EQ((*le)->memory_plan().max_model_len, 65536);
  EXPECT_NE((*le)->memory_plan().note.find("the context is 65536 tokens (the file says 1048576"), std::string::npos)
      << (*le)->memory_plan().note;
}

TEST(Engine, SeedsReproduceInsideABatch) {
  auto e = make_engine(stories_path());
  GenerateRequest r = greedy({1}, 40);
  r.sampling.temperature = 1.0f;
  r.sampling.seed = 1234;
  auto alone = run_all(*e, {r})[0].tokens;
  std::vector<GenerateRequest> batch;
  for (int i = 0; i < 6; ++i) {
    GenerateRequest o = greedy(prompt_of(3 + i, i, 512), 30);
    o.sampling.temperature = 1.0f;
    o.sampling.seed = 99 + i;
    batch.push_back(o);
  }
  batch.insert(batch.begin() + 3, r);
  auto got = run_all(*e, batch);
  EXPECT_EQ(got[3].tokens, alone);
  GenerateRequest other = r;
  other.sampling.seed = 4321;
  EXPECT_NE(run_all(*e, {other})[0].tokens, alone);
}

TEST(Engine, ParallelSamplingSharesThePrompt) {
  auto e = make_engine(stories_path());
  GenerateRequest r = greedy(prompt_of(40, 1, 512), 20);
  r.n = 3;
  r.sampling.temperature = 1.0f;
  r.sampling.seed = 5;
  auto out = run_all(*e, {r});
  ASSERT_EQ(out.size(), 1u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(out[0].by_choice[i].size(), 20u) << "choice " << i;
  EXPECT_NE(out[0].by_choice[0], out[0].by_choice[1]);
  // Greedy choices are identical.
  r.sampling.temperature = 0;
  auto g = run_all(*e, {r});
  EXPECT_EQ(g[0].by_choice[0], g[0].by_choice[1]);
  EXPECT_EQ(g[0].by_choice[1], g[0].by_choice[2]);
  EXPECT_EQ(e->stats().kv.usage, 0.0);
}

// Recurrent models: the choices of n > 1 continue from their parent's state -- a copy of its slot, or,
// with no slot free (max_num_seqs 2 gives two), a recomputation from the start -- so greedy choices
// equal the one-choice output.
TEST(Engine, ParallelSamplingCopiesRecurrentState) {
  for (const char* name : {"tiny-granitehybrid", "tiny-qwen35"}) {
    for (int32_t seqs : {8, 2}) {
      EngineConfig c;
      c.model_path = tiny_model_path(name);
      c.threads = 2;
      c.max_num_seqs = seqs;
      auto e = Engine::create(c);
      ASSERT_TRUE(e.ok()) << e.error();
      ASSERT_EQ((*e)->memory_plan().num_state_slots, seqs);
      GenerateRequest r = greedy(prompt_of(7, 23, (*e)->model_info().n_vocab), 24);
      const std::vector<int32_t> one = run_all(**e, {r})[0].tokens;
      r.n = 3;
      auto out = run_all(**e, {r});
      for (int i = 0; i < 3; ++i) EXPECT_EQ(out[0].by_choice[i], one) << name << " max_num_seqs " << seqs << " choice " << i;
      EXPECT_EQ((*e)->stats().kv.usage, 0.0);
    }
  }
}

TEST(Engine, StopStringsCutTheText) {
  auto e = make_engine(stories_path());
  auto full = run_all(*e, {greedy({1}, 60)})[0];
  // "Once upon a time, there was a little girl named Lily."
  GenerateRequest r = greedy({1}, 60);
  r.stop = {"little girl"};
  auto cut = run_all(*e, {r})[0];
  EXPECT_EQ(cut.reason, FinishReason::Stop);
  EXPECT_EQ(cut.stop_reason, "little girl");
  EXPECT_EQ(cut.text, full.text.substr(0, full.text.find("little girl")));
  r.include_stop_str_in_output = true;
  auto with = run_all(*e, {r})[0];
  EXPECT_EQ(with.text, full.text.substr(0, full.text.find("little girl") + 11));
}

TEST(Engine, AbortFreesEverything) {
  auto e = make_engine(stories_path());
  e->start();
  std::atomic<int> outputs{0};
  std::atomic<bool> finished{false};
  std::atomic<int> reason{-1};
  GenerateRequest r = greedy({1}, 400);
  r.ignore_eos = true;
  auto id = e->submit(r, [&](const RequestOutput& o) {
    outputs++;
    if (o.finished) {
      reason = static_cast<int>(o.finish_reason);
      finished = true;
    }
  });
  ASSERT_TRUE(id.ok());
  while (outputs.load() < 5) std::this_thread::yield();
  e->abort(*id);
  for (int i = 0; i < 2000 && !finished.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(finished.load());
  EXPECT_EQ(reason.load(), static_cast<int>(FinishReason::Abort));
  for (int i = 0; i < 200 && !e->idle(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_TRUE(e->idle());
  e->stop();
  EXPECT_EQ(e->stats().kv.usage, 0.0);
}

// --device: the CPU (cpu, auto) runs; cuda is refused before the model is read, saying what this build and
// machine have (no CUDA backend here, no device, or a device the engine does not run on yet) and what to
// use; a misspelt device names the choices.
TEST(Engine, DeviceCpuRunsAndCudaIsAClearRefusal) {
  EngineConfig c;
  c.model_path = stories_path();
  for (const char* d : {"cpu", "auto"}) {
    c.device = d;
    auto e = Engine::create(c);
    ASSERT_TRUE(e.ok()) << d << ": " << e.error();
    GenerateRequest r;
    r.prompt = {1, 403, 407};
    r.max_tokens = 4;
    r.ignore_eos = true;
    EXPECT_EQ(run_all(**e, {r})[0].tokens.size(), 4u) << d;
  }
  c.device = "cuda";
  auto e = Engine::create(c);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().rfind("--device cuda: ", 0), 0u) << e.error();
  EXPECT_NE(e.error().find("use --device cpu"), std::string::npos) << e.error();
  c.device = "tpu";
  auto t = Engine::create(c);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error(), "--device 'tpu': not one of cpu, auto, cuda, cuda-emu, gpu-oracle");
}

// The GPU engine path (--device gpu-oracle: the GPU forward on the host oracle backend; cuda-emu: on
// the CUDA kernels, run by the CPU's emulator of CUDA -- what --device cuda runs on a GPU):
// stories260K's exact greedy text, and greedy outputs that do not depend on batching, chunking,
// prefix-cache hits (copy-on-write of shared blocks), preemption or decode steps replayed as graphs.
void expect_gpu_engine_path_greedy_and_batch_free(const std::string& device) {
  EngineConfig c;
  c.model_path = stories_path();
  c.device = device;
  c.gpu_memory_utilization = 0.25;  // (cuda-emu: three engines share the emulated device, as on a GPU)
  c.threads = 2;
  auto e = Engine::create(c);
  ASSERT_TRUE(e.ok()) << e.error();
  EXPECT_EQ((*e)->memory_plan().kv_dtype, "f16");
  auto out = run_all(**e, {greedy({1}, 200)});
  std::ifstream f(test::source_path("models/stories260K/expected_greedy_200.txt"));
  std::string expected((std::istreambuf_iterator<char>(f)), {});
  while (!expected.empty() && expected.back() == '\n') expected.pop_back();
  EXPECT_EQ(out[0].text, expected);

  for (const char* shape : {"tiny-qwen2", "tiny-olmoe", "tiny-gpt-oss"}) {  // dense; experts routed on the device
    SCOPED_TRACE(shape);
    const std::string model = tiny_model_path(shape);
    const int32_t n_vocab = make_engine(model)->model_info().n_vocab;
    std::vector<GenerateRequest> reqs;
    for (int32_t i = 0; i < 10; ++i) reqs.push_back(greedy(prompt_of(5 + 9 * i, i, n_vocab), 10 + (i % 4) * 5));
    for (int32_t i = 6; i < 10; ++i) {  // extend request 5's 50-token prompt: prefix-cache hits
      auto p = reqs[5].prompt;
      p.push_back(3 + i);
      reqs[static_cast<size_t>(i)].prompt = p;
    }
    EngineConfig g;
    g.model_path = model;
    g.device = device;
    g.gpu_memory_utilization = 0.25;
    g.threads = 2;
    g.max_num_seqs = 32;
    g.enable_prefix_caching = false;
    g.enforce_eager = true;  // alone without graphs; batched below with them (decode steps replay graphs)
    auto alone_engine = Engine::create(g);
    ASSERT_TRUE(alone_engine.ok()) << alone_engine.error();
    std::vector<std::vector<int32_t>> alone;
    for (const auto& r : reqs) alone.push_back(run_all(**alone_engine, {r})[0].tokens);
    g.enable_prefix_caching = true;
    g.enforce_eager = false;
    g.max_num_batched_tokens = 32;  // prompts in chunks beside decodes
    g.kv_cache_tokens = 256;        // 16 blocks for ~440 tokens of demand: preemption
    auto batched_engine = Engine::create(g);
    ASSERT_TRUE(batched_engine.ok()) << batched_engine.error();
    const auto batched = run_all(**batched_engine, reqs);
    for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(batched[i].tokens, alone[i]) << "request " << i;
    EXPECT_GT((*batched_engine)->stats().kv.prefix_hit_tokens, 0);
    EXPECT_GT((*batched_engine)->stats().num_preemptions, 0u);
  }
}
TEST(Engine, GpuEnginePathGivesTheGreedyTextAndIgnoresBatching) { expect_gpu_engine_path_greedy_and_batch_free("gpu-oracle"); }
TEST(Engine, CudaEmuEnginePathGivesTheGreedyTextAndIgnoresBatching) {
  TM_SKIP_EMULATOR_ENGINE_RUNS();
  expect_gpu_engine_path_greedy_and_batch_free("cuda-emu");
}

// On a GPU device a step whose every sample is a plain argmax takes the device's argmax of each row
// instead of downloading the logits. Greedy requests asking for logprobs (the sampler's path) get the
// same tokens as the plain greedy ones, alone and batched with them.
void expect_device_argmax_equals_the_sampler(const std::string& device) {
  EngineConfig c;
  c.model_path = tiny_model_path("tiny-qwen2");
  c.device = device;
  c.threads = 2;
  auto e = Engine::create(c);
  ASSERT_TRUE(e.ok()) << e.error();
  const int32_t n_vocab = (*e)->model_info().n_vocab;
  std::vector<GenerateRequest> plain, with_logprobs;
  for (int32_t i = 0; i < 4; ++i) {
    plain.push_back(greedy(prompt_of(6 + 5 * i, i, n_vocab), 12));
    with_logprobs.push_back(plain.back());
    with_logprobs.back().sampling.logprobs = 2;
  }
  const auto a = run_all(**e, plain);          // device argmax every step
  const auto b = run_all(**e, with_logprobs);  // the sampler's argmax every step
  std::vector<GenerateRequest> mixed = {plain[0], with_logprobs[1], plain[2], with_logprobs[3]};
  const auto m = run_all(**e, mixed);          // steps with both kinds: the sampler for all
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(a[i].tokens.size(), 12u) << i;
    EXPECT_EQ(a[i].tokens, b[i].tokens) << "request " << i;
    EXPECT_EQ(a[i].tokens, m[i].tokens) << "request " << i;
  }
}
TEST(Engine, GpuEnginePathDeviceArgmaxEqualsTheSampler) { expect_device_argmax_equals_the_sampler("gpu-oracle"); }
TEST(Engine, CudaEmuEnginePathDeviceArgmaxEqualsTheSampler) {
  TM_SKIP_EMULATOR_ENGINE_RUNS();
  expect_device_argmax_equals_the_sampler("cuda-emu");
}

// --kv-cache-dtype int8, fp8 and q4_0 on the GPU engine path: the plan names the type and spends its bytes
// per token (stories260K's head of 8: INT8 and FP8 8 + a 4-byte scale, Q4 4 + a 2-byte scale, F16 16) --
// on a device the same memory share holds that many more tokens -- and greedy outputs equal the CPU
// engine's over a cache of the same type (120 tokens of three prompts, batched): all of them with INT8
// and FP8; with Q4
// the first 64 (a K element that the two round differently in its last bits can take the other of two
// 4-bit codes, a sixteenth of the head's range, and a near-tie later goes the other way: on the
// emulator one of the three at token 104).
void expect_gpu_quantized_kv_caches(const std::string& device) {
  auto plan_of = [&](const char* dt) {
    EngineConfig c;
    c.model_path = stories_path();
    c.device = device;
    c.gpu_memory_utilization = 0.25;
    c.threads = 2;
    c.kv_cache_dtype = dt;
    auto e = Engine::create(c);
    EXPECT_TRUE(e.ok()) << e.error();
    return e.ok() ? (*e)->memory_plan() : MemoryPlan{};
  };
  const MemoryPlan f16 = plan_of("f16");
  const double f16_per_token = static_cast<double>(f16.kv_bytes) / static_cast<double>(f16.kv_tokens);
  const std::vector<GenerateRequest> reqs = {greedy({1}, 120), greedy({1, 403, 9}, 120), greedy({1, 79, 310, 5, 88}, 120)};
  for (const char* dt : {"int8", "fp8", "q4_0"}) {
    SCOPED_TRACE(dt);
    const MemoryPlan q = plan_of(dt);
    EXPECT_EQ(q.kv_dtype, dt);
    const bool int8 = std::string(dt) != "q4_0";  // (fp8: int8's layout and, as the bytes are the CPU's, all tokens)
    const double ratio = int8 ? 12.0 / 16.0 : 6.0 / 16.0;
    const double per_token = static_cast<double>(q.kv_bytes) / static_cast<double>(q.kv_tokens);
    EXPECT_NEAR(per_token / f16_per_token, ratio, 0.01);
    if (device != "gpu-oracle") {  // (the oracle's CPU plan sizes the cache for max_num_seqs whole contexts)
      EXPECT_NEAR(static_cast<double>(q.kv_tokens) / static_cast<double>(f16.kv_tokens), 1.0 / ratio, 0.02 / ratio);
    }
    EngineConfig c;
    c.model_path = stories_path();
    c.threads = 2;
    c.kv_cache_dtype = dt;
    auto cpu = Engine::create(c);
    ASSERT_TRUE(cpu.ok()) << cpu.error();
    c.device = device;
    c.gpu_memory_utilization = 0.25;
    auto gpu = Engine::create(c);
    ASSERT_TRUE(gpu.ok()) << gpu.error();
    const auto want = run_all(**cpu, reqs), got = run_all(**gpu, reqs);
    for (size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(got[i].tokens.size(), 120u) << i;
      size_t same = 0;
      while (same < got[i].tokens.size() && same < want[i].tokens.size() && got[i].tokens[same] == want[i].tokens[same]) ++same;
      EXPECT_GE(same, int8 ? 120u : 64u) << "request " << i << ": " << testing::PrintToString(got[i].tokens) << " vs "
                                         << testing::PrintToString(want[i].tokens);
    }
  }
}
TEST(Engine, GpuEnginePathRunsQuantizedKvCaches) { expect_gpu_quantized_kv_caches("gpu-oracle"); }
TEST(Engine, CudaEmuEnginePathRunsQuantizedKvCaches) {
  TM_SKIP_EMULATOR_ENGINE_RUNS();
  expect_gpu_quantized_kv_caches("cuda-emu");
}

// What the GPU engine path does not run yet is refused at create, saying what and what to use.
TEST(Engine, GpuEnginePathRefusesWhatItDoesNotRun) {
  EngineConfig c;
  c.device = "gpu-oracle";
  c.model_path = stories_path();
  c.kv_cache_dtype = "bf16";
  auto e = Engine::create(c);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().find("--kv-cache-dtype bf16 is not supported on a GPU (auto, f16, int8, q4_0, fp8, fp8_e4m3, fp8_e5m2)"),
            std::string::npos)
      << e.error();
  EXPECT_NE(e.error().find("use --device cpu"), std::string::npos) << e.error();
}

// vLLM's --seed (EngineConfig::seed): requests without a seed draw theirs from one generator seeded with
// it, so the same requests in the same order sample the same tokens on every run -- while two requests
// of a run still differ, another seed changes them, and a request's own seed wins.
TEST(Engine, SeedMakesUnseededSamplingReproducible) {
  auto sampled = [](std::vector<int32_t> prompt, std::optional<uint64_t> seed = std::nullopt) {
    GenerateRequest r;
    r.prompt = std::move(prompt);
    r.max_tokens = 24;
    r.sampling.temperature = 1.0f;
    r.sampling.seed = seed;
    return r;
  };
  const std::vector<GenerateRequest> reqs = {sampled({1}), sampled({1}), sampled({1, 403}), sampled({1}, 3)};
  auto run = [&](std::optional<uint64_t> seed) {
    EngineConfig c;
    c.model_path = stories_path();
    c.threads = 2;
    c.seed = seed;
    auto e = Engine::create(c);
    EXPECT_TRUE(e.ok()) << e.error();
    return run_all(**e, reqs);
  };
  const auto a = run(7), b = run(7), other = run(8), unseeded = run(std::nullopt);
  for (size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(a[i].tokens.size(), 24u) << i;
    EXPECT_EQ(a[i].tokens, b[i].tokens) << "request " << i;
  }
  EXPECT_NE(a[0].tokens, a[1].tokens);  // one generator, a seed each
  EXPECT_TRUE(a[0].tokens != other[0].tokens || a[1].tokens != other[1].tokens || a[2].tokens != other[2].tokens);
  EXPECT_EQ(a[3].tokens, other[3].tokens);  // the request's "seed": 3 wherever it runs
  EXPECT_EQ(a[3].tokens, unseeded[3].tokens);
}

TEST(Engine, RejectsInvalidRequests) {
  auto e = make_engine(stories_path());
  EXPECT_FALSE(e->submit(greedy({}, 5), {}).ok());
  EXPECT_FALSE(e->submit(greedy({1, 99999}, 5), {}).ok());
  EXPECT_FALSE(e->submit(greedy({1}, 0), {}).ok());
  EXPECT_FALSE(e->submit(greedy(std::vector<int32_t>(600, 5), 5), {}).ok());  // context is 512
  EXPECT_FALSE(e->submit(greedy(std::vector<int32_t>(500, 5), 50), {}).ok());
}

TEST(Engine, QueueTimeoutFailsRequestsThatWaitTooLong) {
  // Both requests wait in the inbox for 20 ms before the first step; the second allows 1 ms in the
  // queue, so the first step's expiry check fails it before anything is scheduled.
  auto e = make_engine(stories_path());
  GenerateRequest first = greedy({1}, 20);
  GenerateRequest second = greedy({1, 5}, 5);
  second.queue_timeout_s = 0.001;
  std::vector<Collected> out(2);
  for (int i = 0; i < 2; ++i) {
    Collected* c = &out[i];
    auto id = e->submit(i == 0 ? first : second, [c](const RequestOutput& o) {
      c->tokens.insert(c->tokens.end(), o.token_ids.begin(), o.token_ids.end());
      if (o.finished) {
        c->finished = true;
        c->reason = o.finish_reason;
        c->stop_reason = o.stop_reason;
      }
    });
    ASSERT_TRUE(id.ok());
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  e->run_until_idle();
  EXPECT_EQ(out[0].reason, FinishReason::Length);
  EXPECT_EQ(out[0].tokens.size(), 20u);
  EXPECT_EQ(out[1].reason, FinishReason::Error);
  EXPECT_EQ(out[1].stop_reason, "timeout");
  EXPECT_TRUE(out[1].tokens.empty());
  EXPECT_EQ(e->stats().kv.usage, 0.0);
}
