// The argument structs of gpu/kernels.h's calls (their meaning is documented there), apart so that
// both builds of the kernels -- CUDA's and the emulator's (gpu/abi.h) -- and the backend table
// (gpu/ops.h) share one definition.
#pragma once

#include <cstdint>

#include "core/dtype.h"

namespace tmill::gpu {

// moe_route
struct GpuMoeRouteArgs {
  const float* logits = nullptr;
  int64_t n_tokens = 0, n_expert = 0, k = 0;
  bool norm = false, softmax_topk = false;
  int32_t* ids = nullptr;
  float* weights = nullptr;
  // DeepSeek-V3's routing (glm4moe, minimax-m2, dots1, ernie4_5-moe's bias): sigmoid scores, a
  // per-expert selection bias (device memory, may be null), grouped choice, the weights' scale
  bool sigmoid = false;
  const float* bias = nullptr;
  int64_t groups = 1, groups_used = 1;
  float scale = 1.0f;
};

// paged_attention_decode
struct GpuAttnArgs {
  const float* q = nullptr;
  float* out = nullptr;
  int64_t n_tokens = 0, n_head = 0, n_head_kv = 0, head_dim = 0;
  const uint8_t* k_tiles = nullptr;
  const uint8_t* v_tiles = nullptr;
  int64_t block_size = 16;
  const int32_t* block_tables = nullptr;  // n_tokens x max_blocks
  int64_t max_blocks = 0;
  const int32_t* n_ctx = nullptr;         // per token
  float scale = 1.0f;
  int64_t window = 0;                     // > 0: a sliding window of that many positions
  float softcap = 0.0f;                   // > 0: soft-capped scores
  const float* sinks = nullptr;           // gpt-oss: a logit per query head in the denominator only
  // split-K: scratch of partial_floats floats (null: never split), the largest n_ctx of the call, and
  // n_splits (0: chosen from max_ctx and the number of (token, KV head) pairs; 1: no split)
  float* partial = nullptr;
  int64_t partial_floats = 0;
  int64_t max_ctx = 0;
  int64_t n_splits = 0;
  // prefill: the tokens in tiles (n_tiles x {first token, count}: at most attention_tile_tokens(...)
  // consecutive tokens of one sequence at consecutive positions, every token in one tile); a CTA per
  // (tile, KV head) reads each K/V position once for the whole tile. Null: a CTA per token (decode).
  const int32_t* tiles = nullptr;
  int64_t n_tiles = 0;
  DType kv_dtype = DType::F16;            // the cache's element type (kv_cache_supports)
};

// rope
struct GpuRopeArgs {
  float* x = nullptr;
  int64_t n_tokens = 0, n_heads = 0, head_dim = 0, n_rot = 0;
  const float* cos = nullptr;
  const float* sin = nullptr;
  bool neox = false;
};

// kv_store
struct GpuKvStoreArgs {
  const float* k = nullptr;
  const float* v = nullptr;
  uint8_t* k_tiles = nullptr;
  uint8_t* v_tiles = nullptr;
  int64_t n_tokens = 0, n_head_kv = 0, head_dim = 0, block_size = 16;
  const int32_t* block_tables = nullptr;
  int64_t max_blocks = 0;
  const int32_t* pos = nullptr;
  DType kv_dtype = DType::F16;
};

}  // namespace tmill::gpu
