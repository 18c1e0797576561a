// KvCacheManager: per-request block tables over one BlockPool, with automatic prefix caching,
// sharing (fork) and copy-on-write. Block management only: it never sees tensors; the engine maps
// block ids to KV storage (token position p of a request lives in block table[p / block_size] at
// slot p % block_size).
//
// Protocol (what the scheduler does each step):
//   hit = get_computed_blocks(tokens)                  // new or preempted request only
//   r = allocate_slots(id, num_computed, n, &hit)      // nullopt: no room, NOTHING changed
//   ... engine applies r->copies, runs the forward pass over the n tokens ...
//   commit(id, block_hashes, num_computed + n)         // registers the now-full computed blocks
//   release_before(id, first_needed)                   // sliding-window models only (below)
//   free(id)                                           // finished / aborted / preempted
//
// Blocks enter the prefix cache only at commit, i.e. once every token in them has been computed, so
// another request can never hit a block whose KV is still being written.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "api/config.h"  // defaults
#include "api/stats.h"  // KvCacheStats
#include "core/result.h"
#include "kv/block_hash.h"
#include "kv/block_pool.h"

namespace tmill {

using KvRequestId = uint64_t;

struct KvCacheConfig {
  int32_t num_blocks = 0;   // including the null block 0
  int32_t block_size = defaults::kBlockSize;  // tokens per block
  bool enable_prefix_caching = true;
  // Recurrent models (Mamba-2 mixers): sequence-state slots, one held by each request from its first
  // allocation until it is freed; a request finding none free is not admitted (allocate_slots fails).
  // A state sums its whole sequence, so no block can stand for a prefix: prefix caching must be off.
  int32_t num_state_slots = 0;
};

// What a prefix lookup needs: all known tokens of the request and the keys of its full blocks
// (compute/extend them with extend_block_hashes(tokens, block_size, extra_key, hashes)).
struct RequestTokens {
  std::span<const int32_t> tokens;
  std::span<const BlockHash> block_hashes;
};

// Longest cached prefix of a request, capped so that at least one token remains to compute.
struct PrefixHit {
  std::vector<int32_t> blocks;   // cached block ids, in prefix order
  int32_t num_tokens = 0;        // blocks.size() * block_size
  int32_t num_query_tokens = 0;  // tokens of the request at lookup time (for hit-rate stats)
};

struct AllocResult {
  std::vector<int32_t> new_blocks;  // freshly allocated ids appended to the table (not CoW ones)
  std::vector<BlockCopy> copies;    // CoW copies the engine must perform before this step
};

// The cache's figures: the engine API's plain type (src/api/stats.h), reported as is.
using KvStats = KvCacheStats;

class KvCacheManager {
 public:
  static Result<KvCacheManager> create(const KvCacheConfig& config);

  int32_t block_size() const { return pool_.block_size(); }
  bool prefix_caching() const { return caching_; }
  // Tokens the whole pool can hold (what one request alone can reach).
  int64_t capacity_tokens() const { return int64_t{pool_.num_usable_blocks()} * block_size(); }

  // Longest run of cached full blocks matching the request's prefix, at most
  // (num_tokens - 1) / block_size blocks. Does not change any state.
  PrefixHit get_computed_blocks(const RequestTokens& req) const;

  // Reserves slots so the request can hold num_computed_tokens (+ hit tokens) + num_new_tokens
  // tokens. `hit` (from get_computed_blocks, same step) is only for a request with no blocks and
  // num_computed_tokens == 0; its blocks are shared (ref+1) and its tokens count as computed.
  // A shared partially-filled block that would be written is replaced by a fresh block (copy
  // reported in AllocResult::copies). Returns nullopt when the pool lacks free blocks; then no state
  // (tables, ref counts, free queue, cache, stats) has changed.
  std::optional<AllocResult> allocate_slots(KvRequestId id, int32_t num_computed_tokens,
                                            int32_t num_new_tokens, const PrefixHit* hit = nullptr);

  // Registers the request's full blocks below num_computed_tokens in the prefix cache.
  void commit(KvRequestId id, std::span<const BlockHash> block_hashes, int32_t num_computed_tokens);

  // Speculative decoding's rollback: the request keeps only the blocks that hold its first
  // num_tokens positions (the rest, slots of rejected draft tokens, go back to the pool, last first)
  // and its last block's fill shrinks to what it holds. Never below the blocks already committed to
  // the prefix cache (rejected tokens are never committed: commit runs on accepted counts only).
  void truncate(KvRequestId id, int32_t num_tokens);

  // Sliding-window models (every layer attends to a window): the request's blocks that hold only
  // positions below first_needed_pos, which no later query of it attends to, go back to the pool now
  // (oldest first); their table entries become kNullBlock (the attention kernels start at the
  // window's block, so they never read them). Only computed (full) blocks qualify: first_needed_pos
  // must not exceed the computed tokens. A committed block keeps its prefix-cache key, which names
  // its whole prefix, so only a request with that same prefix can hit it (its KV is right for that
  // prefix); it waits in the free queue like a finished request's blocks. Returns the blocks released.
  int32_t release_before(KvRequestId id, int32_t first_needed_pos);

  // Releases the request's blocks (last block first). Unknown ids are ignored.
  void free(KvRequestId id);

  // child shares every block of parent (ref+1 each). child must not exist. With state slots the child
  // gets a free one, to be filled with a copy of the parent's (take_state_copies); false when none is
  // free: then nothing changed.
  bool fork(KvRequestId parent, KvRequestId child);

  // The request's state slot (-1: none, or a model without state slots).
  int32_t state_slot(KvRequestId id) const;
  // The state copies forks asked for since the last call (src: the parent's slot), to be applied
  // before the next forward pass.
  std::vector<BlockCopy> take_state_copies() { return std::exchange(state_copies_, {}); }
  int32_t num_free_state_slots() const { return static_cast<int32_t>(free_slots_.size()); }

  bool has_request(KvRequestId id) const { return reqs_.count(id) != 0; }
  const std::vector<int32_t>& block_table(KvRequestId id) const;  // empty for unknown ids
  int32_t num_free_blocks() const { return pool_.num_free_blocks(); }
  double usage() const;
  KvStats stats() const;
  bool reset_prefix_cache() { return pool_.reset_prefix_cache(); }
  const BlockPool& pool() const { return pool_; }

 private:
  struct ReqState {
    std::vector<int32_t> table;
    int32_t num_cached_blocks = 0;  // table prefix already committed (or hit) in the cache
    int32_t num_released = 0;       // table prefix given back by release_before (kNullBlock entries)
    int32_t state_slot = -1;
  };
  KvCacheManager(const KvCacheConfig& config);

  BlockPool pool_;
  bool caching_;
  std::unordered_map<KvRequestId, ReqState> reqs_;
  int64_t query_tokens_ = 0, hit_tokens_ = 0;
  bool stateful_ = false;
  std::vector<int32_t> free_slots_;  // (a stack: the last freed slot is taken first)
  std::vector<BlockCopy> state_copies_;
};

}  // namespace tmill
