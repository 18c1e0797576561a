// Context shift (SchedulerConfig::context_shift): a request that reaches its max_model_len keeps its
// first tokens, drops the oldest half of the rest and goes on. The fake model reads its KV through the
// block table, so the outputs equal shift_reference() (computed from tokens alone) only if the
// recomputation after each shift and its prefix-cache hits are right.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>

#include "sim_engine.h"

using namespace tmill;
using namespace tmill::test;

namespace {

constexpr int32_t kVocab = 1000;

std::vector<int32_t> prompt_of(int32_t first, int32_t n) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

// What the scheduler must produce: before computing the next token of a sequence of max_model_len
// tokens, keep `keep` (-1: the prompt; at most half the context and n - 2), drop half of the rest.
struct ShiftRef {
  std::vector<int32_t> outputs;
  std::vector<int32_t> final_tokens;  // the sequence's tokens after its last output
  int shifts = 0;
};
ShiftRef shift_reference(std::vector<int32_t> tokens, int32_t keep_cfg, int32_t max_len, int32_t max_tokens) {
  ShiftRef r;
  int32_t num_prompt = static_cast<int32_t>(tokens.size());
  while (static_cast<int32_t>(r.outputs.size()) < max_tokens) {
    const auto n = static_cast<int32_t>(tokens.size());
    if (n >= max_len) {
      int32_t keep = keep_cfg < 0 ? num_prompt : keep_cfg;
      keep = std::clamp(keep, 0, std::min(max_len / 2, n - 2));
      const int32_t discard = (n - keep) / 2;
      tokens.erase(tokens.begin() + keep, tokens.begin() + keep + discard);
      num_prompt -= std::max(0, std::min(keep + discard, num_prompt) - keep);
      ++r.shifts;
    }
    uint64_t v = kSimSeed;
    for (int32_t t : tokens) v = sim_mix(v, t);
    const auto next = static_cast<int32_t>(v % kVocab);
    tokens.push_back(next);
    r.outputs.push_back(next);
  }
  r.final_tokens = tokens;
  return r;
}

SchedulerConfig config(int32_t num_blocks, int32_t budget, int32_t keep) {
  SchedulerConfig c;
  c.max_num_batched_tokens = budget;
  c.max_num_seqs = 16;
  c.max_model_len = 16;
  c.kv = {num_blocks, 4, true};
  c.context_shift = true;
  c.context_shift_keep = keep;
  return c;
}

RequestParams req(RequestId id, std::vector<int32_t> prompt, int32_t max_tokens) {
  RequestParams p;
  p.id = id;
  p.prompt = std::move(prompt);
  p.max_tokens = max_tokens;
  return p;
}

struct RunResult {
  std::map<RequestId, std::vector<int32_t>> outputs;
  std::map<RequestId, FinishReason> finish;
  int steps = 0;
};

RunResult run(Scheduler& sched, int max_steps = 2000) {
  SimEngine sim(sched, kVocab);
  RunResult r;
  while (sched.has_unfinished() && r.steps < max_steps) {
    const SchedulerOutput out = sched.schedule();
    for (const ScheduledRequest& s : out.scheduled) {
      EXPECT_LE(s.start_pos + s.num_tokens, sched.config().max_model_len) << "past the context";
    }
    for (const RequestEvent& e : sched.update(out, sim.forward(sched, out))) {
      r.outputs[e.id].push_back(*e.token);
      if (e.finish != FinishReason::None) r.finish[e.id] = e.finish;
    }
    ++r.steps;
  }
  return r;
}

}  // namespace

TEST(ContextShift, GeneratesPastTheContextKeepingThePrefix) {
  auto sched = std::move(Scheduler::create(config(64, 100, 2))).value();
  sched.add_request(req(1, prompt_of(100, 6), 40));
  const RunResult r = run(sched);
  const ShiftRef ref = shift_reference(prompt_of(100, 6), 2, 16, 40);
  ASSERT_GT(ref.shifts, 3);
  EXPECT_EQ(r.outputs.at(1), ref.outputs);
  EXPECT_EQ(r.finish.at(1), FinishReason::Length);  // max_tokens, never the context
  EXPECT_EQ(sched.stats().num_context_shifts, static_cast<uint64_t>(ref.shifts));
  EXPECT_EQ(sched.stats().num_preemptions, 0u);
  EXPECT_EQ(sched.kv().num_free_blocks(), 63);
}

TEST(ContextShift, MinusOneKeepsThePromptAndTheTokensAreTheKeptOnes) {
  auto sched = std::move(Scheduler::create(config(64, 100, -1))).value();
  sched.add_request(req(1, prompt_of(200, 5), 30));
  SimEngine sim(sched, kVocab);
  const ShiftRef ref = shift_reference(prompt_of(200, 5), -1, 16, 30);
  std::vector<int32_t> outputs;
  while (sched.has_unfinished()) {
    const SchedulerOutput out = sched.schedule();
    for (const RequestEvent& e : sched.update(out, sim.forward(sched, out))) {
      outputs.push_back(*e.token);
      if (const Request* q = sched.request(1)) {
        // the prompt always leads; num_generated counts every output, the context only the kept ones
        EXPECT_EQ(std::vector<int32_t>(q->tokens().begin(), q->tokens().begin() + 5), prompt_of(200, 5));
        EXPECT_EQ(q->num_generated(), static_cast<int32_t>(outputs.size()));
        EXPECT_EQ(q->num_prompt_tokens(), 5);
        if (outputs.size() == 29) {
          EXPECT_EQ(std::vector<int32_t>(q->tokens().begin(), q->tokens().end()),
                    shift_reference(prompt_of(200, 5), -1, 16, 29).final_tokens);
        }
      }
    }
  }
  EXPECT_EQ(outputs, ref.outputs);
  EXPECT_GT(sched.stats().num_context_shifts, 0u);
}

TEST(ContextShift, ShiftsUnderPreemptionInATightCache) {
  // 10 usable blocks of 4 = 40 slots for three sequences of up to 16 tokens: preemption and context
  // shifts interleave; every output still equals the uncached reference.
  auto sched = std::move(Scheduler::create(config(11, 7, 0))).value();
  for (RequestId id = 1; id <= 3; ++id) sched.add_request(req(id, prompt_of(static_cast<int32_t>(id) * 50, 7), 45));
  const RunResult r = run(sched);
  for (RequestId id = 1; id <= 3; ++id) {
    const ShiftRef ref = shift_reference(prompt_of(static_cast<int32_t>(id) * 50, 7), 0, 16, 45);
    EXPECT_EQ(r.outputs.at(id), ref.outputs) << "request " << id;
    EXPECT_EQ(r.finish.at(id), FinishReason::Length);
  }
  EXPECT_GT(sched.stats().num_preemptions, 0u);
  EXPECT_GT(sched.stats().num_context_shifts, 3u);
  EXPECT_EQ(sched.kv().num_free_blocks(), 10);
}

TEST(ContextShift, OffTheContextEndsTheRequest) {
  SchedulerConfig c = config(64, 100, 2);
  c.context_shift = false;
  auto sched = std::move(Scheduler::create(c)).value();
  sched.add_request(req(1, prompt_of(100, 6), 40));
  const RunResult r = run(sched);
  EXPECT_EQ(r.outputs.at(1).size(), 10u);  // 6 + 10 = max_model_len 16
  EXPECT_EQ(r.finish.at(1), FinishReason::Length);
  EXPECT_EQ(sched.stats().num_context_shifts, 0u);
}
