#include "kv/block_hash.h"

#include <xxhash.h>

namespace tmill {

BlockHash hash_block_tokens(BlockHash parent, std::span<const int32_t> tokens) {
  return XXH3_64bits_withSeed(tokens.data(), tokens.size_bytes(), parent);
}

BlockHash chain_seed(std::optional<uint64_t> extra_key) {
  if (!extra_key) return kRootBlockSeed;
  uint8_t bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(*extra_key >> (8 * i));
  return XXH3_64bits_withSeed(bytes, sizeof bytes, kRootBlockSeed);
}

uint64_t hash_extra_key(std::string_view key) { return XXH3_64bits(key.data(), key.size()); }

void extend_block_hashes(std::span<const int32_t> tokens, int block_size,
                         std::optional<uint64_t> extra_key, std::vector<BlockHash>& hashes) {
  const size_t full = tokens.size() / static_cast<size_t>(block_size);
  BlockHash parent = hashes.empty() ? chain_seed(extra_key) : hashes.back();
  for (size_t b = hashes.size(); b < full; ++b) {
    parent = hash_block_tokens(parent, tokens.subspan(b * block_size, block_size));
    hashes.push_back(parent);
  }
}

std::vector<BlockHash> compute_block_hashes(std::span<const int32_t> tokens, int block_size,
                                            std::optional<uint64_t> extra_key) {
  std::vector<BlockHash> hashes;
  extend_block_hashes(tokens, block_size, extra_key, hashes);
  return hashes;
}

}  // namespace tmill
