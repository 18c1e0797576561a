// Attention of query tokens over a paged KV cache (layout in model/kv_storage.h:
// per layer (num_blocks, n_head_kv, block_size, head_dim)). Online softmax block by block, so no
// score buffer grows with the context; all query heads of a GQA group share each K/V load.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace tmill {

struct PagedKvView {
  const uint8_t* k = nullptr;  // layer's key array
  const uint8_t* v = nullptr;  // layer's value array
  DType dtype = DType::F16;    // F32, F16, BF16
  int64_t n_head_kv = 0;
  int64_t block_size = 0;
  int64_t head_dim = 0;
};

// For one query token and one KV head: q holds `group` query heads (group x head_dim, contiguous),
// attending to positions [0, n_ctx) found through block_table. out: group x head_dim.
void paged_attention_group(const float* q, int64_t group, int64_t kv_head, const PagedKvView& kv,
                           const int32_t* block_table, int64_t n_ctx, float scale, float* out);

// Writes one token's K and V (n_head_kv x head_dim floats each) at `pos` of the sequence.
void paged_kv_store(const PagedKvView& kv, const int32_t* block_table, int64_t pos, const float* k, const float* v);

}  // namespace tmill
