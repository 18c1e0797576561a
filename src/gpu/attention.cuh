// Pieces shared by the attention kernels (attention.cu: decode and the scalar prefill tiles;
// attention_tc.cu: prefill tiles on tensor cores). Included by .cu files only.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "gpu/kernels.h"
#include "gpu/kv_tile.cuh"

namespace tmill::gpu::inline TM_GPU_ABI {

// 1 / (l + exp(sink - m)) for weights exp(s - m) summing to l, without overflow when the sink exceeds
// every score: kernels/attention_abi.h sink_norm.
__device__ __forceinline__ float sink_norm(float m, float l, float sink) {
  if (sink > m) {
    const float c = __expf(m - sink);
    return c / (l * c + 1.0f);
  }
  return 1.0f / (l + __expf(sink - m));
}

// A prefill tile's 32 positions [p0, p0 + 32) of KV head h (table: its sequence's blocks) into shared
// memory as F16, every thread of the CTA taking its share: keys (kKeys) as [dimension][position]
// (out[d * ld + j]: consecutive threads read consecutive positions of the cache's [dimension][position]
// tiles), values as [position][dimension] (out[j * ld + d]: consecutive dimensions). INT8, FP8 and Q4
// elements dequantized (gpu/kv_tile.cuh), then rounded to F16. Zeros past `end` and for dimensions
// head_dim .. dims - 1 (a tensor-core kernel's padding). The callers' barriers come before and after.
inline constexpr bool kKeys = true, kValues = false;
template <bool Keys, DType T>
__device__ __forceinline__ void stage_chunk_of(const GpuAttnArgs& a, const int32_t* table, int64_t h, int64_t p0,
                                               int64_t end, int64_t dims, __half* out, int64_t ld) {
  const int64_t hd = a.head_dim, bs = a.block_size;
  const size_t tile_bytes = KvTile<T>::bytes(hd, bs);
  const uint8_t* tiles = Keys ? a.k_tiles : a.v_tiles;
  for (int64_t e = threadIdx.x; e < 32 * dims; e += blockDim.x) {
    const int64_t j = Keys ? e % 32 : e / dims, d = Keys ? e / 32 : e % dims, p = p0 + j;
    float x = 0.0f;
    if (p < end && d < hd) {
      const uint8_t* tile = tiles + (static_cast<int64_t>(table[p / bs]) * a.n_head_kv + h) * tile_bytes;
      x = Keys ? KvTile<T>::k(tile, hd, bs, d, p % bs) : KvTile<T>::v(tile, hd, bs, p % bs, d);
    }
    out[Keys ? d * ld + j : j * ld + d] = __float2half_rn(x);
  }
}
template <bool Keys>
__device__ __forceinline__ void stage_chunk(const GpuAttnArgs& a, const int32_t* table, int64_t h, int64_t p0,
                                            int64_t end, int64_t dims, __half* out, int64_t ld) {
  switch (a.kv_dtype) {  // the same for the whole launch
    case DType::I8: stage_chunk_of<Keys, DType::I8>(a, table, h, p0, end, dims, out, ld); break;
    case DType::F8_E4M3: stage_chunk_of<Keys, DType::F8_E4M3>(a, table, h, p0, end, dims, out, ld); break;
    case DType::F8_E5M2: stage_chunk_of<Keys, DType::F8_E5M2>(a, table, h, p0, end, dims, out, ld); break;
    case DType::Q4_0: stage_chunk_of<Keys, DType::Q4_0>(a, table, h, p0, end, dims, out, ld); break;
    default: stage_chunk_of<Keys, DType::F16>(a, table, h, p0, end, dims, out, ld); break;
  }
}

// The prefill tiles on tensor cores (attention_tc.cu): a.tiles built with attention_tile_tokens for a
// model where attention_prefill_on_tensor_cores holds.
Status paged_attention_prefill_tc(const GpuAttnArgs& a);

}  // namespace tmill::gpu::inline TM_GPU_ABI
