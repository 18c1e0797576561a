// Context shift through the engine on stories260K: generation runs past max_model_len, and the
// tokens after a shift are exactly what a fresh greedy request on the shifted sequence produces
// (the kept prefix and the recomputed rest are the model's own KV, not stale positions).
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/engine.h"
#include "test_support.h"
#include "tokenizer/tokenizer.h"

using namespace tmill;

namespace {

constexpr int32_t kCtx = 64;

std::unique_ptr<Engine> stories(bool shift, int32_t keep) {
  EngineConfig c;
  c.model_path = test::source_path("models/stories260K/stories260K.gguf");
  c.threads = 2;
  c.max_model_len = kCtx;
  c.context_shift = shift;
  c.context_shift_keep = keep;
  auto e = Engine::create(c);
  EXPECT_TRUE(e.ok()) << e.error();
  return std::move(e).value();
}

struct Out {
  std::vector<int32_t> tokens;
  FinishReason reason = FinishReason::None;
};

Out generate(Engine& e, std::vector<int32_t> prompt, int32_t max_tokens) {
  GenerateRequest r;
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.ignore_eos = true;
  r.sampling.temperature = 0;
  Out o;
  auto id = e.submit(r, [&o](const RequestOutput& out) {
    o.tokens.insert(o.tokens.end(), out.token_ids.begin(), out.token_ids.end());
    if (out.finished) o.reason = out.finish_reason;
  });
  EXPECT_TRUE(id.ok()) << id.error();
  e.run_until_idle();
  return o;
}

}  // namespace

TEST(EngineContextShift, GeneratesPastTheContextAsAFreshRequestWould) {
  auto e = stories(true, 1);
  const std::vector<int32_t> prompt = e->tokenizer()->encode("Once upon a time, there was a little girl", true, false);
  const Out o = generate(*e, prompt, 150);
  ASSERT_EQ(o.tokens.size(), 150u);
  EXPECT_EQ(o.reason, FinishReason::Length);
  EXPECT_GE(e->stats().num_context_shifts, 3u);

  // Replay the shifts on the token list; after the first one, a fresh request (prefix cache off the
  // table: another engine) on the shifted tokens must continue with the same greedy tokens.
  std::vector<int32_t> seq = prompt;
  size_t first_shift = 0;
  std::vector<int32_t> shifted;
  for (size_t k = 0; k < o.tokens.size(); ++k) {
    const auto n = static_cast<int32_t>(seq.size());
    if (n >= kCtx) {
      const int32_t keep = std::clamp(1, 0, std::min(kCtx / 2, n - 2));
      seq.erase(seq.begin() + keep, seq.begin() + keep + (n - keep) / 2);
      if (shifted.empty()) {
        shifted = seq;
        first_shift = k;
      }
    }
    seq.push_back(o.tokens[k]);
  }
  ASSERT_FALSE(shifted.empty());
  const auto fresh_len = static_cast<int32_t>(kCtx - shifted.size());
  auto plain = stories(false, 1);
  const Out fresh = generate(*plain, shifted, std::min<int32_t>(fresh_len, 20));
  ASSERT_FALSE(fresh.tokens.empty());
  const std::vector<int32_t> after(o.tokens.begin() + static_cast<ptrdiff_t>(first_shift),
                                   o.tokens.begin() + static_cast<ptrdiff_t>(first_shift + fresh.tokens.size()));
  EXPECT_EQ(after, fresh.tokens);
}

TEST(EngineContextShift, OffRefusesWhatDoesNotFitAndOnAcceptsIt) {
  auto off = stories(false, 1);
  auto on = stories(true, 1);
  GenerateRequest r;
  r.prompt = off->tokenizer()->encode("Once upon a time", true, false);
  r.max_tokens = 200;
  const auto problem = off->check(r);
  ASSERT_TRUE(problem.has_value());
  EXPECT_EQ(problem->kind, RequestProblem::Kind::ContextLength);
  EXPECT_FALSE(on->check(r).has_value());
}
