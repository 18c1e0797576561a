// BlockPool: the fixed set of KV blocks, their reference counts, the free queue in eviction order and
// the prefix-cache map (block key -> block id). Pure bookkeeping: no tensors, block ids only.
//
// Block 0 is the null block: it is never handed out, never freed and never cached. The engine may
// point padding slots at it (their KV writes land there harmlessly). Usable ids are 1..num_blocks-1.
//
// Free queue (head = next to be reused/evicted, tail = most recently freed):
//  - initially 1, 2, ..., num_blocks-1;
//  - a block whose ref count drops to 0 and that holds a cached key is appended at the TAIL (it stays
//    reusable by prefix hits until it reaches the head and is evicted: LRU);
//  - a block that drops to 0 without a key holds nothing reusable and is pushed at the HEAD, so plain
//    garbage is reused before any cached content is evicted;
//  - callers release a request's blocks last-block-first, so its tail blocks are evicted first.
// A prefix hit on a ref-0 cached block ("touch") unlinks it from the queue in O(1).
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "kv/block_hash.h"

namespace tmill {

inline constexpr int32_t kNullBlock = 0;

// A copy the engine must perform before the forward pass (copy-on-write of a shared partial block):
// copy the whole block src -> dst in every layer's K and V cache. Apply copies in list order.
struct BlockCopy {
  int32_t src = 0;
  int32_t dst = 0;
  bool operator==(const BlockCopy&) const = default;
};

class BlockPool {
 public:
  // num_blocks includes the null block (so num_blocks >= 2).
  BlockPool(int32_t num_blocks, int32_t block_size);

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t num_usable_blocks() const { return num_blocks() - 1; }
  int32_t block_size() const { return block_size_; }
  // Blocks in the free queue (never-used, freed garbage and evictable cached blocks).
  int32_t num_free_blocks() const { return num_free_; }

  // Pops the queue head: evicts its cached key if any, sets ref count 1 and fill 0.
  // Precondition: num_free_blocks() > 0.
  int32_t pop_free();
  // ref+1; a ref-0 block (cached, in the queue) is unlinked from the queue first.
  void touch(int32_t block);
  // ref-1; at 0 the block enters the queue (tail if cached, head otherwise).
  void release(int32_t block);

  // Prefix cache.
  std::optional<int32_t> lookup(BlockHash key) const;
  // Registers a full block under `key`. Returns false (and leaves the block unkeyed) when another
  // block already holds that key (duplicates are not merged: block tables stay append-only).
  bool cache(int32_t block, BlockHash key);
  // Drops every cached key. Only allowed when no block is in use; returns false otherwise.
  bool reset_prefix_cache();

  // Slot accounting: fill = token slots of the block reserved for tokens (0..block_size).
  void set_fill(int32_t block, int32_t tokens);
  int32_t fill(int32_t block) const { return blocks_[block].fill; }
  int64_t used_slots() const { return used_slots_; }  // sum of fill over blocks with ref > 0

  // Introspection (tests, metrics).
  int32_t ref_count(int32_t block) const { return blocks_[block].ref; }
  std::optional<BlockHash> block_key(int32_t block) const;
  int32_t num_cached_blocks() const { return static_cast<int32_t>(cached_.size()); }
  uint64_t num_evictions() const { return evictions_; }
  std::vector<int32_t> free_queue() const;  // head first

 private:
  struct Block {
    int32_t ref = 0;
    int32_t fill = 0;
    bool has_key = false;
    BlockHash key = 0;
  };
  // Free queue: intrusive doubly linked list over block ids; index num_blocks is the sentinel.
  void insert_before(int32_t pos, int32_t block);
  void unlink(int32_t block);
  int32_t sentinel() const { return num_blocks(); }

  int32_t block_size_;
  std::vector<Block> blocks_;
  std::vector<int32_t> prev_, next_;  // size num_blocks + 1
  int32_t num_free_ = 0;
  std::unordered_map<BlockHash, int32_t> cached_;
  int64_t used_slots_ = 0;
  uint64_t evictions_ = 0;
};

}  // namespace tmill
