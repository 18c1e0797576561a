// Randomized end-to-end test of Scheduler + KvCacheManager with the fake model of sim_engine.h:
// random arrivals (with shared prefixes), lengths, stop tokens, aborts and forks on small caches.
// Invariants are checked after every step; at the end every request's tokens must equal what the
// model generates without any caching, preemption or batching.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>

#include "sim_engine.h"

using namespace tmill;
using namespace tmill::test;

namespace {

constexpr int32_t kVocab = 40;  // small, so random stop tokens fire

struct PropCase {
  std::string name;
  SchedulerConfig config;
  int steps;
  uint64_t seed;
  double drafts = 0;  // chance that a decoding request gets speculative drafts in a step
};

struct Track {
  RequestParams params;  // prompt kept here (the scheduler moves its copy)
  std::vector<int32_t> outputs;
  bool done = false, aborted = false;
  FinishReason finish = FinishReason::None;
};

class Driver {
 public:
  explicit Driver(const PropCase& c)
      : sched_(std::move(Scheduler::create(c.config)).value()), sim_(sched_, kVocab), rng_(c.seed), drafts_(c.drafts) {
    for (int i = 0; i < 4; ++i) prefixes_.push_back(random_tokens(uniform(4, 24)));
  }

  void run(int steps) {
    for (int s = 0; s < steps; ++s) {
      if (chance(0.25)) add_random();
      if (chance(0.02))
        for (int k = 0; k < 4; ++k) add_random();  // bursts create memory pressure
      if (chance(0.01)) abort_random();
      step();
    }
    int drain = 0;
    while (sched_.has_unfinished()) {
      ASSERT_LT(++drain, 50000) << "requests never finish";
      step();
      if (::testing::Test::HasFatalFailure()) return;
    }
    drain_steps_ = drain;
    check_final();
  }

 private:
  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool chance(double p) { return std::bernoulli_distribution(p)(rng_); }
  std::vector<int32_t> random_tokens(int n) {
    std::vector<int32_t> t(n);
    for (auto& x : t) x = uniform(0, kVocab - 1);
    return t;
  }

  void add_random() {
    RequestParams p;
    p.id = next_id_++;
    if (chance(0.6)) p.prompt = prefixes_[uniform(0, 3)];
    auto tail = random_tokens(uniform(1, 20));
    p.prompt.insert(p.prompt.end(), tail.begin(), tail.end());
    p.prompt.resize(std::min<size_t>(p.prompt.size(), sched_.config().max_model_len));
    p.max_tokens = uniform(1, 40);
    for (int k = uniform(0, 2); k > 0; --k) p.stop_token_ids.push_back(uniform(0, kVocab - 1));
    if (chance(0.2)) p.min_tokens = uniform(1, 3);
    if (chance(0.1)) p.max_model_len = uniform(static_cast<int>(p.prompt.size()), 80);
    p.priority = uniform(0, 3);
    if (chance(0.1)) p.cache_key = 1;
    tracks_[p.id].params = p;
    sched_.add_request(p);
    ++live_;
  }

  void abort_random() {
    std::vector<RequestId> live = sched_.running();
    for (RequestId id : sched_.waiting()) live.push_back(id);
    if (live.empty()) return;
    const RequestId id = live[uniform(0, static_cast<int>(live.size()) - 1)];
    ASSERT_TRUE(sched_.abort(id));
    tracks_[id].aborted = true;
    done(tracks_[id], FinishReason::Abort);
  }

  // Speculative drafts for some decoding requests: the model's own continuation, each token wrong
  // (random) with probability 0.3, so drafts are accepted, partly accepted and rejected.
  void propose() {
    for (RequestId id : sched_.running()) {
      const Request* r = sched_.request(id);
      if (r->num_tokens() - r->num_computed_tokens != 1 || !chance(drafts_)) continue;
      uint64_t v = kSimSeed;
      for (int32_t t : r->tokens()) v = sim_mix(v, t);
      std::vector<int32_t> d;
      for (int k = uniform(1, 5); k > 0; --k) {
        const int32_t right = static_cast<int32_t>(v % static_cast<uint64_t>(kVocab));
        d.push_back(chance(0.3) ? uniform(0, kVocab - 1) : right);
        v = sim_mix(v, d.back());
      }
      ASSERT_TRUE(sched_.set_draft_tokens(id, d));
      ++drafted_;
    }
  }

  void step() {
    if (drafts_ > 0) propose();
    const SchedulerOutput out = sched_.schedule();
    check_output(out);
    const auto sampled = sim_.forward_spec(sched_, out);
    for (size_t i = 0; i < out.scheduled.size(); ++i) {
      if (out.scheduled[i].num_draft_tokens == 0) continue;
      ++verified_;
      accepted_ += static_cast<int64_t>(sampled[i].size()) - 1;
    }
    for (const RequestEvent& e : sched_.update(out, std::span<const std::vector<int32_t>>(sampled))) record(e);
    // n > 1: fork some requests right after their prompt produced the first token.
    for (const ScheduledRequest& s : out.scheduled) {
      const Request* r = sched_.request(s.id);
      if (!r || !s.produces_sample || r->num_output_tokens() != 1 || !chance(0.15)) continue;
      const RequestId child = next_id_++;
      const int32_t token = uniform(0, kVocab - 1);
      auto ev = sched_.fork(s.id, child, token);
      ASSERT_TRUE(ev.ok()) << ev.error();
      forked_.insert(child);
      Track& t = tracks_[child];
      t.params = tracks_[s.id].params;
      t.params.id = child;
      t.outputs = {token};
      ++live_;
      if (ev->finish != FinishReason::None) done(t, ev->finish);
    }
    check_state();
  }

  void record(const RequestEvent& e) {
    Track& t = tracks_.at(e.id);
    ASSERT_FALSE(t.done);
    ASSERT_TRUE(e.token.has_value());
    t.outputs.push_back(*e.token);
    if (e.finish != FinishReason::None) done(t, e.finish);
  }
  void done(Track& t, FinishReason f) {
    t.done = true;
    t.finish = f;
    --live_;
  }

  void check_output(const SchedulerOutput& out) {
    const SchedulerConfig& c = sched_.config();
    ASSERT_LE(out.total_tokens, c.max_num_batched_tokens);
    ASSERT_LE(out.scheduled.size(), static_cast<size_t>(c.max_num_seqs));
    int32_t sum = 0;
    std::set<RequestId> ids;
    for (const ScheduledRequest& s : out.scheduled) {
      ASSERT_GE(s.num_tokens, 1);
      ASSERT_TRUE(ids.insert(s.id).second);
      const Request* r = sched_.request(s.id);
      ASSERT_NE(r, nullptr);
      ASSERT_EQ(r->status, RequestStatus::Running);
      ASSERT_EQ(r->num_computed_tokens, s.start_pos);
      ASSERT_EQ(s.produces_sample, s.start_pos + s.num_tokens - s.num_draft_tokens == r->num_tokens());
      ASSERT_TRUE(s.num_draft_tokens == 0 || s.num_tokens == s.num_draft_tokens + 1);
      sum += s.num_tokens;
    }
    ASSERT_EQ(sum, out.total_tokens);
    for (RequestId id : out.preempted) {
      ASSERT_EQ(ids.count(id), 0u);
      ASSERT_EQ(sched_.request(id)->status, RequestStatus::Preempted);
    }
  }

  void check_state() {
    const KvCacheManager& kv = sched_.kv();
    const BlockPool& pool = kv.pool();
    const int32_t bs = kv.block_size();
    std::set<RequestId> running(sched_.running().begin(), sched_.running().end());
    const std::vector<RequestId> waiting = sched_.waiting();
    ASSERT_EQ(running.size(), sched_.running().size());
    ASSERT_EQ(running.size() + waiting.size(), live_);
    std::set<RequestId> waiting_set(waiting.begin(), waiting.end());
    ASSERT_EQ(waiting_set.size(), waiting.size());
    std::vector<int32_t> refs(pool.num_blocks(), 0), fill(pool.num_blocks(), 0);
    for (RequestId id : waiting) {
      ASSERT_EQ(running.count(id), 0u) << "request both waiting and running";
      const Request* r = sched_.request(id);
      ASSERT_TRUE(r->status == RequestStatus::Waiting || r->status == RequestStatus::Preempted);
      ASSERT_EQ(r->num_computed_tokens, 0);
      ASSERT_FALSE(kv.has_request(id));
    }
    for (RequestId id : running) {
      const Request* r = sched_.request(id);
      ASSERT_EQ(r->status, RequestStatus::Running);
      ASSERT_LT(r->num_computed_tokens, r->num_tokens());
      const std::vector<int32_t>& table = kv.block_table(id);
      ASSERT_EQ(static_cast<int32_t>(table.size()), (r->num_computed_tokens + bs - 1) / bs);
      std::set<int32_t> distinct(table.begin(), table.end());
      ASSERT_EQ(distinct.size(), table.size());
      for (size_t i = 0; i < table.size(); ++i) {
        const int32_t b = table[i];
        ASSERT_NE(b, kNullBlock);
        ++refs[b];
        fill[b] = std::max(fill[b], std::min<int32_t>(bs, r->num_computed_tokens - static_cast<int32_t>(i) * bs));
        if (auto key = pool.block_key(b)) {  // a cached block holds exactly this prefix
          ASSERT_LT(i, r->block_hashes().size());
          ASSERT_EQ(*key, r->block_hashes()[i]);
        }
      }
    }
    int32_t free_blocks = 0;
    int64_t used = 0;
    ASSERT_EQ(pool.ref_count(kNullBlock), 0);
    for (int32_t b = 1; b < pool.num_blocks(); ++b) {
      ASSERT_EQ(pool.ref_count(b), refs[b]) << "block " << b;
      free_blocks += refs[b] == 0;
      used += fill[b];
    }
    ASSERT_EQ(pool.num_free_blocks(), free_blocks);
    ASSERT_EQ(pool.used_slots(), used);
    const KvStats st = kv.stats();
    ASSERT_LE(st.prefix_hit_tokens, st.prefix_query_tokens);
    ASSERT_LE(st.used_slots, st.allocated_slots);
  }

  void check_final() {
    const BlockPool& pool = sched_.kv().pool();
    for (int32_t b = 0; b < pool.num_blocks(); ++b) ASSERT_EQ(pool.ref_count(b), 0);
    ASSERT_EQ(pool.num_free_blocks(), pool.num_usable_blocks());
    ASSERT_EQ(pool.used_slots(), 0);
    if (!sched_.kv().prefix_caching()) {
      ASSERT_EQ(pool.num_cached_blocks(), 0);
    }
    int finished = 0;
    for (const auto& [id, t] : tracks_) {
      ASSERT_TRUE(t.done) << id;
      int32_t max_len = sched_.config().max_model_len;
      if (t.params.max_model_len > 0) max_len = std::min(max_len, t.params.max_model_len);
      std::vector<int32_t> start = t.params.prompt;
      // A forked child starts from prompt + its forced first token; others from the prompt.
      if (forked(id)) start.push_back(t.outputs[0]);
      const RefResult want = reference_generate(start, static_cast<int32_t>(t.params.prompt.size()), t.params,
                                                max_len, kVocab);
      if (t.aborted) {
        ASSERT_LE(t.outputs.size(), want.outputs.size());
        ASSERT_TRUE(std::equal(t.outputs.begin(), t.outputs.end(), want.outputs.begin())) << id;
      } else {
        ASSERT_EQ(t.outputs, want.outputs) << "request " << id;
        ASSERT_EQ(t.finish, want.finish) << "request " << id;
        ++finished;
      }
    }
    ASSERT_GT(finished, 100);
    stats_ = sched_.stats();
  }
  bool forked(RequestId id) const { return forked_.count(id) != 0; }

 public:
  SchedulerStats stats_;  // at the end of run()
  int drain_steps_ = 0;
  int64_t drafted_ = 0, verified_ = 0, accepted_ = 0;  // speculative drafts set, scored, accepted

 private:
  std::set<RequestId> forked_;
  Scheduler sched_;
  SimEngine sim_;
  std::mt19937_64 rng_;
  double drafts_;
  std::vector<std::vector<int32_t>> prefixes_;
  std::map<RequestId, Track> tracks_;
  RequestId next_id_ = 1;
  size_t live_ = 0;
};

}  // namespace

class SchedulerProperty : public ::testing::TestWithParam<PropCase> {};

TEST_P(SchedulerProperty, InvariantsHoldAndOutputsMatchTheModel) {
  Driver d(GetParam());
  d.run(GetParam().steps);
  if (HasFatalFailure()) return;
  // The small caches must actually exercise preemption, the prefix cache and eviction.
  const SchedulerStats& st = d.stats_;
  EXPECT_GT(st.num_preemptions, 0u);
  if (GetParam().config.kv.enable_prefix_caching) {
    EXPECT_GT(st.kv.prefix_hit_tokens, 0);
    EXPECT_GT(st.kv.num_evictions, 0u);
  }
  RecordProperty("preemptions", std::to_string(st.num_preemptions));
  if (GetParam().drafts > 0) {  // drafts were scored and some (not all) accepted
    EXPECT_GT(d.verified_, 100);
    EXPECT_GT(d.accepted_, 100);
    EXPECT_LT(d.accepted_, d.verified_ * 5);
  }
}

SchedulerConfig prop_config(int32_t blocks, int32_t bs, int32_t budget, int32_t seqs, int32_t max_len,
                            SchedulingPolicy policy = SchedulingPolicy::Fcfs, int32_t threshold = 0,
                            bool caching = true) {
  SchedulerConfig c;
  c.max_num_batched_tokens = budget;
  c.max_num_seqs = seqs;
  c.max_model_len = max_len;
  c.long_prefill_token_threshold = threshold;
  c.policy = policy;
  c.kv = {blocks, bs, caching};
  return c;
}

std::vector<PropCase> prop_cases() {
  std::vector<PropCase> out;
  for (uint64_t seed : {1, 2}) {
    const std::string s = std::to_string(seed);
    out.push_back({"fcfs_" + s, prop_config(24, 4, 32, 8, 64), 3000, seed});
    out.push_back({"priority_tiny_" + s, prop_config(13, 4, 16, 4, 48, SchedulingPolicy::Priority, 6), 3000, seed});
    out.push_back({"block1_" + s, prop_config(48, 1, 8, 6, 40), 3000, seed});
    out.push_back({"nocache_" + s, prop_config(20, 4, 24, 6, 60, SchedulingPolicy::Fcfs, 0, false), 3000, seed});
    out.push_back({"block16_" + s, prop_config(8, 16, 64, 8, 100, SchedulingPolicy::Priority), 3000, seed});
    // speculative decoding: drafts scored as chunks, rejected ones rolled back, under preemption,
    // prefix hits, forks, tight budgets (drafts cut) and one-token blocks
    out.push_back({"spec_fcfs_" + s, prop_config(24, 4, 32, 8, 64), 3000, seed, 0.7});
    out.push_back({"spec_tight_" + s, prop_config(13, 4, 10, 4, 48, SchedulingPolicy::Priority, 6), 3000, seed, 0.7});
    out.push_back({"spec_block1_" + s, prop_config(48, 1, 8, 6, 40), 3000, seed, 0.7});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Random, SchedulerProperty, ::testing::ValuesIn(prop_cases()),
                         [](const auto& info) { return info.param.name; });

// The same fixed workload on a roomy cache (no preemption) and a tiny one (many preemptions) must
// produce identical tokens: recomputation after preemption is invisible to the user.
TEST(SchedulerPreemption, RecomputedRequestsGenerateTheSameTokens) {
  auto run = [](int32_t num_blocks, uint64_t* preemptions) {
    SchedulerConfig c = prop_config(num_blocks, 4, 24, 8, 64);
    Scheduler sched = std::move(Scheduler::create(c)).value();
    SimEngine sim(sched, 1000);
    std::map<RequestId, std::vector<int32_t>> outs;
    for (RequestId id = 1; id <= 12; ++id) {
      RequestParams p;
      p.id = id;
      for (int32_t k = 0; k < 5 + static_cast<int32_t>(id) * 3; ++k) p.prompt.push_back((k * 7 + id) % 1000);
      p.max_tokens = 20;
      sched.add_request(p);
    }
    for (int guard = 0; sched.has_unfinished() && guard < 5000; ++guard) {
      SchedulerOutput out = sched.schedule();
      for (const RequestEvent& e : sched.update(out, sim.forward(sched, out))) outs[e.id].push_back(*e.token);
    }
    EXPECT_FALSE(sched.has_unfinished());
    *preemptions = sched.stats().num_preemptions;
    return outs;
  };
  uint64_t roomy_preemptions = 0, tiny_preemptions = 0;
  const auto roomy = run(200, &roomy_preemptions);
  const auto tiny = run(17, &tiny_preemptions);  // 16 blocks: 64 tokens for 12 requests
  EXPECT_EQ(roomy_preemptions, 0u);
  EXPECT_GT(tiny_preemptions, 5u);
  ASSERT_EQ(roomy.size(), 12u);
  EXPECT_EQ(roomy, tiny);
  for (const auto& [id, tokens] : roomy) EXPECT_EQ(tokens.size(), 20u) << id;
}
