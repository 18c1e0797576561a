// Plain-data interface between the attention dispatcher (attention.cpp) and its ISA-specific
// kernels (attention_scalar.cpp, attention_avx2.cpp, attention_avx512.cpp), which it reaches through
// the kernel table (kernel_table.h). No STL and no inline functions with external linkage (the ISA
// files are compiled with AVX flags; see kernel_abi.h).
//
// KV tile layout — one (block, kv head) tile, `tile_bytes` apart, tile t = block * n_head_kv + head:
//   K: [head_dim][block_size]  transposed, so one vector load gives one dimension of 16 tokens
//   V: [block_size][head_dim]  token-major, so one token's row is contiguous
// element types: F32, F16, BF16, or INT8 with one f32 scale per token appended to the tile
// (K: int8[head_dim][block_size] then f32 scale[block_size]; V: int8[block_size][head_dim] then
// f32 scale[block_size]); value = scale[token] * q; or FP8 (E4M3 or E5M2 codes, core/fp8.h) in
// INT8's layout, value = scale[token] * fp8(code); or Q4 (q4_0-like: 4-bit codes q in 0..15, value
// = scale * (q - 8), one f16 scale per token and group of kv_q4_group(head_dim) dimensions):
//   K: nibbles [head_dim][block_size / 2] (token 2i in the low nibble, 2i+1 in the high one) then
//      f16 scale[n_groups][block_size];
//   V: nibbles [block_size][head_dim / 2] (dimension 2j low, 2j+1 high) then f16 scale[block_size][n_groups].
// block_size and head_dim even.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tmill::kern {

enum KvType : int { kKvF32 = 0, kKvF16 = 1, kKvBF16 = 2, kKvI8 = 3, kKvQ4 = 4, kKvF8E4M3 = 5, kKvF8E5M2 = 6 };
inline constexpr int kKvTypes = 7;

// The types with a one-byte code and an f32 scale per token (INT8's tile layout).
static constexpr bool kv_token_scaled(int t) { return t == kKvI8 || t == kKvF8E4M3 || t == kKvF8E5M2; }

// The index of (block, kv head)'s tile in the K and V pools (tile_bytes apart). `static`: internal
// linkage, so no ISA file's copy (compiled with AVX flags) can stand in for another's (see above).
static constexpr int64_t kv_tile(int64_t block, int64_t n_head_kv, int64_t head) { return block * n_head_kv + head; }

// Dimensions that share one Q4 scale: 32 (q4_0's block) when head_dim allows, else the whole head.
inline constexpr int64_t kv_q4_group(int64_t head_dim) { return head_dim % 32 == 0 ? 32 : head_dim; }

struct AttnArgs {
  const float* q = nullptr;         // (n_kv * group, head_dim) query heads, `group` per KV head
  int64_t group = 1;
  int64_t head_dim = 0;
  int64_t block_size = 0;
  const uint8_t* k_base = nullptr;  // this layer's key tiles
  const uint8_t* v_base = nullptr;  // this layer's value tiles
  int64_t tile_bytes = 0;
  int64_t n_head_kv = 0;
  int64_t kv_head = 0;
  // KV heads kv_head .. kv_head + n_kv - 1 (adjacent tiles of each block), each with its `group`
  // query heads; q, out and sinks hold all n_kv * group heads. A kernel that takes n_kv > 1 walks a
  // block's n_kv tiles together, so the KV stream reads n_kv * tile_bytes contiguous bytes per block
  // (random 4 KiB tiles read at half the bandwidth of 64 KiB runs on this machine's DRAM).
  int64_t n_kv = 1;
  const int32_t* block_table = nullptr;
  int64_t n_ctx = 0;                // attend to positions [ctx_begin, n_ctx)
  int64_t ctx_begin = 0;            // > 0: a sliding window (earlier positions are masked)
  float scale = 1.0f;               // 1 / sqrt(head_dim)
  float softcap = 0.0f;             // > 0: scores -> softcap * tanh(score / softcap) (gemma2)
  int kv_type = kKvF16;
  float* out = nullptr;             // (n_kv * group, head_dim)
  // Attention sinks (gpt-oss): one logit per query head of the group that joins the softmax's
  // denominator only (ggml's soft_max with sinks); null = none.
  const float* sinks = nullptr;
  // ALiBi (bloom, mpt): one slope per query head (as sinks); a key at position j gets
  // slope * (j - (n_ctx - 1)) added to its score, after the soft-cap; null = none.
  const float* alibi = nullptr;
};

// One kernel per KV type; an ISA's kernels cover only some shapes (AttnCoversFn).
using AttnFn = void (*)(const AttnArgs&);
using AttnCoversFn = bool (*)(const AttnArgs&);

// The arguments for the j-th of a's KV heads alone (n_kv = 1).
static inline AttnArgs attn_head(const AttnArgs& a, int64_t j) {
  AttnArgs h = a;
  h.kv_head = a.kv_head + j;
  h.n_kv = 1;
  h.q = a.q + j * a.group * a.head_dim;
  h.out = a.out + j * a.group * a.head_dim;
  if (a.sinks) h.sinks = a.sinks + j * a.group;
  if (a.alibi) h.alibi = a.alibi + j * a.group;
  return h;
}

// The SIMD kernels' accumulators: 16 query heads of up to 256 dimensions, or fewer heads of wider ones
// (gemma4's 512-wide heads: 8), head_dim rounded up to 16.
constexpr int64_t kAttnAccFloats = 16 * 256;
static inline int64_t attn_max_heads(int64_t head_dim) {
  const int64_t padded = (head_dim + 15) / 16 * 16;
  const int64_t n = kAttnAccFloats / (padded > 0 ? padded : 16);
  return n < 16 ? n : 16;
}

// The arguments for query heads [g0, g0 + n) of a's one KV head (a.n_kv == 1): a group too wide for a
// kernel (Falcon-7B: 71 query heads on one KV head) goes in chunks, each reading the KV head again.
static inline AttnArgs attn_group_chunk(const AttnArgs& a, int64_t g0, int64_t n) {
  AttnArgs c = a;
  c.group = n;
  c.q = a.q + g0 * a.head_dim;
  c.out = a.out + g0 * a.head_dim;
  if (a.sinks) c.sinks = a.sinks + g0;
  if (a.alibi) c.alibi = a.alibi + g0;
  return c;
}

// Pulls block b's K and V tiles of its a.n_kv heads (every cache line) toward L2; the SIMD kernels call it for block b + 1
// while they compute block b (defined in attention.cpp).
void prefetch_kv_block(const AttnArgs& a, int64_t b);

// The final normalization with an attention sink: 1 / (l + exp(sink - m)) for weights exp(s - m)
// summing to l, computed without overflow when the sink exceeds every score (static inline: each ISA
// file gets its own copy, see kernel_abi.h).
static inline float sink_norm(float m, float l, float sink) {
  if (sink > m) {
    const float c = __builtin_expf(m - sink);
    return c / (l * c + 1.0f);
  }
  return 1.0f / (l + __builtin_expf(sink - m));
}

// Any layout parameters: the fallback for shapes a SIMD kernel does not cover, and the oracle.
void attention_scalar(const AttnArgs& a);

}  // namespace tmill::kern
