// CUDA kernels of the GPU backend, host-callable (defined in gpu/*.cu: for CUDA with -DTM_CUDA=ON,
// else each returns an error; and in every build for the CPU's emulator of CUDA, gpu/emu/emu.h, in
// namespace tmill::gpu::emu -- gpu/abi.h). All pointers are device memory (gpu/device.h); calls are asynchronous
// on the backend's one stream (gpu/stream.cuh), synchronize() waits and reports a kernel's failure. The CPU kernels
// (kernels/matmul.h matmul_reference) are their oracle: tests/unit/gpu.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/result.h"
#include "gpu/abi.h"
#include "gpu/kernel_args.h"

namespace tmill::gpu::inline TM_GPU_ABI {

// The GGUF block types the device decodes (gpu/quant.cuh RunDecoder, with_block_type): Q8_0, Q4_0,
// Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4 (32-element blocks) and Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS and the
// lattice i-quants IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M (256-element super-blocks) --
// every type llama.cpp's quantize writes for a model's weights, and gpt-oss's MXFP4.
inline bool block_type_supported(DType t) {
  switch (t) {
    case DType::Q8_0: case DType::Q4_0: case DType::Q4_1: case DType::Q5_0: case DType::Q5_1: case DType::IQ4_NL:
    case DType::MXFP4: case DType::Q2_K: case DType::Q3_K: case DType::Q4_K: case DType::Q5_K: case DType::Q6_K:
    case DType::IQ4_XS: case DType::IQ2_XXS: case DType::IQ2_XS: case DType::IQ2_S: case DType::IQ3_XXS:
    case DType::IQ3_S: case DType::IQ1_S: case DType::IQ1_M:
      return true;
    default:
      return false;
  }
}
// True for the weight types gemv() reads: F32, F16, BF16 and the block types.
bool gemv_supports(DType t);
// Decode's matrix-vector product, dequantizing in registers: y[r] = dot(row r of W, x) for the
// `rows` rows of W (row-major in its file type, row_bytes apart), x of `cols` floats. One warp per
// row; each lane takes whole 32-element blocks (256 for the K-quants) or strided elements.
Status gemv(DType type, const void* w, int64_t rows, int64_t cols, size_t row_bytes, const float* x, float* y);
// The same for n_tokens inputs at once: y[t * rows + r] = dot(row r of W, x + t * cols). A warp takes
// one row and a tile of 8 tokens, so the weights stream once per 8 tokens; a tensor-core GEMM for
// prefill and large batches is the next step.
Status gemm(DType type, const void* w, int64_t rows, int64_t cols, size_t row_bytes, const float* x, int64_t n_tokens,
            float* y);
// Mixture-of-experts products (llama.cpp's mul_mat_id): n_pairs (token, expert) pairs, pair p
// reading the matrix of expert ids[p] (the experts' matrices expert_bytes apart from w, each rows x
// cols in its file type) and the input row x + (p / x_div) * cols (x_div = k for the gate/up products
// of a token's k experts, 1 for the down product of each pair's own row): y[p * rows + r]. A warp per
// (row, pair). With `order` (moe_sort's: the pairs grouped by expert) the pairs are launched in that
// order, so the pairs of one expert run back to back and read its rows from L2 instead of HBM; the
// results are the same either way.
Status gemm_id(DType type, const void* w, size_t expert_bytes, int64_t rows, int64_t cols, size_t row_bytes,
               const float* x, int64_t x_div, const int32_t* ids, int64_t n_pairs, float* y,
               const int32_t* order = nullptr);
// order = the n_pairs pair indices grouped by their expert ids[p] (ascending experts; any order within
// one), for gemm_id. One CTA; n_expert <= 256.
Status moe_sort(const int32_t* ids, int64_t n_pairs, int64_t n_expert, int32_t* order);
// Routing of n_tokens tokens over n_expert experts (logits: n_tokens x n_expert): as model/moe.h
// moe_route_token -- softmax over all experts then the top k (or, softmax_topk, the top k logits then
// a softmax over them), norm renormalizes the k weights to sum 1, and each token's k experts in
// ascending order: ids and weights, n_tokens x k. One thread per token; n_expert <= 256, k <= 32.
Status moe_route(const GpuMoeRouteArgs& a);
// y[t] = sum over j < k of weights[t * k + j] * yp[t * k + j] (rows of n floats, in j's order), plus,
// when shared is not null, sigmoid(shared_gate[t]) * shared[t] (qwen2moe's shared expert).
Status moe_combine(float* y, const float* yp, const float* weights, int64_t n_tokens, int64_t k, int64_t n,
                   const float* shared, const float* shared_gate);
// Prefill and large batches on tensor cores (gemm_tc.cu): gemm's result with the activations rounded
// to F16 (BF16 for BF16 weights) and quantized weights dequantized to F16, WMMA 16x16x16 tiles with
// FP32 accumulation. The workspace (device memory) holds a chunk of rounded activations and, for
// quantized weights, a chunk of dequantized rows; the product runs chunk by chunk. Types and shapes
// gemm_tc_supports refuses, or a workspace too small for one 16 x 16 chunk, run gemm instead.
// Worth it from kGemmTcMinTokens tokens: below, gemm's weight stream is the bound.
inline constexpr int64_t kGemmTcMinTokens = 64;
inline constexpr size_t kGemmTcWorkspaceBytes = size_t{64} << 20;
// From this many (padded) tokens gemm_tc's CTAs take 64 tokens each, below 32.
inline constexpr int64_t kGemmTcLongTokens = 256;
inline bool gemm_tc_supports(DType type, int64_t rows, int64_t cols, size_t row_bytes) {
  if (rows % 16 != 0 || cols % 16 != 0 || rows <= 0 || cols <= 0) return false;
  if (type == DType::F16 || type == DType::BF16) return row_bytes % 32 == 0 && row_bytes >= static_cast<size_t>(cols) * 2;
  return block_type_supported(type) && cols % dtype_info(type).block_size == 0;
}
Status gemm_tc(DType type, const void* w, int64_t rows, int64_t cols, size_t row_bytes, const float* x, int64_t n_tokens,
               float* y, void* workspace, size_t workspace_bytes);
// Embedding rows on the device: out[t] = row ids[t] of W (rows of `cols` elements, row_bytes apart)
// dequantized to F32, times scale (gemma's sqrt(n_embd) on its embeddings) -- the CPU's get_row, then
// the scale. Block types need whole blocks (cols a multiple of the type's block). The types the
// device decodes (gemv_supports is the same list in a CUDA build).
inline bool get_rows_supports(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16 || block_type_supported(t);
}
Status get_rows(DType type, const void* w, size_t row_bytes, int64_t cols, const int32_t* ids, int64_t n, float* out,
                float scale);
// y = x / rms(x) * weight, row by row (n_rows rows of n floats).
Status rmsnorm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t n, float eps);
// The KV cache's element types the kernels read and write (a.kv_dtype): F16, I8 (int8 with an f32
// scale per position: --kv-cache-dtype int8), F8_E4M3 and F8_E5M2 (FP8 codes in INT8's layout:
// --kv-cache-dtype fp8, fp8_e4m3, fp8_e5m2) and Q4_0 (4-bit codes with an f16 scale per position and
// group of 32 dimensions: --kv-cache-dtype q4_0; block_size and head_dim even) -- the CPU's layouts
// (gpu/kv_tile.cuh), so a cache written by either reads the same on both.
inline constexpr DType kKvCacheTypes[] = {DType::F16, DType::I8, DType::F8_E4M3, DType::F8_E5M2, DType::Q4_0};
inline bool kv_cache_supports(DType t) {
  for (DType k : kKvCacheTypes)
    if (k == t) return true;
  return false;
}
// Decode attention over a paged KV cache in the CPU cache's tile layout (kernels/attention_abi.h:
// tile = block * n_head_kv + kv head, tile_bytes apart; K [head_dim][block_size] transposed, V
// [block_size][head_dim]), so the scheduler's block tables serve both. For each of n_tokens query
// tokens (q, out: n_head x head_dim floats each) and each query head: softmax(q.k * scale) over
// positions [0, n_ctx[t]) of its sequence (block_tables: max_blocks int32 per token), times V; with
// a window only the last `window` of them, with softcap > 0 scores softcap * tanh(s / softcap) (gemma2).
// Online softmax 32 positions at a time, one warp per query head. head_dim <= 256; attention
// sinks (n_head logits) join the softmax's denominator only, as kernels/attention_abi.h sink_norm.
// Split-K (flash-decoding): with few (token, KV head) pairs to spread over the GPU and long contexts,
// each pair's positions are cut into n_splits ranges computed by separate CTAs, whose partial softmax
// states (max, sum, unnormalized output) go to `partial` and a second kernel merges them. The ranges
// are cut on the device from each token's own n_ctx, so a graph captured with a bound max_ctx serves
// every shorter context.
// With a.tiles (prompt chunks: flash-attention's tiling) a CTA per (tile, KV head) stages 32 positions
// of K and V at a time in shared memory and every (token, query head) pair of the tile takes them from
// there with its own causal limit and window; no split-K then. On tensor cores when
// attention_prefill_on_tensor_cores (attention_tc.cu: Q and the softmax weights in F16), else with
// scalar FMAs and an online softmax per pair. The staged K and V are F16 (INT8 and Q4 caches'
// elements dequantized there, rounded to F16: far below their own quantization's error); decode reads
// the cache in FP32.
Status paged_attention_decode(const GpuAttnArgs& a);
// Prefill tiles on tensor cores (attention_tc.cu): head_dim up to 128 and at most 64 query heads per KV
// head; 64 query rows a tile.
inline bool attention_prefill_on_tensor_cores(int64_t n_head, int64_t n_head_kv, int64_t head_dim) {
  const int64_t g = n_head_kv > 0 ? n_head / n_head_kv : 0;
  return g >= 1 && g <= 64 && head_dim >= 1 && head_dim <= 128;
}
// Tokens per prefill tile: on tensor cores 64 / (query heads per KV head), so the tile's (token, query
// head) pairs fill 64 rows; else (scalar tiles) they fit 4 warps of 8 pairs each.
inline int64_t attention_tile_tokens(int64_t n_head, int64_t n_head_kv, int64_t head_dim) {
  const int64_t g = n_head_kv > 0 ? n_head / n_head_kv : 1;
  if (attention_prefill_on_tensor_cores(n_head, n_head_kv, head_dim)) return 64 / g;
  const int64_t t = g > 0 ? 32 / g : 1;
  return t < 1 ? 1 : t > 8 ? 8 : t;
}
// Partial scratch, in floats, for n_tokens x n_head query heads in `splits` splits; and the most any
// call with the automatic split count needs (it keeps tokens x KV heads x splits <= 1024 CTAs).
inline int64_t attention_partial_floats(int64_t n_tokens, int64_t n_head, int64_t head_dim, int64_t splits) {
  return n_tokens * n_head * splits * (head_dim + 2);
}
inline int64_t attention_partial_capacity(int64_t n_head, int64_t n_head_kv, int64_t head_dim) {
  return 1024 * (n_head / n_head_kv) * (head_dim + 2);
}
// The split count paged_attention_decode uses for these arguments (1: one pass). Automatic: split
// only when the (token, KV head) CTAs are too few to fill a GPU (fewer than 128: a decode step of a
// few sequences) and contexts are long -- a split per 512 positions of max_ctx, at most 32, and at
// most 1024 CTAs in all; never more than the partial scratch holds (none: never split).
inline int64_t attention_splits(const GpuAttnArgs& a) {
  int64_t s = a.n_splits;
  if (s <= 0) {
    const int64_t ctas = a.n_tokens * a.n_head_kv;
    s = ctas >= 128 ? 1 : (a.max_ctx + 511) / 512;
    if (s > 32) s = 32;
    if (ctas > 0 && s * ctas > 1024) s = 1024 / ctas;
  }
  if (s < 1) s = 1;
  if (s > 1 && (!a.partial || attention_partial_floats(a.n_tokens, a.n_head, a.head_dim, s) > a.partial_floats)) s = 1;
  return s;
}
// g = silu(g) * u elementwise (SwiGLU), n floats.
Status silu_mul(float* g, const float* u, int64_t n);
// g = gelu_tanh(g) * u elementwise (GeGLU: gemma), n floats.
Status gelu_mul(float* g, const float* u, int64_t n);
// x = cap * tanh(x / cap), n floats (gemma's final logits).
Status softcap(float* x, int64_t n, float cap);
// out[r] = the index of row r's largest value (the first on ties, NaNs skipped; rows of n floats):
// greedy sampling on the device, so a step downloads one id per row instead of its logits.
Status argmax_rows(const float* x, int64_t n_rows, int64_t n, int32_t* out);
// y[i] += scale * x[i], n floats (scale 1: the residual add; granite's residual_scale otherwise).
Status add(float* y, const float* x, int64_t n, float scale);
// x[i] *= s, n floats (granite's logits divided by its logit_scale).
Status scale(float* x, int64_t n, float s);
// Row t of q (n_tokens rows of `width` floats) *= 1 + scale * ln(floor(pos[t] / floor_len) + 1): mistral3's
// (Llama 4's) attention temperature, the queries' factor at their positions.
Status attn_temperature(float* q, const int32_t* pos, int64_t n_tokens, int64_t width, float scale, int64_t floor_len);
// Row r of y (n_rows rows of n floats) += b (n floats): a bias on every token.
Status add_rows(float* y, const float* b, int64_t n_rows, int64_t n);
// Row p of y += row ids[p] of b (rows of n floats): each (token, expert) pair's expert bias.
Status add_rows_id(float* y, const float* b, const int32_t* ids, int64_t n_rows, int64_t n);
// Row rows[p] of y (rows of n floats) += scale * row p of u, for p < n_rows; the rows distinct (LoRA's
// deltas back into the rows of their adapter's sequences).
Status scatter_add(float* y, const float* u, const int32_t* rows, int64_t n_rows, int64_t n, float scale);
// gpt-oss's clamped SwiGLU, biases already added: g = min(g, 7); g = g * sigmoid(1.702 g) *
// (clamp(u, -7, 7) + 1), n floats (model/moe.cpp swiglu_oai_rows).
Status swiglu_oai(float* g, const float* u, int64_t n);
// RoPE in place on n_tokens x n_heads heads of head_dim floats (token t's heads contiguous), the
// first n_rot dimensions of each head, with the per-token tables cos/sin (n_tokens x n_rot/2, any
// position scaling and magnitude gain already in them, as the CPU forward computes them). Pairs
// (i, i + n_rot/2) when neox, else (2i, 2i + 1); as kernels/ops.h rope_heads_cs.
Status rope(const GpuRopeArgs& a);
// Writes each token's K and V (n_tokens x n_head_kv*head_dim floats) into the paged tiles at its
// position (pos[t]) through its block table (block_tables: max_blocks int32 per token), in the layout
// paged_attention_decode reads (kernels/attention_abi.h), as a.kv_dtype: F16, or quantized with the
// CPU's scales and rounding (kernels/attention.cpp paged_kv_store), byte for byte.
Status kv_store(const GpuKvStoreArgs& a);
// Waits for the work queued so far; an error names a kernel that failed.
Status synchronize();

}  // namespace tmill::gpu::inline TM_GPU_ABI
