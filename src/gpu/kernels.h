// CUDA kernels of the GPU backend, host-callable (defined in gpu/*.cu; built with -DTM_CUDA=ON only,
// else each returns an error). All pointers are device memory (gpu/device.h); calls are asynchronous
// on the default stream, synchronize() waits and reports a kernel's failure. The CPU kernels
// (kernels/matmul.h matmul_reference) are their oracle: tests/unit/gpu.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/result.h"

namespace tmill::gpu {

// True for the weight types gemv() reads: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K.
bool gemv_supports(DType t);
// Decode's matrix-vector product, dequantizing in registers: y[r] = dot(row r of W, x) for the
// `rows` rows of W (row-major in its file type, row_bytes apart), x of `cols` floats. One warp per
// row; each lane takes whole 32-element blocks (256 for the K-quants) or strided elements.
Status gemv(DType type, const void* w, int64_t rows, int64_t cols, size_t row_bytes, const float* x, float* y);
// y = x / rms(x) * weight, row by row (n_rows rows of n floats).
Status rmsnorm(const float* x, const float* weight, float* y, int64_t n_rows, int64_t n, float eps);
// Decode attention over a paged KV cache in the CPU cache's F16 tile layout (kernels/attention_abi.h:
// tile = block * n_head_kv + kv head, tile_bytes apart; K [head_dim][block_size] transposed, V
// [block_size][head_dim]), so the scheduler's block tables serve both. For each of n_tokens query
// tokens (q, out: n_head x head_dim floats each) and each query head: softmax(q.k * scale) over
// positions [0, n_ctx[t]) of its sequence (block_tables: max_blocks int32 per token), times V. Online
// softmax 32 positions at a time, one warp per query head. F16 KV, head_dim <= 256, no sliding
// window / soft-cap / sinks yet.
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
};
Status paged_attention_decode(const GpuAttnArgs& a);
// g = silu(g) * u elementwise (SwiGLU), n floats.
Status silu_mul(float* g, const float* u, int64_t n);
// Waits for the work queued so far; an error names a kernel that failed.
Status synchronize();

}  // namespace tmill::gpu
