// Exact schedules for small scenarios. Steps are written as "id@start+n" per scheduled request,
// '*' when the last token produces a sample, '^' when newly admitted from the waiting queue.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <string>

#include "sim_engine.h"

using namespace tmill;
using namespace tmill::test;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

namespace {

constexpr int32_t kVocab = 1000;  // tokens sampled by the fake model are < kVocab

std::vector<int32_t> prompt_of(int32_t first, int32_t n) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

RequestParams req(RequestId id, std::vector<int32_t> prompt, int32_t max_tokens = 100, int32_t priority = 0) {
  RequestParams p;
  p.id = id;
  p.prompt = std::move(prompt);
  p.max_tokens = max_tokens;
  p.priority = priority;
  return p;
}

SchedulerConfig config(int32_t num_blocks, int32_t budget, int32_t max_seqs = 16) {
  SchedulerConfig c;
  c.max_num_batched_tokens = budget;
  c.max_num_seqs = max_seqs;
  c.max_model_len = (num_blocks - 1) * 4;  // the KV capacity
  c.kv = {num_blocks, 4, true};
  return c;
}

std::string describe(const SchedulerOutput& out) {
  std::string s;
  for (const ScheduledRequest& r : out.scheduled) {
    if (!s.empty()) s += ' ';
    s += std::to_string(r.id) + "@" + std::to_string(r.start_pos) + "+" + std::to_string(r.num_tokens);
    if (r.produces_sample) s += '*';
    if (r.resumed) s += '^';
  }
  return s;
}

struct Harness {
  explicit Harness(const SchedulerConfig& c) : sched(std::move(Scheduler::create(c)).value()), sim(sched, kVocab) {}
  void add(RequestParams p) { sched.add_request(std::move(p)); }
  // One engine iteration; returns the schedule description.
  std::string step() {
    last = sched.schedule();
    events = sched.update(last, sim.forward(sched, last));
    return describe(last);
  }
  // The same with the speculative drafts set on the requests (verified greedily by the fake model).
  std::string step_spec() {
    last = sched.schedule();
    const auto sampled = sim.forward_spec(sched, last);
    events = sched.update(last, std::span<const std::vector<int32_t>>(sampled));
    return describe(last);
  }
  Scheduler sched;
  SimEngine sim;
  SchedulerOutput last;
  std::vector<RequestEvent> events;
};

}  // namespace

TEST(Scheduler, SplitsTheTokenBudget) {
  Harness h(config(64, 10));
  h.add(req(1, prompt_of(0, 6)));
  h.add(req(2, prompt_of(10, 6)));
  h.add(req(3, prompt_of(20, 6)));
  EXPECT_EQ(h.step(), "1@0+6*^ 2@0+4^");
  EXPECT_EQ(h.last.total_tokens, 10);
  EXPECT_EQ(h.events.size(), 1u);
  EXPECT_EQ(h.step(), "1@6+1* 2@4+2* 3@0+6*^");
  EXPECT_EQ(h.step(), "1@7+1* 2@6+1* 3@6+1*");
  EXPECT_EQ(h.sched.stats().num_running, 3);
  EXPECT_EQ(h.sched.stats().last_step_tokens, 3);
}

TEST(Scheduler, ChunkedPrefillInterleavesWithDecodes) {
  Harness h(config(64, 8));
  h.add(req(1, prompt_of(0, 3)));
  EXPECT_EQ(h.step(), "1@0+3*^");
  h.add(req(2, prompt_of(100, 20)));
  EXPECT_EQ(h.step(), "1@3+1* 2@0+7^");
  EXPECT_EQ(h.step(), "1@4+1* 2@7+7");
  EXPECT_EQ(h.step(), "1@5+1* 2@14+6*");
  EXPECT_EQ(h.step(), "1@6+1* 2@20+1*");
  // The chunked prompt's token ids and block table are handed to the engine as computed.
  EXPECT_THAT(h.last.scheduled[0].block_table, ElementsAre(1, 4));
  EXPECT_THAT(h.last.scheduled[1].block_table, ElementsAre(2, 3, 5, 6, 7, 8));
}

TEST(Scheduler, LongPrefillThresholdCapsOneRequestPerStep) {
  SchedulerConfig c = config(64, 16);
  c.long_prefill_token_threshold = 5;
  Harness h(c);
  h.add(req(1, prompt_of(0, 12)));
  h.add(req(2, prompt_of(50, 3)));
  EXPECT_EQ(h.step(), "1@0+5^ 2@0+3*^");
  EXPECT_EQ(h.step(), "1@5+5 2@3+1*");
  EXPECT_EQ(h.step(), "1@10+2* 2@4+1*");
}

TEST(Scheduler, MaxNumSeqsCapsTheBatch) {
  Harness h(config(64, 100, 2));
  h.add(req(1, prompt_of(0, 4), /*max_tokens=*/1));
  h.add(req(2, prompt_of(10, 4)));
  h.add(req(3, prompt_of(20, 4)));
  EXPECT_EQ(h.step(), "1@0+4*^ 2@0+4*^");
  ASSERT_EQ(h.events.size(), 2u);
  EXPECT_EQ(h.events[0].finish, FinishReason::Length);  // max_tokens = 1
  EXPECT_EQ(h.step(), "2@4+1* 3@0+4*^");
}

TEST(Scheduler, PrefixHitStartsPastTheCachedBlocks) {
  Harness h(config(64, 100));
  h.add(req(1, prompt_of(0, 10), 1));
  EXPECT_EQ(h.step(), "1@0+10*^");
  EXPECT_FALSE(h.sched.has_unfinished());
  std::vector<int32_t> p2 = prompt_of(0, 8);
  p2.insert(p2.end(), {500, 501, 502});
  h.add(req(2, p2, 1));
  EXPECT_EQ(h.step(), "2@8+3*^");
  // Blocks 1 and 2 come from the cache; 3, request 1's unkept partial block, is reused first.
  EXPECT_THAT(h.last.scheduled[0].block_table, ElementsAre(1, 2, 3));
  EXPECT_THAT(h.last.scheduled[0].token_ids, ElementsAre(500, 501, 502));
  const KvStats kv = h.sched.stats().kv;
  EXPECT_EQ(kv.prefix_query_tokens, 10 + 11);
  EXPECT_EQ(kv.prefix_hit_tokens, 8);
}

TEST(Scheduler, PreemptsTheNewestRunningRequestAndRequeuesItFirst) {
  Harness h(config(7, 100));  // 6 usable blocks of 4
  h.add(req(1, prompt_of(0, 8), 3));
  h.add(req(2, prompt_of(10, 8), 3));
  h.add(req(3, prompt_of(20, 8), 3));
  EXPECT_EQ(h.step(), "1@0+8*^ 2@0+8*^ 3@0+8*^");
  EXPECT_EQ(h.sched.kv().num_free_blocks(), 0);
  h.add(req(4, prompt_of(30, 4), 3));
  // Request 1 needs a 3rd block: request 3 (newest) is preempted, its blocks go to 1 and 2.
  EXPECT_EQ(h.step(), "1@8+1* 2@8+1*");
  EXPECT_THAT(h.last.preempted, ElementsAre(3));
  EXPECT_THAT(h.last.scheduled[0].block_table, ElementsAre(1, 2, 6));
  EXPECT_THAT(h.last.scheduled[1].block_table, ElementsAre(3, 4, 5));
  EXPECT_THAT(h.sched.waiting(), ElementsAre(3, 4));  // front of the queue, ahead of request 4
  const Request* r3 = h.sched.request(3);
  ASSERT_NE(r3, nullptr);
  EXPECT_EQ(r3->status, RequestStatus::Preempted);
  EXPECT_EQ(r3->num_computed_tokens, 0);
  EXPECT_EQ(r3->num_preemptions, 1);
  EXPECT_EQ(r3->num_output_tokens(), 1);  // its first output is kept
  EXPECT_EQ(h.sched.stats().num_preemptions, 1u);
  EXPECT_EQ(h.step(), "1@9+1* 2@9+1*");  // 3 needs 3 blocks: none free, 4 must wait behind it
  EXPECT_EQ(h.sched.request(1), nullptr);  // 1 and 2 finished (max_tokens 3)
  EXPECT_EQ(h.sched.request(2), nullptr);
  // 3 resumes: prompt + its output recomputed (its own cached blocks were evicted), then 4.
  EXPECT_EQ(h.step(), "3@0+9*^ 4@0+4*^");
}

TEST(Scheduler, ARequestThatCannotFitPreemptsItself) {
  Harness h(config(6, 100));  // 5 usable blocks
  h.add(req(1, prompt_of(0, 8)));
  h.add(req(2, prompt_of(10, 8)));
  EXPECT_EQ(h.step(), "1@0+8*^ 2@0+8*^");
  EXPECT_EQ(h.step(), "1@8+1*");  // 1 takes the last block; 2 is the newest: it preempts itself
  EXPECT_THAT(h.last.preempted, ElementsAre(2));
  EXPECT_THAT(h.sched.running(), ElementsAre(1));
  EXPECT_THAT(h.sched.waiting(), ElementsAre(2));
}

TEST(Scheduler, PriorityPolicyOrdersWaitingAndPreemptsLowestPriority) {
  SchedulerConfig c = config(6, 100);  // 5 usable blocks
  c.policy = SchedulingPolicy::Priority;
  Harness h(c);
  h.add(req(1, prompt_of(0, 8), 100, /*priority=*/5));
  EXPECT_EQ(h.step(), "1@0+8*^");
  h.add(req(2, prompt_of(10, 8), 100, 0));
  h.add(req(3, prompt_of(20, 8), 100, 0));
  h.add(req(4, prompt_of(30, 4), 100, 1));
  EXPECT_THAT(h.sched.waiting(), ElementsAre(2, 3, 4));
  EXPECT_EQ(h.step(), "1@8+1* 2@0+8*^");  // 1 grows to 3 blocks, 2 takes the last 2
  // 1 fits this step, but 2 does not: the victim is 1 (priority 5), already planned, so its
  // token is given back and it leaves the batch.
  EXPECT_EQ(h.step(), "2@8+1*");
  EXPECT_THAT(h.last.preempted, ElementsAre(1));
  EXPECT_THAT(h.last.scheduled[0].block_table, ElementsAre(4, 5, 3));
  EXPECT_THAT(h.sched.waiting(), ElementsAre(3, 4, 1));  // by (priority, arrival)
}

TEST(Scheduler, FinishesOnStopTokensLimitsAndAbort) {
  Harness h(config(64, 100));
  // Learn what the fake model says after prompt 0..3, then use it as a stop token.
  const RefResult ref = reference_generate(prompt_of(0, 4), 4, req(0, {}, 5), 1000, kVocab);
  ASSERT_EQ(ref.finish, FinishReason::Length);
  ASSERT_EQ(std::count(ref.outputs.begin(), ref.outputs.end(), ref.outputs[1]), 1);  // fixture sanity
  RequestParams stop = req(1, prompt_of(0, 4), 5);
  stop.stop_token_ids = {ref.outputs[1]};
  RequestParams min = stop;
  min.id = 2;
  min.min_tokens = 3;  // the same stop token is ignored before 3 outputs
  RequestParams len = req(3, prompt_of(0, 4), 2);
  RequestParams ctx = req(4, prompt_of(0, 4), 100);
  ctx.max_model_len = 7;
  h.add(stop);
  h.add(min);
  h.add(len);
  h.add(ctx);
  h.add(req(5, prompt_of(0, 4)));
  std::map<RequestId, RequestEvent> done;
  std::map<RequestId, std::vector<int32_t>> outs;
  for (int i = 0; i < 8; ++i) {
    h.step();
    for (const RequestEvent& e : h.events) {
      outs[e.id].push_back(*e.token);
      if (e.finish != FinishReason::None) done[e.id] = e;
    }
    if (i == 1) {
      EXPECT_TRUE(h.sched.abort(5));
      EXPECT_FALSE(h.sched.abort(5));
    }
  }
  EXPECT_EQ(done[1].finish, FinishReason::Stop);
  EXPECT_EQ(outs[1], std::vector<int32_t>(ref.outputs.begin(), ref.outputs.begin() + 2));
  EXPECT_EQ(done[2].finish, FinishReason::Length);
  EXPECT_EQ(outs[2], ref.outputs);  // the stop token at output 2 was ignored (min_tokens 3)
  EXPECT_EQ(done[3].finish, FinishReason::Length);
  EXPECT_EQ(outs[3].size(), 2u);
  EXPECT_EQ(done[4].finish, FinishReason::Length);
  EXPECT_EQ(outs[4].size(), 3u);  // 4 prompt + 3 outputs = max_model_len 7
  EXPECT_EQ(done.count(5), 0u);
  EXPECT_EQ(outs[5].size(), 2u);
  EXPECT_FALSE(h.sched.has_unfinished());
  EXPECT_EQ(h.sched.kv().num_free_blocks(), 63);
}

TEST(Scheduler, AbortWorksInEveryState) {
  Harness h(config(7, 100));
  h.add(req(1, prompt_of(0, 8)));
  h.add(req(2, prompt_of(10, 8)));
  h.add(req(3, prompt_of(20, 8)));
  h.step();
  h.add(req(4, prompt_of(30, 4)));
  h.step();  // 3 preempted, 4 waiting
  ASSERT_EQ(h.sched.request(3)->status, RequestStatus::Preempted);
  EXPECT_TRUE(h.sched.abort(3));  // preempted
  EXPECT_TRUE(h.sched.abort(4));  // waiting
  EXPECT_TRUE(h.sched.finish(1, FinishReason::Stop));  // running (engine found a stop string)
  SchedulerOutput out = h.sched.schedule();
  EXPECT_EQ(describe(out), "2@9+1*");
  EXPECT_TRUE(h.sched.abort(2));  // in flight: update() skips it
  EXPECT_THAT(h.sched.update(out, std::vector<int32_t>{7}), IsEmpty());
  EXPECT_FALSE(h.sched.has_unfinished());
  EXPECT_EQ(h.sched.kv().num_free_blocks(), 6);
  EXPECT_EQ(h.sched.stats().kv.used_slots, 0);
}

TEST(Scheduler, ForkSharesTheParentsBlocks) {
  Harness h(config(64, 100));
  h.add(req(1, prompt_of(0, 6), 3));
  EXPECT_EQ(h.step(), "1@0+6*^");
  const int32_t parent_first = *h.events[0].token;
  auto ev = h.sched.fork(1, 2, 777);
  ASSERT_TRUE(ev.ok()) << ev.error();
  EXPECT_EQ(ev->finish, FinishReason::None);
  EXPECT_THAT(h.sched.kv().block_table(2), ElementsAre(1, 2));
  EXPECT_EQ(h.sched.kv().pool().ref_count(2), 2);
  EXPECT_EQ(h.step(), "1@6+1* 2@6+1*");
  EXPECT_THAT(h.last.block_copies, ElementsAre(BlockCopy{2, 3}));  // the parent writes first: it copies
  EXPECT_THAT(h.last.scheduled[0].token_ids, ElementsAre(parent_first));
  EXPECT_THAT(h.last.scheduled[1].token_ids, ElementsAre(777));
  EXPECT_THAT(h.last.scheduled[0].block_table, ElementsAre(1, 3));
  EXPECT_THAT(h.last.scheduled[1].block_table, ElementsAre(1, 2));
  // Both continue exactly as the model would from their own first token.
  std::vector<int32_t> child_tokens = prompt_of(0, 6);
  child_tokens.push_back(777);
  const RefResult want = reference_generate(child_tokens, 6, req(2, {}, 3), 1000, kVocab);
  std::vector<int32_t> got{777, *h.events[1].token};
  while (h.sched.has_unfinished()) {
    h.step();
    for (const RequestEvent& e : h.events)
      if (e.id == 2) got.push_back(*e.token);
  }
  EXPECT_EQ(got, want.outputs);
  EXPECT_FALSE(h.sched.fork(1, 3).ok());  // parent gone
}

// Recurrent models: a request runs only with a state slot (at most num_state_slots at once, the rest
// wait), the scheduled entries name their slots, and a fork with a slot free copies the parent's state;
// without one the child waits and is computed from its start.
TEST(Scheduler, StateSlotsBoundTheRunningRequests) {
  SchedulerConfig c = config(64, 100);
  c.kv.enable_prefix_caching = false;
  c.kv.num_state_slots = 2;
  Harness h(c);
  h.add(req(1, prompt_of(0, 6), 3));
  h.add(req(2, prompt_of(10, 5), 3));
  h.add(req(3, prompt_of(20, 4), 3));
  EXPECT_EQ(h.step(), "1@0+6*^ 2@0+5*^");  // request 3 waits for a slot
  EXPECT_NE(h.last.scheduled[0].state_slot, h.last.scheduled[1].state_slot);
  EXPECT_GE(h.last.scheduled[0].state_slot, 0);
  auto ev = h.sched.fork(1, 4, 777);  // no slot: the child waits behind request 3's turn
  ASSERT_TRUE(ev.ok()) << ev.error();
  EXPECT_EQ(h.sched.stats().num_waiting, 2);
  while (h.sched.has_unfinished()) {
    h.step();
    for (const ScheduledRequest& s : h.last.scheduled) EXPECT_GE(s.state_slot, 0);
    EXPECT_LE(h.last.scheduled.size(), 2u);
    EXPECT_THAT(h.last.state_copies, IsEmpty());
  }
  EXPECT_EQ(h.sched.kv().num_free_state_slots(), 2);
  // with a slot free, the fork runs at once from a copy of the parent's state
  h.add(req(5, prompt_of(0, 6), 3));
  h.step();
  const int32_t parent_slot = h.last.scheduled[0].state_slot;
  ASSERT_TRUE(h.sched.fork(5, 6, 778).ok());
  EXPECT_EQ(h.step(), "5@6+1* 6@6+1*");
  EXPECT_THAT(h.last.state_copies, ElementsAre(BlockCopy{parent_slot, h.last.scheduled[1].state_slot}));
}

// Requests the engine's front door refuses (check_request) are broken invariants in the scheduler.
TEST(SchedulerDeathTest, AssertsOnRequestsTheEngineRefuses) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Harness h(config(6, 100));  // 5 usable blocks of 4: 20 tokens
  EXPECT_DEATH(h.sched.add_request(req(1, prompt_of(0, 21))), "max_model_len");
  EXPECT_DEATH(h.sched.add_request(req(2, {})), "empty prompt");
  EXPECT_DEATH(h.sched.add_request(req(3, prompt_of(0, 4), 0)), "max_tokens");
  h.add(req(4, prompt_of(0, 10), 1000));
  EXPECT_DEATH(h.sched.add_request(req(4, prompt_of(0, 4))), "duplicate request id");
}

TEST(Scheduler, ClampsToTheKvCapacityAndStopsThere) {
  SchedulerConfig c = config(6, 100);  // 5 usable blocks of 4: 20 tokens
  c.max_model_len = 1000;
  Harness h(c);
  EXPECT_EQ(h.sched.config().max_model_len, 20);  // clamped to the KV capacity
  c.max_model_len = 0;
  EXPECT_EQ(Scheduler::create(c)->config().max_model_len, 20);  // 0: the KV capacity
  h.add(req(4, prompt_of(0, 10), 1000));
  int steps = 0, outputs = 0;
  FinishReason last = FinishReason::None;
  while (h.sched.has_unfinished() && steps++ < 100) {
    h.step();
    for (const RequestEvent& e : h.events) {
      ++outputs;
      last = e.finish;
    }
  }
  EXPECT_EQ(outputs, 10);  // grows to the whole cache, then stops with "length"
  EXPECT_EQ(last, FinishReason::Length);
  SchedulerConfig no_chunk = config(64, 8);
  no_chunk.enable_chunked_prefill = false;
  EXPECT_FALSE(Scheduler::create(no_chunk).ok());  // a 252-token prompt could never be scheduled
}

TEST(Scheduler, ForkedTokenThatCompletesABlockGetsItsOwnKey) {
  Harness h(config(64, 100));
  h.add(req(1, prompt_of(0, 7), 4));
  EXPECT_EQ(h.step(), "1@0+7*^");  // 7 prompt tokens + 1 sampled: block 2 is full, not yet computed
  ASSERT_TRUE(h.sched.fork(1, 2, 999).ok());
  const Request* parent = h.sched.request(1);
  const Request* child = h.sched.request(2);
  ASSERT_EQ(child->block_hashes().size(), 2u);
  std::vector<int32_t> child_tokens(child->tokens().begin(), child->tokens().end());
  EXPECT_EQ(child_tokens.back(), 999);
  EXPECT_EQ(std::vector<BlockHash>(child->block_hashes().begin(), child->block_hashes().end()),
            compute_block_hashes(child_tokens, 4));
  EXPECT_EQ(child->block_hashes()[0], parent->block_hashes()[0]);
  EXPECT_NE(child->block_hashes()[1], parent->block_hashes()[1]);
  EXPECT_EQ(h.step(), "1@7+1* 2@7+1*");
  // Each committed its own version of block 2 under its own key.
  const auto& tp = h.sched.kv().block_table(1);
  const auto& tc = h.sched.kv().block_table(2);
  EXPECT_EQ(h.sched.kv().pool().block_key(tp[1]), parent->block_hashes()[1]);
  EXPECT_EQ(h.sched.kv().pool().block_key(tc[1]), child->block_hashes()[1]);
  EXPECT_NE(tp[1], tc[1]);
}

// Speculative decoding: a block whose last slot a rejected draft wrote is not cached (its key would
// name the real tokens while its K/V holds the draft's), so a request whose prompt carries the
// rejected draft hits only the block before it; once the real token has been computed in that slot
// the block is cached under the real tokens and hits.
TEST(Scheduler, PrefixCacheNeverHoldsARejectedDraft) {
  Harness h(config(64, 100));
  h.add(req(1, prompt_of(0, 5), 20));
  EXPECT_EQ(h.step(), "1@0+5*^");  // 5 prompt tokens computed + 1 sampled (position 5)
  auto next_of = [](std::vector<int32_t> tokens) {  // the fake model's token after `tokens`
    uint64_t v = kSimSeed;
    for (int32_t t : tokens) v = sim_mix(v, t);
    return static_cast<int32_t>(v % static_cast<uint64_t>(kVocab));
  };
  std::vector<int32_t> real(h.sched.request(1)->tokens().begin(), h.sched.request(1)->tokens().end());
  const int32_t right = next_of(real);  // position 6: accepted
  real.push_back(right);
  const int32_t wrong = (next_of(real) + 1) % kVocab;  // position 7, block 1's last slot: rejected
  ASSERT_TRUE(h.sched.set_draft_tokens(1, {right, wrong, 7, 8}));
  EXPECT_EQ(h.step_spec(), "1@5+5*");
  const int32_t verified = next_of(real);  // the verifier's own token at position 7
  real.push_back(verified);
  ASSERT_EQ(h.events.size(), 2u);
  EXPECT_EQ(h.events[1].token, verified);
  const Request* r = h.sched.request(1);
  EXPECT_EQ(std::vector<int32_t>(r->tokens().begin(), r->tokens().end()), real);
  EXPECT_EQ(r->num_computed_tokens, 7);  // positions 0..6; slot 7 still holds the rejected draft
  const auto& table = h.sched.kv().block_table(1);
  ASSERT_EQ(table.size(), 2u);           // the block of positions 8..9 went back
  EXPECT_TRUE(h.sched.kv().pool().block_key(table[0]).has_value());
  EXPECT_FALSE(h.sched.kv().pool().block_key(table[1]).has_value()) << "cached with a rejected draft's K/V";
  // A prompt that contains the rejected draft: only block 0 hits.
  std::vector<int32_t> p2(real.begin(), real.begin() + 7);
  p2.insert(p2.end(), {wrong, 300});
  h.add(req(2, p2, 1));
  // Request 1 computes position 7 with its real token, which fills block 1 and caches it.
  EXPECT_EQ(h.step(), "1@7+1* 2@4+5*^");
  EXPECT_EQ(h.sched.kv().pool().block_key(h.sched.kv().block_table(1)[1]), h.sched.request(1)->block_hashes()[1]);
  // A prompt with the real tokens hits both blocks.
  std::vector<int32_t> p3(real.begin(), real.end());
  p3.push_back(301);
  h.add(req(3, p3, 1));
  EXPECT_EQ(h.step(), "1@8+1* 3@8+1*^");
  EXPECT_EQ(h.sched.stats().kv.prefix_hit_tokens, 4 + 8);
}

// Sliding-window models (kv_window): after each step a running request's blocks wholly before the
// window of its next token go back to the pool. Three 50-token sequences that preempt each other in
// a 15-block pool without it run side by side with it, each holding at most 3 blocks; the outputs
// are the cache-less reference either way (the fake model reads position p-1 through the block
// table, inside any window >= 2). Released blocks keep their prefix-cache keys: a later request
// whose prompt is an earlier sequence's tokens hits them and still generates the reference.
TEST(Scheduler, SlidingWindowReleasesBlocksBehindTheWindow) {
  for (const int32_t window : {0, 6}) {
    SchedulerConfig c = config(16, 64);  // 15 blocks of 4 tokens
    c.kv_window = window;
    Harness h(c);
    std::map<RequestId, std::vector<int32_t>> outs;
    for (RequestId id = 1; id <= 3; ++id) h.add(req(id, prompt_of(static_cast<int32_t>(id) * 100, 10), 40));
    int32_t max_held = 0;
    while (h.sched.has_unfinished()) {
      h.step();
      for (const RequestEvent& e : h.events)
        if (e.token) outs[e.id].push_back(*e.token);
      for (RequestId id : h.sched.running()) {
        const auto& t = h.sched.kv().block_table(id);
        max_held = std::max(max_held, static_cast<int32_t>(std::count_if(t.begin(), t.end(), [](int32_t b) {
                              return b != kNullBlock;
                            })));
      }
    }
    for (RequestId id = 1; id <= 3; ++id) {
      const auto p = req(id, prompt_of(static_cast<int32_t>(id) * 100, 10), 40);
      EXPECT_EQ(outs[id], reference_generate(p.prompt, 10, p, 60, kVocab).outputs) << "window " << window << " " << id;
    }
    if (window == 0) {
      EXPECT_GT(h.sched.stats().num_preemptions, 0u);
      EXPECT_GE(max_held, 12);
      continue;
    }
    EXPECT_EQ(h.sched.stats().num_preemptions, 0u);
    EXPECT_LE(max_held, 3);
    EXPECT_EQ(h.sched.kv().num_free_blocks(), 15);
  }
  // Alone in a roomy pool (nothing evicted): request 1's prompt and first 10 outputs as a new
  // prompt hit 4 full blocks, the first ones released by request 1 long before it finished.
  SchedulerConfig c = config(64, 64);
  c.kv_window = 6;
  Harness h(c);
  const auto first = req(1, prompt_of(100, 10), 40);
  const std::vector<int32_t> outs = reference_generate(first.prompt, 10, first, 1000, kVocab).outputs;
  h.add(first);
  while (h.sched.has_unfinished()) h.step();
  std::vector<int32_t> prompt = first.prompt;
  prompt.insert(prompt.end(), outs.begin(), outs.begin() + 10);
  const auto p = req(9, prompt, 12);
  h.add(p);
  const int64_t hits = h.sched.stats().kv.prefix_hit_tokens;
  std::vector<int32_t> got;
  while (h.sched.has_unfinished()) {
    h.step();
    for (const RequestEvent& e : h.events)
      if (e.token) got.push_back(*e.token);
  }
  EXPECT_EQ(h.sched.stats().kv.prefix_hit_tokens - hits, 16);
  EXPECT_EQ(got, reference_generate(prompt, 20, p, 1000, kVocab).outputs);
  EXPECT_EQ(got, std::vector<int32_t>(outs.begin() + 10, outs.begin() + 22));
}
