#include "kv/block_pool.h"

#include "core/log.h"

namespace tmill {

BlockPool::BlockPool(int32_t num_blocks, int32_t block_size)
    : block_size_(block_size), blocks_(num_blocks), prev_(num_blocks + 1), next_(num_blocks + 1) {
  TM_ASSERT(num_blocks >= 2 && block_size >= 1);
  prev_[sentinel()] = next_[sentinel()] = sentinel();
  for (int32_t b = 1; b < num_blocks; ++b) insert_before(sentinel(), b);
}

void BlockPool::insert_before(int32_t pos, int32_t block) {
  const int32_t p = prev_[pos];
  next_[p] = block;
  prev_[block] = p;
  next_[block] = pos;
  prev_[pos] = block;
  ++num_free_;
}

void BlockPool::unlink(int32_t block) {
  next_[prev_[block]] = next_[block];
  prev_[next_[block]] = prev_[block];
  prev_[block] = next_[block] = -1;
  --num_free_;
}

int32_t BlockPool::pop_free() {
  TM_ASSERT(num_free_ > 0, "pop_free on an empty free queue");
  const int32_t b = next_[sentinel()];
  unlink(b);
  Block& blk = blocks_[b];
  TM_ASSERT(blk.ref == 0);
  if (blk.has_key) {
    auto it = cached_.find(blk.key);
    TM_ASSERT(it != cached_.end() && it->second == b);
    cached_.erase(it);
    blk.has_key = false;
    ++evictions_;
  }
  blk.ref = 1;
  blk.fill = 0;
  return b;
}

void BlockPool::touch(int32_t block) {
  TM_ASSERT(block > kNullBlock && block < num_blocks());
  Block& blk = blocks_[block];
  if (blk.ref == 0) {
    unlink(block);
    used_slots_ += blk.fill;
  }
  ++blk.ref;
}

void BlockPool::release(int32_t block) {
  TM_ASSERT(block > kNullBlock && block < num_blocks());
  Block& blk = blocks_[block];
  TM_ASSERT(blk.ref > 0, "double free of a KV block");
  if (--blk.ref > 0) return;
  used_slots_ -= blk.fill;
  insert_before(blk.has_key ? sentinel() : next_[sentinel()], block);
}

std::optional<int32_t> BlockPool::lookup(BlockHash key) const {
  auto it = cached_.find(key);
  if (it == cached_.end()) return std::nullopt;
  return it->second;
}

bool BlockPool::cache(int32_t block, BlockHash key) {
  Block& blk = blocks_[block];
  TM_ASSERT(block > kNullBlock && blk.ref > 0 && !blk.has_key);
  if (!cached_.emplace(key, block).second) return false;
  blk.has_key = true;
  blk.key = key;
  return true;
}

bool BlockPool::reset_prefix_cache() {
  if (num_free_ != num_usable_blocks()) return false;
  for (Block& blk : blocks_) blk.has_key = false;
  cached_.clear();
  return true;
}

void BlockPool::set_fill(int32_t block, int32_t tokens) {
  TM_ASSERT(tokens >= 0 && tokens <= block_size_);
  Block& blk = blocks_[block];
  if (blk.ref > 0) used_slots_ += tokens - blk.fill;
  blk.fill = tokens;
}

std::optional<BlockHash> BlockPool::block_key(int32_t block) const {
  if (!blocks_[block].has_key) return std::nullopt;
  return blocks_[block].key;
}

std::vector<int32_t> BlockPool::free_queue() const {
  std::vector<int32_t> out;
  out.reserve(num_free_);
  for (int32_t b = next_[sentinel()]; b != sentinel(); b = next_[b]) out.push_back(b);
  return out;
}

}  // namespace tmill
