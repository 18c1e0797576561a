// KvCacheManager on a tiny pool: 8 blocks (block 0 reserved, usable 1..7) of 4 tokens.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "kv/kv_cache_manager.h"

using namespace tmill;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

namespace {

constexpr int32_t kBs = 4;

struct Seq {
  std::vector<int32_t> tokens;
  std::vector<BlockHash> hashes;
  std::optional<uint64_t> extra;
  RequestTokens rt() const { return {tokens, hashes}; }
  void push(int32_t t) {
    tokens.push_back(t);
    extend_block_hashes(tokens, kBs, extra, hashes);
  }
};

Seq seq(std::vector<int32_t> tokens, std::optional<uint64_t> extra = std::nullopt) {
  Seq s{std::move(tokens), {}, extra};
  extend_block_hashes(s.tokens, kBs, extra, s.hashes);
  return s;
}
Seq iota_seq(int32_t first, int32_t n) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return seq(std::move(t));
}
Seq concat(const Seq& a, int32_t n_from_a, std::vector<int32_t> tail) {
  std::vector<int32_t> t(a.tokens.begin(), a.tokens.begin() + n_from_a);
  t.insert(t.end(), tail.begin(), tail.end());
  return seq(std::move(t), a.extra);
}

KvCacheManager make(int32_t blocks = 8, bool caching = true) {
  auto kv = KvCacheManager::create({blocks, kBs, caching});
  EXPECT_TRUE(kv.ok());
  return std::move(kv).value();
}

// Prefills a whole sequence as a new request (with prefix lookup) and commits it.
AllocResult prefill(KvCacheManager& kv, KvRequestId id, const Seq& s) {
  PrefixHit hit = kv.get_computed_blocks(s.rt());
  auto r = kv.allocate_slots(id, 0, static_cast<int32_t>(s.tokens.size()) - hit.num_tokens, &hit);
  EXPECT_TRUE(r.has_value());
  kv.commit(id, s.hashes, static_cast<int32_t>(s.tokens.size()));
  return r.value_or(AllocResult{});
}

std::vector<int32_t> refs(const KvCacheManager& kv) {
  std::vector<int32_t> out;
  for (int32_t b = 0; b < kv.pool().num_blocks(); ++b) out.push_back(kv.pool().ref_count(b));
  return out;
}

}  // namespace

TEST(KvCacheManager, AllocatesInQueueOrderAndGrowsByBlocks) {
  auto kv = make();
  auto a = kv.allocate_slots(1, 0, 10);
  ASSERT_TRUE(a);
  EXPECT_THAT(a->new_blocks, ElementsAre(1, 2, 3));
  EXPECT_THAT(kv.allocate_slots(2, 0, 5)->new_blocks, ElementsAre(4, 5));
  EXPECT_EQ(kv.num_free_blocks(), 2);
  EXPECT_DOUBLE_EQ(kv.usage(), 5.0 / 7.0);
  EXPECT_THAT(kv.allocate_slots(1, 10, 1)->new_blocks, IsEmpty());  // 11 tokens
  EXPECT_THAT(kv.allocate_slots(1, 11, 1)->new_blocks, IsEmpty());  // 12 tokens
  EXPECT_THAT(kv.allocate_slots(1, 12, 1)->new_blocks, ElementsAre(6));
  EXPECT_THAT(kv.block_table(1), ElementsAre(1, 2, 3, 6));
  const KvStats s = kv.stats();
  EXPECT_EQ(s.num_blocks, 7);
  EXPECT_EQ(s.allocated_slots, 6 * 4);
  EXPECT_EQ(s.used_slots, 13 + 5);  // 5 slots hold no token: block waste
}

TEST(KvCacheManager, PrefixHitSharesCommittedBlocks) {
  auto kv = make();
  const Seq a = iota_seq(0, 10);
  prefill(kv, 1, a);
  EXPECT_TRUE(kv.pool().block_key(1) && kv.pool().block_key(2));
  EXPECT_FALSE(kv.pool().block_key(3));  // partial block: never cached
  const Seq b = concat(a, 8, {50, 51, 52});
  PrefixHit hit = kv.get_computed_blocks(b.rt());
  EXPECT_THAT(hit.blocks, ElementsAre(1, 2));
  EXPECT_EQ(hit.num_tokens, 8);
  EXPECT_EQ(hit.num_query_tokens, 11);
  auto r = kv.allocate_slots(2, 0, 3, &hit);
  ASSERT_TRUE(r);
  EXPECT_THAT(r->new_blocks, ElementsAre(4));
  EXPECT_THAT(kv.block_table(2), ElementsAre(1, 2, 4));
  EXPECT_EQ(kv.pool().ref_count(1), 2);
  EXPECT_EQ(kv.pool().ref_count(2), 2);
  EXPECT_EQ(kv.pool().ref_count(3), 1);
  EXPECT_EQ(kv.stats().prefix_query_tokens, 10 + 11);
  EXPECT_EQ(kv.stats().prefix_hit_tokens, 8);
}

TEST(KvCacheManager, FreedBlocksStayReusableInEvictionOrder) {
  auto kv = make();
  const Seq a = iota_seq(0, 10);
  prefill(kv, 1, a);
  kv.free(1);  // table [1,2,3] released last-first: 3 (unkeyed) to the head, then 2, 1 to the tail
  EXPECT_THAT(kv.pool().free_queue(), ElementsAre(3, 4, 5, 6, 7, 2, 1));
  EXPECT_EQ(kv.stats().num_cached_blocks, 2);
  PrefixHit hit = kv.get_computed_blocks(a.rt());  // same 10 tokens: hit capped at 2 blocks
  EXPECT_THAT(hit.blocks, ElementsAre(1, 2));
  ASSERT_TRUE(kv.allocate_slots(2, 0, 2, &hit));
  EXPECT_THAT(kv.block_table(2), ElementsAre(1, 2, 3));
  EXPECT_THAT(kv.pool().free_queue(), ElementsAre(4, 5, 6, 7));
  EXPECT_EQ(kv.stats().num_evictions, 0u);
}

TEST(KvCacheManager, HitLeavesAtLeastOneTokenToCompute) {
  auto kv = make();
  const Seq a = iota_seq(0, 8);  // exactly two full blocks
  prefill(kv, 1, a);
  EXPECT_THAT(kv.get_computed_blocks(a.rt()).blocks, ElementsAre(1));  // (8-1)/4 = 1 block
  EXPECT_THAT(kv.get_computed_blocks(concat(a, 8, {7}).rt()).blocks, ElementsAre(1, 2));
  EXPECT_THAT(kv.get_computed_blocks(iota_seq(0, 3).rt()).blocks, IsEmpty());
}

TEST(KvCacheManager, BlocksAreCachedOnlyOnceComputed) {
  auto kv = make();
  Seq a = iota_seq(0, 7);
  ASSERT_TRUE(kv.allocate_slots(1, 0, 7));
  kv.commit(1, a.hashes, 3);  // nothing full is computed yet
  EXPECT_EQ(kv.stats().num_cached_blocks, 0);
  kv.commit(1, a.hashes, 7);
  EXPECT_TRUE(kv.pool().block_key(1));
  EXPECT_FALSE(kv.pool().block_key(2));
  a.push(70);  // sampled token fills block 2, but its KV is written only next step
  ASSERT_TRUE(kv.allocate_slots(1, 7, 1));
  Seq probe = concat(a, 8, {0});
  EXPECT_THAT(kv.get_computed_blocks(probe.rt()).blocks, ElementsAre(1));
  kv.commit(1, a.hashes, 8);
  EXPECT_EQ(kv.pool().block_key(2), a.hashes[1]);
  EXPECT_THAT(kv.get_computed_blocks(probe.rt()).blocks, ElementsAre(1, 2));
}

TEST(KvCacheManager, EvictsLeastRecentlyFreedTailBlocksFirst) {
  auto kv = make();
  const Seq a = iota_seq(0, 8), b = iota_seq(100, 8);
  prefill(kv, 1, a);  // [1, 2]
  prefill(kv, 2, b);  // [3, 4]
  kv.free(1);
  kv.free(2);
  EXPECT_THAT(kv.pool().free_queue(), ElementsAre(5, 6, 7, 2, 1, 4, 3));
  prefill(kv, 3, iota_seq(200, 12));  // takes 5, 6, 7: never-used blocks first
  EXPECT_THAT(kv.block_table(3), ElementsAre(5, 6, 7));
  EXPECT_EQ(kv.stats().num_evictions, 0u);
  ASSERT_TRUE(kv.allocate_slots(4, 0, 4));  // evicts A's LAST block, the oldest tail-first entry
  EXPECT_THAT(kv.block_table(4), ElementsAre(2));
  EXPECT_EQ(kv.stats().num_evictions, 1u);
  // A's prefix now stops after its first block; B's is intact.
  EXPECT_THAT(kv.get_computed_blocks(concat(a, 8, {1}).rt()).blocks, ElementsAre(1));
  EXPECT_THAT(kv.get_computed_blocks(concat(b, 8, {1}).rt()).blocks, ElementsAre(3, 4));
}

TEST(KvCacheManager, SameTokensUnderAnotherPrefixDoNotMatch) {
  auto kv = make();
  const Seq a = seq({0, 1, 2, 3, 9, 9, 9, 9});
  prefill(kv, 1, a);
  const Seq x = seq({5, 5, 5, 5, 9, 9, 9, 9, 1});
  EXPECT_THAT(kv.get_computed_blocks(x.rt()).blocks, IsEmpty());
  EXPECT_FALSE(kv.pool().lookup(x.hashes[1]).has_value());
}

TEST(KvCacheManager, ExtraKeyIsolatesPrefixes) {
  auto kv = make();
  const Seq a = seq({1, 2, 3, 4, 5}, hash_extra_key("lora-a"));
  prefill(kv, 1, a);
  EXPECT_THAT(kv.get_computed_blocks(seq({1, 2, 3, 4, 5}).rt()).blocks, IsEmpty());
  EXPECT_THAT(kv.get_computed_blocks(seq({1, 2, 3, 4, 5}, hash_extra_key("lora-b")).rt()).blocks, IsEmpty());
  EXPECT_THAT(kv.get_computed_blocks(seq({1, 2, 3, 4, 6}, hash_extra_key("lora-a")).rt()).blocks,
              ElementsAre(1));
}

TEST(KvCacheManager, ReferenceCountsUnderSharing) {
  auto kv = make();
  const Seq a = iota_seq(0, 9);
  prefill(kv, 1, a);                          // [1, 2, 3]
  prefill(kv, 2, concat(a, 8, {40, 41}));     // [1, 2, 4]
  prefill(kv, 3, concat(a, 8, {50}));         // [1, 2, 5]
  EXPECT_THAT(refs(kv), ElementsAre(0, 3, 3, 1, 1, 1, 0, 0));
  kv.free(1);
  EXPECT_THAT(refs(kv), ElementsAre(0, 2, 2, 0, 1, 1, 0, 0));
  EXPECT_THAT(kv.pool().free_queue(), ElementsAre(3, 6, 7));
  kv.free(2);
  EXPECT_THAT(kv.pool().free_queue(), ElementsAre(4, 3, 6, 7));
  kv.free(3);
  EXPECT_THAT(refs(kv), ElementsAre(0, 0, 0, 0, 0, 0, 0, 0));
  EXPECT_THAT(kv.pool().free_queue(), ElementsAre(5, 4, 3, 6, 7, 2, 1));
  EXPECT_EQ(kv.stats().used_slots, 0);
}

TEST(KvCacheManager, ForkSharesAndCopyOnWriteSplitsThePartialBlock) {
  auto kv = make();
  prefill(kv, 1, iota_seq(0, 6));  // [1, 2]; block 2 holds 2 tokens
  kv.fork(1, 2);
  EXPECT_THAT(kv.block_table(2), ElementsAre(1, 2));
  EXPECT_THAT(refs(kv), ElementsAre(0, 2, 2, 0, 0, 0, 0, 0));
  auto child = kv.allocate_slots(2, 6, 1);
  ASSERT_TRUE(child);
  EXPECT_THAT(child->copies, ElementsAre(BlockCopy{2, 3}));
  EXPECT_THAT(child->new_blocks, IsEmpty());
  EXPECT_THAT(kv.block_table(2), ElementsAre(1, 3));
  EXPECT_THAT(refs(kv), ElementsAre(0, 2, 1, 1, 0, 0, 0, 0));
  auto parent = kv.allocate_slots(1, 6, 1);  // now the sole owner of block 2: writes in place
  ASSERT_TRUE(parent);
  EXPECT_THAT(parent->copies, IsEmpty());
  EXPECT_THAT(kv.block_table(1), ElementsAre(1, 2));
  EXPECT_EQ(kv.stats().used_slots, 4 + 3 + 3);
}

TEST(KvCacheManager, ForkAtABlockBoundaryNeedsNoCopy) {
  auto kv = make();
  prefill(kv, 1, iota_seq(0, 8));
  kv.fork(1, 2);
  auto r = kv.allocate_slots(2, 8, 1);
  ASSERT_TRUE(r);
  EXPECT_THAT(r->copies, IsEmpty());
  EXPECT_THAT(kv.block_table(2), ElementsAre(1, 2, 3));
  kv.free(1);
  kv.free(2);
  EXPECT_THAT(refs(kv), ElementsAre(0, 0, 0, 0, 0, 0, 0, 0));
}

TEST(KvCacheManager, NoRoomChangesNothing) {
  auto kv = make();
  const Seq a = iota_seq(0, 16);
  prefill(kv, 1, a);  // [1..4], all cached
  kv.free(1);
  prefill(kv, 2, iota_seq(500, 12));  // takes 5, 6, 7
  EXPECT_THAT(kv.pool().free_queue(), ElementsAre(4, 3, 2, 1));
  const Seq c = concat(a, 12, {9, 9, 9, 9, 9, 9, 9, 9, 9});  // 21 tokens, 3 cached blocks
  PrefixHit hit = kv.get_computed_blocks(c.rt());
  EXPECT_THAT(hit.blocks, ElementsAre(1, 2, 3));
  const auto queue = kv.pool().free_queue();
  const auto ref_before = refs(kv);
  const KvStats st = kv.stats();
  // 6 blocks needed: 3 hits (all evictable, so they count against the 4 free) + 3 new.
  EXPECT_FALSE(kv.allocate_slots(3, 0, 9, &hit));
  EXPECT_FALSE(kv.allocate_slots(2, 12, 20));  // running request growth: 5 more blocks
  EXPECT_EQ(kv.pool().free_queue(), queue);
  EXPECT_EQ(refs(kv), ref_before);
  EXPECT_FALSE(kv.has_request(3));
  EXPECT_THAT(kv.block_table(2), ElementsAre(5, 6, 7));
  EXPECT_EQ(kv.stats().prefix_query_tokens, st.prefix_query_tokens);
  EXPECT_EQ(kv.stats().used_slots, st.used_slots);
  EXPECT_EQ(kv.stats().num_cached_blocks, st.num_cached_blocks);
  // A smaller chunk fits: 3 hits + 1 new block, which evicts A's last block.
  ASSERT_TRUE(kv.allocate_slots(3, 0, 4, &hit));
  EXPECT_THAT(kv.block_table(3), ElementsAre(1, 2, 3, 4));
  EXPECT_EQ(kv.stats().num_evictions, 1u);
  EXPECT_EQ(kv.num_free_blocks(), 0);
}

TEST(KvCacheManager, PreemptedRequestFreesAndRecomputesFromCache) {
  auto kv = make();
  Seq a = iota_seq(0, 6);
  prefill(kv, 1, a);  // [1, 2]
  a.push(99);
  ASSERT_TRUE(kv.allocate_slots(1, 6, 1));
  kv.commit(1, a.hashes, 7);
  kv.free(1);  // preemption
  EXPECT_FALSE(kv.has_request(1));
  EXPECT_THAT(kv.block_table(1), IsEmpty());
  EXPECT_THAT(kv.pool().free_queue(), ElementsAre(2, 3, 4, 5, 6, 7, 1));
  PrefixHit hit = kv.get_computed_blocks(a.rt());  // prompt + output recomputed as one prompt
  EXPECT_THAT(hit.blocks, ElementsAre(1));
  ASSERT_TRUE(kv.allocate_slots(1, 0, 3, &hit));
  EXPECT_THAT(kv.block_table(1), ElementsAre(1, 2));
  kv.free(1);
  kv.free(1);  // unknown id: no-op
  EXPECT_EQ(kv.num_free_blocks(), 7);
}

TEST(KvCacheManager, CachingDisabled) {
  auto kv = make(8, /*caching=*/false);
  const Seq a = iota_seq(0, 9);
  prefill(kv, 1, a);
  EXPECT_EQ(kv.stats().num_cached_blocks, 0);
  kv.free(1);
  EXPECT_THAT(kv.pool().free_queue(), ElementsAre(1, 2, 3, 4, 5, 6, 7));
  EXPECT_THAT(kv.get_computed_blocks(a.rt()).blocks, IsEmpty());
  EXPECT_EQ(kv.stats().prefix_query_tokens, 0);
}

TEST(KvCacheManager, RejectsBadConfig) {
  EXPECT_FALSE(KvCacheManager::create({1, 4, true}).ok());
  EXPECT_FALSE(KvCacheManager::create({8, 0, true}).ok());
  auto kv = KvCacheManager::create({2, 16, true});
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(kv->capacity_tokens(), 16);
}

// Speculative decoding's rollback: slots reserved for draft tokens that were rejected go back to the
// pool (last block first, as garbage at the head of the free queue), the kept block's fill shrinks,
// and the committed prefix is untouched.
TEST(KvCacheManager, TruncateGivesBackRejectedDraftSlots) {
  auto kv = make();
  const Seq a = iota_seq(0, 6);
  prefill(kv, 1, a);                                    // blocks 1 (cached), 2 (2 of 4 slots)
  ASSERT_TRUE(kv.allocate_slots(1, 6, 1 + 4));          // decode + 4 drafts: 11 tokens
  EXPECT_THAT(kv.block_table(1), ElementsAre(1, 2, 3));
  EXPECT_EQ(kv.stats().used_slots, 11);
  kv.truncate(1, 7);                                    // only the decode token's KV is kept
  EXPECT_THAT(kv.block_table(1), ElementsAre(1, 2));
  EXPECT_EQ(kv.stats().used_slots, 7);
  EXPECT_EQ(kv.pool().free_queue().front(), 3);       // the rejected block is reused first
  EXPECT_TRUE(kv.pool().block_key(1));
  EXPECT_FALSE(kv.pool().block_key(2));
  kv.truncate(1, 8);                                    // nothing to give back: 2 blocks hold 8
  EXPECT_THAT(kv.block_table(1), ElementsAre(1, 2));
  kv.free(1);
  EXPECT_EQ(kv.stats().used_slots, 0);
  EXPECT_EQ(kv.num_free_blocks(), 7);
}

// Sliding-window release: blocks wholly before the first needed position go back to the pool
// (table entries -> null block), oldest first; committed ones keep their keys, so the same prefix
// still hits them; commit, fork and free skip the null entries.
TEST(KvCacheManager, ReleaseBeforeGivesBackBlocksOutsideTheWindow) {
  auto kv = make();
  Seq a = iota_seq(0, 14);  // blocks [1, 2, 3, 4]: 4 + 4 + 4 + 2 tokens
  prefill(kv, 1, a);
  EXPECT_EQ(kv.release_before(1, 3), 0);  // position 3 is in block 0: nothing wholly before it
  EXPECT_EQ(kv.release_before(1, 9), 2);  // blocks 0 and 1 (positions 0..7)
  EXPECT_THAT(kv.block_table(1), ElementsAre(kNullBlock, kNullBlock, 3, 4));
  EXPECT_THAT(refs(kv), ElementsAre(0, 0, 0, 1, 1, 0, 0, 0));
  EXPECT_EQ(kv.num_free_blocks(), 5);
  EXPECT_EQ(kv.stats().used_slots, 4 + 2);
  EXPECT_EQ(kv.release_before(1, 9), 0);    // idempotent
  EXPECT_EQ(kv.release_before(1, 100), 1);  // never the last block, which holds the latest token
  EXPECT_THAT(kv.block_table(1), ElementsAre(kNullBlock, kNullBlock, kNullBlock, 4));
  // the request goes on: new slots, the next commit registers only real blocks
  for (int32_t t = 14; t < 17; ++t) {
    ASSERT_TRUE(kv.allocate_slots(1, t, 1));
    a.push(100 + t);
    kv.commit(1, a.hashes, t + 1);
  }
  EXPECT_THAT(kv.block_table(1), ElementsAre(kNullBlock, kNullBlock, kNullBlock, 4, 5));
  EXPECT_TRUE(kv.pool().block_key(4));
  EXPECT_FALSE(kv.pool().block_key(kNullBlock));
  // released committed blocks still answer their own prefix (their KV is that prefix's) ...
  PrefixHit hit = kv.get_computed_blocks(a.rt());
  EXPECT_THAT(hit.blocks, ElementsAre(1, 2, 3, 4));
  // ... and no other: same tokens in block 1 after a different block 0 miss at once
  Seq b = iota_seq(0, 14);
  b.tokens[0] = 99;
  b = seq(b.tokens);
  EXPECT_THAT(kv.get_computed_blocks(b.rt()).blocks, IsEmpty());
  // fork shares only the real blocks; free releases them
  kv.fork(1, 2);
  EXPECT_THAT(refs(kv), ElementsAre(0, 0, 0, 0, 2, 2, 0, 0));
  kv.free(1);
  kv.free(2);
  EXPECT_THAT(refs(kv), ElementsAre(0, 0, 0, 0, 0, 0, 0, 0));
  EXPECT_EQ(kv.num_free_blocks(), 7);
  EXPECT_EQ(kv.stats().used_slots, 0);
}

TEST(KvCacheManager, ReleaseBeforeWithoutPrefixCaching) {
  auto kv = make(8, /*caching=*/false);
  ASSERT_TRUE(kv.allocate_slots(1, 0, 12));
  EXPECT_EQ(kv.release_before(1, 8), 2);
  EXPECT_THAT(kv.block_table(1), ElementsAre(kNullBlock, kNullBlock, 3));
  EXPECT_EQ(kv.stats().num_cached_blocks, 0);
  EXPECT_THAT(kv.pool().free_queue(), ElementsAre(2, 1, 4, 5, 6, 7));  // garbage: reused first
  kv.truncate(1, 9);  // speculative rollback above the released blocks
  EXPECT_THAT(kv.block_table(1), ElementsAre(kNullBlock, kNullBlock, 3));
  kv.free(1);
  EXPECT_EQ(kv.num_free_blocks(), 7);
}

// Recurrent models: each request holds a sequence-state slot from its first allocation until freed; a
// request finding none free is refused with nothing changed; a fork takes a slot and asks for the
// parent's state to be copied into it (or, with none free, changes nothing).
TEST(KvCacheManager, StateSlotsFollowRequests) {
  EXPECT_FALSE(KvCacheManager::create({8, kBs, /*enable_prefix_caching=*/true, /*num_state_slots=*/2}).ok());
  auto m = std::move(KvCacheManager::create({8, kBs, false, 2})).value();
  ASSERT_TRUE(m.allocate_slots(1, 0, 5));
  ASSERT_TRUE(m.allocate_slots(2, 0, 3));
  const int32_t s1 = m.state_slot(1), s2 = m.state_slot(2);
  EXPECT_GE(s1, 0);
  EXPECT_GE(s2, 0);
  EXPECT_NE(s1, s2);
  EXPECT_EQ(m.num_free_state_slots(), 0);
  const int32_t free_blocks = m.num_free_blocks();
  EXPECT_FALSE(m.allocate_slots(3, 0, 2));  // blocks enough, no slot: refused, nothing changed
  EXPECT_EQ(m.num_free_blocks(), free_blocks);
  EXPECT_FALSE(m.has_request(3));
  EXPECT_EQ(m.state_slot(3), -1);
  ASSERT_TRUE(m.allocate_slots(1, 5, 1));  // a running request keeps its slot
  EXPECT_EQ(m.state_slot(1), s1);
  EXPECT_FALSE(m.fork(1, 4));  // no slot for a child: nothing changed
  EXPECT_FALSE(m.has_request(4));
  EXPECT_THAT(m.take_state_copies(), IsEmpty());
  m.free(2);
  EXPECT_EQ(m.num_free_state_slots(), 1);
  ASSERT_TRUE(m.fork(1, 4));
  EXPECT_EQ(m.state_slot(4), s2);  // the freed slot
  EXPECT_THAT(m.take_state_copies(), ElementsAre(BlockCopy{s1, s2}));
  EXPECT_THAT(m.take_state_copies(), IsEmpty());
  ASSERT_TRUE(m.fork(4, 5) == false);
  m.free(4);
  ASSERT_TRUE(m.allocate_slots(3, 0, 2));
  EXPECT_EQ(m.state_slot(3), s2);
  // a fork's copy is void once its child is freed before the copy was taken
  m.free(3);
  ASSERT_TRUE(m.fork(1, 6));
  m.free(6);
  EXPECT_THAT(m.take_state_copies(), IsEmpty());
}

TEST(KvCacheManager, WithoutStateSlotsRequestsHaveNone) {
  auto m = std::move(KvCacheManager::create({8, kBs, true})).value();
  ASSERT_TRUE(m.allocate_slots(1, 0, 5));
  EXPECT_EQ(m.state_slot(1), -1);
  EXPECT_TRUE(m.fork(1, 2));
  EXPECT_THAT(m.take_state_copies(), IsEmpty());
}
