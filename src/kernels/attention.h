// Attention of query tokens over a paged KV cache. Tile layout and element types in
// kernels/attention_abi.h. Online softmax block by block (no score buffer that grows with the
// context); all query heads of a GQA group share each K/V load.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace tmill {

// KV element types: F32, F16, BF16, I8 (int8 with a per-token scale) or Q4_0 (4-bit codes with an f16
// scale per token and group of 32 dimensions; block_size and head_dim even). Layouts: attention_abi.h.
bool kv_type_supported(DType t);
// Bytes of one (block, kv head) tile of keys (values are the same size).
size_t kv_tile_bytes(DType t, int64_t head_dim, int64_t block_size);

struct PagedKvView {
  uint8_t* k = nullptr;      // layer's key tiles
  uint8_t* v = nullptr;      // layer's value tiles
  DType dtype = DType::F16;
  int64_t n_head_kv = 0;
  int64_t block_size = 0;
  int64_t head_dim = 0;
  size_t tile_bytes() const { return kv_tile_bytes(dtype, head_dim, block_size); }
};

// Which of the positions before a query it sees, and what its softmax does beyond q.k * scale.
struct AttnMask {
  int64_t begin = 0;             // first position attended: a sliding window of w positions starts at n_ctx - w
  float softcap = 0.0f;          // > 0: scores -> softcap * tanh(score / softcap) before the softmax (gemma2)
  const float* sinks = nullptr;  // `group` sink logits, one per query head, in the denominator only (gpt-oss)
  // `group` ALiBi slopes, one per query head: a key at position j scores slope * (j - (n_ctx - 1)) more (bloom)
  const float* alibi = nullptr;
};

// For one query token and one KV head: q holds `group` query heads (group x head_dim, contiguous),
// attending to positions [mask.begin, n_ctx) found through block_table. out: group x head_dim.
void paged_attention_group(const float* q, int64_t group, int64_t kv_head, const PagedKvView& kv,
                           const int32_t* block_table, int64_t n_ctx, float scale, float* out, AttnMask mask = {});
// The same for n_kv adjacent KV heads kv_head .. kv_head + n_kv - 1 in one call: q and out hold their
// n_kv * group query heads, mask.sinks their n_kv * group sink logits. Each head's result is bitwise
// what paged_attention_group gives it; the kernel reads each block's n_kv tiles together (contiguous
// in the pool), the cheaper walk through DRAM in a batched decode step.
void paged_attention_heads(const float* q, int64_t group, int64_t kv_head, int64_t n_kv, const PagedKvView& kv,
                           const int32_t* block_table, int64_t n_ctx, float scale, float* out, AttnMask mask = {});
// Same through the scalar kernel only (the oracle the SIMD kernels are tested against).
void paged_attention_group_reference(const float* q, int64_t group, int64_t kv_head, const PagedKvView& kv,
                                     const int32_t* block_table, int64_t n_ctx, float scale, float* out,
                                     AttnMask mask = {});

// The query heads the SIMD kernels take in one call at this head size (16; 8 of 512 dimensions): callers
// batching several KV heads' runs keep below it.
int64_t paged_attention_max_heads(int64_t head_dim);

// Writes one token's K and V (n_head_kv x head_dim floats each) at `pos` of the sequence.
void paged_kv_store(const PagedKvView& kv, const int32_t* block_table, int64_t pos, const float* k, const float* v);
// Pulls the cache lines paged_kv_store(kv, block_table, pos, ...) will write toward the core, so a
// batch's stores (a decode step: one slot in each sequence's last block) overlap their misses instead
// of waiting on each: K's transposed tile puts a token's head_dim values in every line of the tile.
void paged_kv_prefetch_store(const PagedKvView& kv, const int32_t* block_table, int64_t pos);
// Reads back one token's K or V for one head (tests, debugging).
void paged_kv_load(const PagedKvView& kv, const int32_t* block_table, int64_t pos, int64_t head, float* k, float* v);

}  // namespace tmill
