#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "kv/block_hash.h"

using namespace tmill;

namespace {
std::vector<int32_t> iota_tokens(int32_t first, int32_t n) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}
// The documented key layout, written out independently: int32 little-endian bytes, seeded XXH3.
uint64_t reference_key(uint64_t parent, const std::vector<int32_t>& tokens) {
  std::vector<uint8_t> bytes;
  for (int32_t t : tokens)
    for (int i = 0; i < 4; ++i) bytes.push_back(static_cast<uint8_t>(static_cast<uint32_t>(t) >> (8 * i)));
  return XXH3_64bits_withSeed(bytes.data(), bytes.size(), parent);
}
}  // namespace

TEST(BlockHash, LibraryGoldenVector) {
  // Published XXH3-64 value of the empty input (xxHash's sanity check table).
  EXPECT_EQ(XXH3_64bits(nullptr, 0), 0x2D06800538D394C2ULL);
}

TEST(BlockHash, KeyIsSeededXxh3OfLittleEndianTokens) {
  const std::vector<int32_t> block{1, 2, 3, -4};
  EXPECT_EQ(hash_block_tokens(kRootBlockSeed, block), reference_key(kRootBlockSeed, block));
  EXPECT_EQ(chain_seed(std::nullopt), kRootBlockSeed);
  uint8_t le[8];
  const uint64_t extra = 0x0102030405060708ULL;
  for (int i = 0; i < 8; ++i) le[i] = static_cast<uint8_t>(extra >> (8 * i));
  EXPECT_EQ(chain_seed(extra), XXH3_64bits_withSeed(le, 8, kRootBlockSeed));
}

TEST(BlockHash, ChainsFullBlocksOnly) {
  const auto tokens = iota_tokens(10, 11);  // 2 full blocks of 4 + 3 tokens
  const auto h = compute_block_hashes(tokens, 4);
  ASSERT_EQ(h.size(), 2u);
  const uint64_t h0 = reference_key(kRootBlockSeed, {10, 11, 12, 13});
  EXPECT_EQ(h[0], h0);
  EXPECT_EQ(h[1], reference_key(h0, {14, 15, 16, 17}));
}

TEST(BlockHash, SameTokensUnderDifferentPrefixDiffer) {
  const std::vector<int32_t> a{1, 2, 3, 4, 9, 9, 9, 9};
  const std::vector<int32_t> b{5, 6, 7, 8, 9, 9, 9, 9};
  const auto ha = compute_block_hashes(a, 4), hb = compute_block_hashes(b, 4);
  EXPECT_NE(ha[0], hb[0]);
  EXPECT_NE(ha[1], hb[1]);  // identical second block, different parent
  // Same block contents, same position, same prefix: identical keys.
  EXPECT_EQ(compute_block_hashes(a, 4), ha);
}

TEST(BlockHash, ExtraKeySeparatesChains) {
  const auto tokens = iota_tokens(0, 8);
  const auto none = compute_block_hashes(tokens, 4);
  const auto zero = compute_block_hashes(tokens, 4, uint64_t{0});
  const auto lora = compute_block_hashes(tokens, 4, hash_extra_key("lora-a"));
  EXPECT_NE(none[0], zero[0]);
  EXPECT_NE(zero[0], lora[0]);
  EXPECT_NE(none[1], lora[1]);  // the first block's seed propagates down the chain
  EXPECT_EQ(lora, compute_block_hashes(tokens, 4, hash_extra_key("lora-a")));
  EXPECT_EQ(hash_extra_key("lora-a"), XXH3_64bits("lora-a", 6));
}

TEST(BlockHash, ExtendIsIncremental) {
  auto tokens = iota_tokens(100, 5);
  std::vector<BlockHash> h;
  extend_block_hashes(tokens, 4, std::nullopt, h);
  EXPECT_EQ(h.size(), 1u);
  for (int32_t t = 0; t < 7; ++t) {
    tokens.push_back(t);
    extend_block_hashes(tokens, 4, std::nullopt, h);
  }
  EXPECT_EQ(h.size(), 3u);
  EXPECT_EQ(h, compute_block_hashes(tokens, 4));
}
