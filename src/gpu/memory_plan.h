// The CUDA backend's memory plan (issue "CUDA backend"), host-side and testable without a GPU:
// vLLM's --gpu-memory-utilization semantics. The budget is utilization x the device's total memory;
// out of it come the weights, the activation workspace of the largest step, and the KV cache, which
// gets everything left, in whole blocks. A plan that does not fit is a clear error that says what
// to change, with the largest context that would fit.
#pragma once

#include <cstdint>
#include <string>

#include "core/result.h"

namespace tmill::gpu {

struct GpuMemoryInputs {
  uint64_t total_bytes = 0;       // the device's memory (cudaMemGetInfo's total)
  uint64_t free_bytes = 0;        // free before tokenmill allocates (other processes hold the rest)
  double utilization = 0.9;       // --gpu-memory-utilization, in (0, 1]
  uint64_t weight_bytes = 0;      // the weights as the kernels will hold them
  uint64_t activation_bytes = 0;  // workspace of the largest step (max_num_batched_tokens)
  uint64_t kv_block_bytes = 0;    // one KV block, every layer, K and V
  int64_t block_size = 16;        // tokens per KV block
  int64_t trained_ctx = 0;        // the model's context length
  int64_t max_model_len = 0;      // --max-model-len; 0: the trained context (lowered to what fits)
  uint64_t kv_bytes = 0;          // > 0: exactly this KV cache (--kv-cache-memory, vLLM's kv_cache_memory_bytes),
                                  // utilization then unused: weights + activations + it must fit the free memory
};

struct GpuMemoryPlan {
  uint64_t budget_bytes = 0;   // utilization x total
  uint64_t kv_bytes = 0;       // kv_blocks x kv_block_bytes
  int64_t kv_blocks = 0;
  int64_t kv_tokens = 0;       // kv_blocks x block_size
  int64_t max_model_len = 0;   // as given, or the trained context lowered to kv_tokens
  bool lowered = false;        // max_model_len was lowered to fit
  std::string summary;         // one line for the start-up log
};

Result<GpuMemoryPlan> plan_gpu_memory(const GpuMemoryInputs& in);

}  // namespace tmill::gpu
