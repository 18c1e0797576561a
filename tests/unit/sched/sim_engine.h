// A deterministic fake model + KV store for scheduler tests.
//
// The "KV" of position p is one uint64 stored in slot (table[p / bs], p % bs):
//   kv(p) = mix(kv(p-1), token_p), kv(-1) = kSeed
// and the token sampled after position p is kv(p) % vocab. The fake forward pass reads kv(p-1)
// THROUGH THE BLOCK TABLE, so a wrong block id, a missed copy-on-write or a stale prefix hit changes
// the generated tokens, which tests compare with reference_generate() (computed from tokens alone).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "sched/scheduler.h"

namespace tmill::test {

inline uint64_t sim_mix(uint64_t prev, int32_t token) {
  uint64_t x = prev ^ (static_cast<uint64_t>(static_cast<uint32_t>(token)) * 0x9E3779B97F4A7C15ULL);
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}
inline constexpr uint64_t kSimSeed = 0x1234567ULL;

// What the model generates for `tokens` (prompt + already generated outputs) without any cache,
// following the same stop rules as Request::check_stop.
struct RefResult {
  std::vector<int32_t> outputs;
  FinishReason finish = FinishReason::None;
};
inline RefResult reference_generate(std::vector<int32_t> tokens, int32_t num_prompt, const RequestParams& p,
                                    int32_t max_model_len, int32_t vocab) {
  RefResult r;
  r.outputs.assign(tokens.begin() + num_prompt, tokens.end());
  auto stop = [&](int32_t t) {
    const int32_t n_out = static_cast<int32_t>(r.outputs.size());
    for (int32_t s : p.stop_token_ids)
      if (s == t && n_out >= p.min_tokens) return FinishReason::Stop;
    if (n_out >= p.max_tokens || static_cast<int32_t>(tokens.size()) >= max_model_len) return FinishReason::Length;
    return FinishReason::None;
  };
  if (!r.outputs.empty() && (r.finish = stop(tokens.back())) != FinishReason::None) return r;
  while (true) {
    uint64_t v = kSimSeed;
    for (int32_t t : tokens) v = sim_mix(v, t);
    const int32_t next = static_cast<int32_t>(v % static_cast<uint64_t>(vocab));
    tokens.push_back(next);
    r.outputs.push_back(next);
    if ((r.finish = stop(next)) != FinishReason::None) return r;
  }
}

class SimEngine {
 public:
  SimEngine(const Scheduler& sched, int32_t vocab)
      : bs_(sched.kv().block_size()), vocab_(vocab),
        kv_(static_cast<size_t>(sched.kv().pool().num_blocks()) * bs_, 0) {}

  // Fake forward + sampling for one schedule() output. Checks that every written block is owned by
  // exactly this request and holds no prefix-cache key (shared or cached blocks are read-only).
  std::vector<int32_t> forward(const Scheduler& sched, const SchedulerOutput& out) {
    std::vector<int32_t> sampled(out.scheduled.size(), -1);
    const auto lists = forward_spec(sched, out);
    for (size_t i = 0; i < lists.size(); ++i)
      if (!lists[i].empty()) sampled[i] = lists[i][0];
    return sampled;
  }

  // The same with speculative drafts: per entry what the fake model keeps, verifying greedily: each
  // draft is accepted while it equals the model's token for its position; then one token of its own.
  std::vector<std::vector<int32_t>> forward_spec(const Scheduler& sched, const SchedulerOutput& out) {
    for (const BlockCopy& c : out.block_copies)
      for (int32_t s = 0; s < bs_; ++s) kv_[slot(c.dst, s)] = kv_[slot(c.src, s)];
    std::vector<std::vector<int32_t>> sampled(out.scheduled.size());
    for (size_t i = 0; i < out.scheduled.size(); ++i) {
      const ScheduledRequest& s = out.scheduled[i];
      EXPECT_GE(static_cast<int64_t>(s.block_table.size()) * bs_, s.start_pos + s.num_tokens);
      EXPECT_EQ(static_cast<int32_t>(s.token_ids.size()), s.num_tokens);
      uint64_t prev = s.start_pos == 0 ? kSimSeed : kv_[pos_slot(s.block_table, s.start_pos - 1)];
      std::vector<int32_t> next;  // the model's token after each position from the last real one on
      const int32_t first_row = s.num_tokens - s.num_draft_tokens - 1;
      for (int32_t j = 0; j < s.num_tokens; ++j) {
        const int32_t p = s.start_pos + j;
        const int32_t block = s.block_table[p / bs_];
        EXPECT_NE(block, kNullBlock);
        EXPECT_EQ(sched.kv().pool().ref_count(block), 1) << "write into a shared block " << block;
        EXPECT_FALSE(sched.kv().pool().block_key(block).has_value()) << "write into cached block " << block;
        prev = sim_mix(prev, s.token_ids[j]);
        kv_[pos_slot(s.block_table, p)] = prev;
        if (j >= first_row) next.push_back(static_cast<int32_t>(prev % static_cast<uint64_t>(vocab_)));
      }
      if (!s.produces_sample) continue;
      const int32_t* drafts = s.token_ids.data() + (s.num_tokens - s.num_draft_tokens);
      for (int32_t j = 0; j <= s.num_draft_tokens; ++j) {
        sampled[i].push_back(next[static_cast<size_t>(j)]);
        if (j == s.num_draft_tokens || next[static_cast<size_t>(j)] != drafts[j]) break;
      }
    }
    return sampled;
  }

 private:
  size_t slot(int32_t block, int32_t s) const { return static_cast<size_t>(block) * bs_ + s; }
  size_t pos_slot(const std::vector<int32_t>& table, int32_t p) const { return slot(table[p / bs_], p % bs_); }

  int32_t bs_;
  int32_t vocab_;
  std::vector<uint64_t> kv_;
};

}  // namespace tmill::test
