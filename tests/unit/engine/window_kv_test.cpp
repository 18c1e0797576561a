// KV blocks behind a sliding window (EngineConfig::free_out_of_window_kv) on tiny-mistral: llama with
// an 8-position window on every layer and 16-token blocks. Freeing them changes no greedy token, keeps
// each sequence at a few blocks however long it runs, and a later prompt that repeats a finished
// sequence hits the blocks it released (their prefix-cache keys stay right) and continues it exactly.
#include <gtest/gtest.h>

#include <algorithm>

#include "convert/dummy.h"
#include "engine/engine.h"
#include "test_support.h"

using namespace tmill;

namespace {

const std::string& mistral() {
  static const std::string path = [] {
    DummyOptions o;
    o.shape = *find_shape("tiny-mistral");
    o.dtype = DType::F32;
    o.std = 0.1f;  // sharper logits: fewer near ties
    o.seed = 11;
    const std::string p = test::temp_dir() + "/tiny-mistral.gguf";
    EXPECT_TRUE(write_dummy_model(o, p).ok());
    return p;
  }();
  return path;
}

std::unique_ptr<Engine> engine(bool free_window) {
  EngineConfig c;
  c.model_path = mistral();
  c.threads = 2;
  c.max_num_batched_tokens = 64;
  c.free_out_of_window_kv = free_window;
  auto e = Engine::create(c);
  EXPECT_TRUE(e.ok()) << e.error();
  return std::move(e).value();
}

GenerateRequest greedy(std::vector<int32_t> prompt, int32_t max_tokens) {
  GenerateRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.sampling.temperature = 0;
  return r;
}

std::vector<int32_t> prompt_of(int32_t len, int32_t salt) {
  std::vector<int32_t> p = {1};
  for (int32_t i = 1; i < len; ++i) p.push_back(3 + (i * 7 + salt * 13) % 500);
  return p;
}

// Runs the requests together step by step; returns their tokens and the most KV blocks in use.
std::vector<std::vector<int32_t>> run(Engine& e, const std::vector<GenerateRequest>& reqs, int32_t* max_used) {
  std::vector<std::vector<int32_t>> out(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    auto* o = &out[i];
    auto id = e.submit(reqs[i], [o](const RequestOutput& r) { o->insert(o->end(), r.token_ids.begin(), r.token_ids.end()); });
    EXPECT_TRUE(id.ok()) << id.error();
  }
  *max_used = 0;
  while (e.step()) {
    const EngineStats st = e.stats();
    *max_used = std::max(*max_used, st.kv.num_blocks - st.kv.num_free_blocks);
  }
  return out;
}

}  // namespace

TEST(WindowKv, GreedyUnchangedAndKvBoundedByTheWindow) {
  const std::vector<GenerateRequest> reqs = {greedy(prompt_of(20, 1), 150), greedy(prompt_of(37, 2), 120)};
  int32_t kept = 0, freed = 0;
  auto e0 = engine(false);
  const auto want = run(*e0, reqs, &kept);
  auto e1 = engine(true);
  const auto got = run(*e1, reqs, &freed);
  ASSERT_EQ(want[0].size(), 150u);
  ASSERT_EQ(want[1].size(), 120u);
  EXPECT_EQ(got, want);
  EXPECT_GE(kept, 18);     // ~138 + ~155 positions in blocks of 16 when the second ends
  EXPECT_LE(freed, 2 * 3);  // the 8 positions a query sees span at most 2 blocks, + the one written
  EXPECT_EQ(e1->stats().kv.num_free_blocks, e1->stats().kv.num_blocks);

  // The first sequence's prompt and 60 outputs as a new prompt: a prefix hit on blocks that sequence
  // released long before it ended; the continuation is the same tokens.
  std::vector<int32_t> prompt = reqs[0].prompt;
  prompt.insert(prompt.end(), want[0].begin(), want[0].begin() + 60);
  const int64_t hits = e1->stats().kv.prefix_hit_tokens;
  const auto cont = run(*e1, {greedy(prompt, 30)}, &freed);
  EXPECT_EQ(e1->stats().kv.prefix_hit_tokens - hits, 64);  // (80 - 1) / 16 = 4 whole blocks
  EXPECT_EQ(cont[0], std::vector<int32_t>(want[0].begin() + 60, want[0].begin() + 90));
}
