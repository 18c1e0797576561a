#include "kv/kv_cache_manager.h"

#include <algorithm>

#include "core/log.h"

namespace tmill {

Result<KvCacheManager> KvCacheManager::create(const KvCacheConfig& config) {
  if (config.block_size < 1) return Error{"kv cache: block_size must be >= 1"};
  if (config.num_blocks < 2) return Error{"kv cache: need at least 2 blocks (block 0 is reserved)"};
  if (config.num_state_slots < 0) return Error{"kv cache: negative num_state_slots"};
  if (config.num_state_slots > 0 && config.enable_prefix_caching)
    return Error{"kv cache: prefix caching cannot serve sequence states (num_state_slots > 0)"};
  return KvCacheManager(config);
}

KvCacheManager::KvCacheManager(const KvCacheConfig& config)
    : pool_(config.num_blocks, config.block_size),
      caching_(config.enable_prefix_caching),
      stateful_(config.num_state_slots > 0) {
  for (int32_t s = config.num_state_slots - 1; s >= 0; --s) free_slots_.push_back(s);
}

PrefixHit KvCacheManager::get_computed_blocks(const RequestTokens& req) const {
  PrefixHit hit;
  if (!caching_ || req.tokens.empty()) return hit;
  hit.num_query_tokens = static_cast<int32_t>(req.tokens.size());
  // Keep at least one token to compute so the engine gets logits for the last position.
  const size_t max_blocks = std::min((req.tokens.size() - 1) / block_size(), req.block_hashes.size());
  for (size_t b = 0; b < max_blocks; ++b) {
    auto block = pool_.lookup(req.block_hashes[b]);
    if (!block) break;
    hit.blocks.push_back(*block);
  }
  hit.num_tokens = static_cast<int32_t>(hit.blocks.size()) * block_size();
  return hit;
}

std::optional<AllocResult> KvCacheManager::allocate_slots(KvRequestId id, int32_t num_computed_tokens,
                                                          int32_t num_new_tokens, const PrefixHit* hit) {
  TM_ASSERT(num_computed_tokens >= 0 && num_new_tokens >= 0);
  const int32_t bs = block_size();
  auto it = reqs_.find(id);
  const std::vector<int32_t> no_blocks;
  const std::vector<int32_t>& table = it != reqs_.end() ? it->second.table : no_blocks;
  const size_t num_hit = hit ? hit->blocks.size() : 0;
  if (num_hit > 0) {
    TM_ASSERT(table.empty() && num_computed_tokens == 0, "prefix hit for a request that holds blocks");
    TM_ASSERT(hit->num_tokens == static_cast<int32_t>(num_hit) * bs);
  }
  const int64_t computed = num_computed_tokens + (hit ? hit->num_tokens : 0);
  const int64_t total = computed + num_new_tokens;
  const int64_t need = (total + bs - 1) / bs;
  const int64_t have = static_cast<int64_t>(table.size() + num_hit);
  const int64_t num_new_blocks = std::max<int64_t>(0, need - have);

  // Copy-on-write: blocks that will receive new tokens (index >= computed / bs) but are shared.
  std::vector<size_t> cow;
  for (size_t i = computed / bs; i < table.size() && static_cast<int64_t>(i) < need; ++i)
    if (pool_.ref_count(table[i]) > 1) cow.push_back(i);
  // Hit blocks with ref 0 sit in the free queue: taking them shrinks what is left to allocate.
  int64_t evictable_hits = 0;
  for (size_t i = 0; i < num_hit; ++i) evictable_hits += pool_.ref_count(hit->blocks[i]) == 0;
  if (num_new_blocks + static_cast<int64_t>(cow.size()) + evictable_hits > pool_.num_free_blocks())
    return std::nullopt;
  const bool needs_slot = stateful_ && (it == reqs_.end() || it->second.state_slot < 0);
  if (needs_slot && free_slots_.empty()) return std::nullopt;

  // From here on the allocation cannot fail.
  ReqState& st = reqs_[id];
  if (needs_slot) {
    st.state_slot = free_slots_.back();
    free_slots_.pop_back();
  }
  AllocResult out;
  for (size_t i = 0; i < num_hit; ++i) {  // touch hits first: they must not be evicted below
    TM_ASSERT(pool_.block_key(hit->blocks[i]).has_value(), "stale prefix hit");
    pool_.touch(hit->blocks[i]);
    st.table.push_back(hit->blocks[i]);
  }
  st.num_cached_blocks = std::max<int32_t>(st.num_cached_blocks, static_cast<int32_t>(num_hit));
  for (size_t i : cow) {
    const int32_t old_block = st.table[i];
    const int32_t fresh = pool_.pop_free();
    const int64_t held = std::clamp<int64_t>(computed - static_cast<int64_t>(i) * bs, 0, bs);
    if (held > 0) out.copies.push_back({old_block, fresh});
    pool_.release(old_block);  // still referenced by the other sharer(s)
    st.table[i] = fresh;
  }
  for (int64_t i = 0; i < num_new_blocks; ++i) {
    const int32_t b = pool_.pop_free();
    st.table.push_back(b);
    out.new_blocks.push_back(b);
  }
  for (int64_t i = computed / bs; i < need; ++i)
    pool_.set_fill(st.table[i], static_cast<int32_t>(std::min<int64_t>(bs, total - i * bs)));
  if (hit && caching_) {
    query_tokens_ += hit->num_query_tokens;
    hit_tokens_ += hit->num_tokens;
  }
  return out;
}

void KvCacheManager::commit(KvRequestId id, std::span<const BlockHash> block_hashes,
                            int32_t num_computed_tokens) {
  if (!caching_) return;
  auto it = reqs_.find(id);
  TM_ASSERT(it != reqs_.end(), "commit for an unknown request");
  ReqState& st = it->second;
  const size_t full = std::min<size_t>(num_computed_tokens / block_size(), st.table.size());
  TM_ASSERT(block_hashes.size() >= full, "block hashes do not cover the computed blocks");
  for (size_t b = std::max(st.num_cached_blocks, st.num_released); b < full; ++b) {
    // A duplicate key (same content computed twice concurrently) leaves this block unkeyed.
    if (!pool_.block_key(st.table[b])) pool_.cache(st.table[b], block_hashes[b]);
  }
  st.num_cached_blocks = std::max<int32_t>(st.num_cached_blocks, static_cast<int32_t>(full));
}

void KvCacheManager::truncate(KvRequestId id, int32_t num_tokens) {
  auto it = reqs_.find(id);
  TM_ASSERT(it != reqs_.end(), "truncate of an unknown request");
  ReqState& st = it->second;
  const int32_t bs = block_size();
  const size_t keep = static_cast<size_t>((std::max(num_tokens, 0) + bs - 1) / bs);
  TM_ASSERT(static_cast<int32_t>(keep) >= st.num_cached_blocks, "truncate below the committed blocks");
  TM_ASSERT(static_cast<int32_t>(keep) >= st.num_released, "truncate below the released blocks");
  while (st.table.size() > keep) {
    pool_.release(st.table.back());
    st.table.pop_back();
  }
  if (keep > 0 && num_tokens % bs != 0) pool_.set_fill(st.table[keep - 1], num_tokens % bs);
}

int32_t KvCacheManager::release_before(KvRequestId id, int32_t first_needed_pos) {
  auto it = reqs_.find(id);
  TM_ASSERT(it != reqs_.end(), "release_before for an unknown request");
  ReqState& st = it->second;
  // Whole blocks below the position; never the last block (it holds the latest computed token).
  const int32_t n = std::min<int32_t>(std::max(first_needed_pos, 0) / block_size(),
                                      static_cast<int32_t>(st.table.size()) - 1);
  int32_t released = 0;
  for (; st.num_released < n; ++st.num_released, ++released) {
    int32_t& b = st.table[static_cast<size_t>(st.num_released)];
    TM_ASSERT(b != kNullBlock && pool_.fill(b) == block_size(), "releasing a block that is not full");
    pool_.release(b);
    b = kNullBlock;
  }
  return released;
}

void KvCacheManager::free(KvRequestId id) {
  auto it = reqs_.find(id);
  if (it == reqs_.end()) return;
  const std::vector<int32_t>& table = it->second.table;
  for (auto b = table.rbegin(); b != table.rend(); ++b)
    if (*b != kNullBlock) pool_.release(*b);
  if (it->second.state_slot >= 0) {
    free_slots_.push_back(it->second.state_slot);
    // (a fork's copy into this slot, not yet applied, is void now)
    std::erase_if(state_copies_, [&](const BlockCopy& c) { return c.dst == it->second.state_slot; });
  }
  reqs_.erase(it);
}

bool KvCacheManager::fork(KvRequestId parent, KvRequestId child) {
  auto it = reqs_.find(parent);
  TM_ASSERT(it != reqs_.end(), "fork of an unknown request");
  TM_ASSERT(!reqs_.count(child), "fork into an existing request");
  if (stateful_ && free_slots_.empty()) return false;
  ReqState copy = it->second;
  for (int32_t b : copy.table)
    if (b != kNullBlock) pool_.touch(b);
  if (stateful_) {
    copy.state_slot = free_slots_.back();
    free_slots_.pop_back();
    state_copies_.push_back({it->second.state_slot, copy.state_slot});
  }
  reqs_.emplace(child, std::move(copy));
  return true;
}

int32_t KvCacheManager::state_slot(KvRequestId id) const {
  auto it = reqs_.find(id);
  return it == reqs_.end() ? -1 : it->second.state_slot;
}

const std::vector<int32_t>& KvCacheManager::block_table(KvRequestId id) const {
  static const std::vector<int32_t> kEmpty;
  auto it = reqs_.find(id);
  return it == reqs_.end() ? kEmpty : it->second.table;
}

double KvCacheManager::usage() const {
  const int32_t n = pool_.num_usable_blocks();
  return static_cast<double>(n - pool_.num_free_blocks()) / n;
}

KvStats KvCacheManager::stats() const {
  KvStats s;
  s.num_blocks = pool_.num_usable_blocks();
  s.num_free_blocks = pool_.num_free_blocks();
  s.num_cached_blocks = pool_.num_cached_blocks();
  s.usage = usage();
  s.prefix_query_tokens = query_tokens_;
  s.prefix_hit_tokens = hit_tokens_;
  s.allocated_slots = int64_t{s.num_blocks - s.num_free_blocks} * block_size();
  s.used_slots = pool_.used_slots();
  s.num_evictions = pool_.num_evictions();
  return s;
}

}  // namespace tmill
