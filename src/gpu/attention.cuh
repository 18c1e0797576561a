// Pieces shared by the attention kernels (attention.cu: decode and the scalar prefill tiles;
// attention_tc.cu: prefill tiles on tensor cores). Included by .cu files only.
#pragma once

#include <cuda_runtime.h>

#include "gpu/kernels.h"

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

// The prefill tiles on tensor cores (attention_tc.cu): a.tiles built with attention_tile_tokens for a
// model where attention_prefill_on_tensor_cores holds.
Status paged_attention_prefill_tc(const GpuAttnArgs& a);

}  // namespace tmill::gpu::inline TM_GPU_ABI
