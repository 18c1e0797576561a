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
// memory as F16, every thread of the CTA taking its share: K as [dimension][position] (k[d * ldk + j]:
// consecutive threads read consecutive positions of the cache's [dimension][position] tiles), V as
// [position][dimension] (v[j * ldv + d]: consecutive dimensions). INT8 and Q4 elements dequantized
// (gpu/kv_tile.cuh), then rounded to F16. Zeros past `end` and for dimensions head_dim .. dims - 1 (a
// tensor-core kernel's padding). The callers' barriers come before and after.
template <DType T>
__device__ __forceinline__ void stage_k_chunk_of(const GpuAttnArgs& a, const int32_t* table, int64_t h, int64_t p0,
                                                 int64_t end, int64_t dims, __half* k, int64_t ldk) {
  const int64_t hd = a.head_dim, bs = a.block_size;
  const size_t tile_bytes = KvTile<T>::bytes(hd, bs);
  for (int64_t e = threadIdx.x; e < 32 * dims; e += blockDim.x) {
    const int64_t j = e % 32, d = e / 32, p = p0 + j;
    float kv = 0.0f;
    if (p < end && d < hd) {
      const int64_t tl = static_cast<int64_t>(table[p / bs]) * a.n_head_kv + h;
      kv = KvTile<T>::k(a.k_tiles + tl * tile_bytes, hd, bs, d, p % bs);
    }
    k[d * ldk + j] = __float2half_rn(kv);
  }
}
template <DType T>
__device__ __forceinline__ void stage_v_chunk_of(const GpuAttnArgs& a, const int32_t* table, int64_t h, int64_t p0,
                                                 int64_t end, int64_t dims, __half* v, int64_t ldv) {
  const int64_t hd = a.head_dim, bs = a.block_size;
  const size_t tile_bytes = KvTile<T>::bytes(hd, bs);
  for (int64_t e = threadIdx.x; e < 32 * dims; e += blockDim.x) {
    const int64_t j = e / dims, d = e % dims, p = p0 + j;
    float vv = 0.0f;
    if (p < end && d < hd) {
      const int64_t tl = static_cast<int64_t>(table[p / bs]) * a.n_head_kv + h;
      vv = KvTile<T>::v(a.v_tiles + tl * tile_bytes, hd, bs, p % bs, d);
    }
    v[j * ldv + d] = __float2half_rn(vv);
  }
}
__device__ __forceinline__ void stage_k_chunk(const GpuAttnArgs& a, const int32_t* table, int64_t h, int64_t p0,
                                              int64_t end, int64_t dims, __half* k, int64_t ldk) {
  switch (a.kv_dtype) {  // the same for the whole launch
    case DType::I8: stage_k_chunk_of<DType::I8>(a, table, h, p0, end, dims, k, ldk); break;
    case DType::Q4_0: stage_k_chunk_of<DType::Q4_0>(a, table, h, p0, end, dims, k, ldk); break;
    default: stage_k_chunk_of<DType::F16>(a, table, h, p0, end, dims, k, ldk); break;
  }
}
__device__ __forceinline__ void stage_v_chunk(const GpuAttnArgs& a, const int32_t* table, int64_t h, int64_t p0,
                                              int64_t end, int64_t dims, __half* v, int64_t ldv) {
  switch (a.kv_dtype) {
    case DType::I8: stage_v_chunk_of<DType::I8>(a, table, h, p0, end, dims, v, ldv); break;
    case DType::Q4_0: stage_v_chunk_of<DType::Q4_0>(a, table, h, p0, end, dims, v, ldv); break;
    default: stage_v_chunk_of<DType::F16>(a, table, h, p0, end, dims, v, ldv); break;
  }
}

// The prefill tiles on tensor cores (attention_tc.cu): a.tiles built with attention_tile_tokens for a
// model where attention_prefill_on_tensor_cores holds.
Status paged_attention_prefill_tc(const GpuAttnArgs& a);

}  // namespace tmill::gpu::inline TM_GPU_ABI
