// Prefix-cache keys for full KV blocks.
//
// A full block's key is chained: key(block i) = XXH3_64bits_withSeed(token ids of block i as int32 in
// host (little-endian on x86) byte order, seed = key(block i-1)). The seed of block 0 is kRootBlockSeed,
// or, when the request carries an extra key (LoRA / model id / cache salt),
// XXH3_64bits_withSeed(&extra_key as uint64 LE, 8, kRootBlockSeed). Two blocks therefore share a key
// only when they hold the same tokens after the same prefix under the same extra key.
// Keys are trusted (no token-by-token verification), like vLLM's non-cryptographic hash mode: a 64-bit
// collision is ~n^2 / 2^65 for n distinct cached blocks. Isolate tenants with the extra key.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace tmill {

using BlockHash = uint64_t;

// Seed of the first block of every chain (arbitrary fixed constant).
inline constexpr uint64_t kRootBlockSeed = 0x746d696c6c6b7631ULL;  // "tmillkv1"

// Key of one full block given its parent's key (or chain_seed() for the first block).
BlockHash hash_block_tokens(BlockHash parent, std::span<const int32_t> tokens);

// Seed used as the "parent" of block 0: mixes in the optional extra key.
BlockHash chain_seed(std::optional<uint64_t> extra_key);

// Turns a string extra key (LoRA name, cache salt) into the 64-bit extra key.
uint64_t hash_extra_key(std::string_view key);

// Appends to `hashes` the keys of the full blocks of `tokens` that `hashes` does not cover yet
// (hashes.size() blocks are assumed already hashed with the same tokens/extra key).
void extend_block_hashes(std::span<const int32_t> tokens, int block_size,
                         std::optional<uint64_t> extra_key, std::vector<BlockHash>& hashes);

// All full-block keys of `tokens` (convenience for tests and one-off lookups).
std::vector<BlockHash> compute_block_hashes(std::span<const int32_t> tokens, int block_size,
                                            std::optional<uint64_t> extra_key = std::nullopt);

}  // namespace tmill
