#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "kv/block_pool.h"

using namespace tmill;
using ::testing::ElementsAre;

TEST(BlockPool, NullBlockIsNeverHandedOut) {
  BlockPool pool(8, 4);
  EXPECT_EQ(pool.num_usable_blocks(), 7);
  EXPECT_EQ(pool.num_free_blocks(), 7);
  EXPECT_THAT(pool.free_queue(), ElementsAre(1, 2, 3, 4, 5, 6, 7));
  std::vector<int32_t> got;
  for (int i = 0; i < 7; ++i) got.push_back(pool.pop_free());
  EXPECT_THAT(got, ElementsAre(1, 2, 3, 4, 5, 6, 7));
  EXPECT_EQ(pool.num_free_blocks(), 0);
  EXPECT_EQ(pool.ref_count(kNullBlock), 0);
}

TEST(BlockPool, CachedBlocksGoToTailGarbageToHead) {
  BlockPool pool(8, 4);
  for (int i = 0; i < 4; ++i) pool.pop_free();  // 1..4 in use
  ASSERT_TRUE(pool.cache(1, 111));
  ASSERT_TRUE(pool.cache(2, 222));
  // Release like a request's table [1, 2, 3] freed last-first.
  pool.release(3);
  pool.release(2);
  pool.release(1);
  EXPECT_THAT(pool.free_queue(), ElementsAre(3, 5, 6, 7, 2, 1));
  EXPECT_EQ(pool.num_cached_blocks(), 2);
  EXPECT_EQ(pool.lookup(222), 2);
}

TEST(BlockPool, TouchUnlinksAnEvictableBlock) {
  BlockPool pool(8, 4);
  pool.pop_free();
  pool.pop_free();
  ASSERT_TRUE(pool.cache(2, 7));
  pool.release(2);
  pool.release(1);
  EXPECT_THAT(pool.free_queue(), ElementsAre(1, 3, 4, 5, 6, 7, 2));
  pool.touch(2);
  EXPECT_EQ(pool.ref_count(2), 1);
  EXPECT_THAT(pool.free_queue(), ElementsAre(1, 3, 4, 5, 6, 7));
  pool.touch(2);  // already in use: only the count changes
  EXPECT_EQ(pool.ref_count(2), 2);
  EXPECT_EQ(pool.num_free_blocks(), 6);
}

TEST(BlockPool, EvictionDropsTheKeyAndCounts) {
  BlockPool pool(3, 4);  // usable: 1, 2
  pool.pop_free();
  pool.pop_free();
  ASSERT_TRUE(pool.cache(1, 42));
  pool.release(1);
  pool.release(2);
  EXPECT_THAT(pool.free_queue(), ElementsAre(2, 1));
  EXPECT_EQ(pool.pop_free(), 2);
  EXPECT_EQ(pool.num_evictions(), 0u);
  EXPECT_EQ(pool.pop_free(), 1);
  EXPECT_EQ(pool.num_evictions(), 1u);
  EXPECT_FALSE(pool.lookup(42).has_value());
  EXPECT_FALSE(pool.block_key(1).has_value());
}

TEST(BlockPool, DuplicateKeyIsNotRegisteredTwice) {
  BlockPool pool(8, 4);
  pool.pop_free();
  pool.pop_free();
  EXPECT_TRUE(pool.cache(1, 9));
  EXPECT_FALSE(pool.cache(2, 9));
  EXPECT_EQ(pool.lookup(9), 1);
  EXPECT_FALSE(pool.block_key(2).has_value());
  pool.release(2);  // unkeyed: to the head
  EXPECT_EQ(pool.free_queue().front(), 2);
}

TEST(BlockPool, SlotAccountingFollowsReferences) {
  BlockPool pool(8, 4);
  const int32_t a = pool.pop_free(), b = pool.pop_free();
  pool.set_fill(a, 4);
  pool.set_fill(b, 1);
  EXPECT_EQ(pool.used_slots(), 5);
  pool.touch(a);  // shared: still counted once
  EXPECT_EQ(pool.used_slots(), 5);
  ASSERT_TRUE(pool.cache(a, 1));
  pool.release(a);
  pool.release(a);
  EXPECT_EQ(pool.used_slots(), 1);
  pool.touch(a);  // prefix hit revives its 4 slots
  EXPECT_EQ(pool.used_slots(), 5);
}

TEST(BlockPool, ResetPrefixCacheNeedsAnIdlePool) {
  BlockPool pool(4, 2);
  const int32_t b = pool.pop_free();
  ASSERT_TRUE(pool.cache(b, 5));
  EXPECT_FALSE(pool.reset_prefix_cache());
  pool.release(b);
  EXPECT_TRUE(pool.reset_prefix_cache());
  EXPECT_FALSE(pool.lookup(5).has_value());
  EXPECT_EQ(pool.num_cached_blocks(), 0);
}
