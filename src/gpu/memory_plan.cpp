#include "gpu/memory_plan.h"

#include <fmt/format.h>

#include <cmath>

#include "core/strings.h"

namespace tmill::gpu {

Result<GpuMemoryPlan> plan_gpu_memory(const GpuMemoryInputs& in) {
  if (!(in.utilization > 0 && in.utilization <= 1))
    return Error{fmt::format("--gpu-memory-utilization must be in (0, 1], got {}", in.utilization)};
  if (in.total_bytes == 0) return Error{"the GPU reports no memory"};
  if (in.kv_block_bytes == 0 || in.block_size <= 0) return Error{"KV block size must be positive"};
  GpuMemoryPlan p;
  if (in.kv_bytes > 0) {  // an explicit KV cache size: the budget is what it and the rest take
    p.budget_bytes = in.weight_bytes + in.activation_bytes + in.kv_bytes;
    if (p.budget_bytes > in.free_bytes)
      return Error{fmt::format(
          "out of GPU memory: the weights ({}), the activations of the largest step ({}) and --kv-cache-memory {} "
          "need {}, but the GPU has {} free; lower --kv-cache-memory to at most {}",
          format_bytes(in.weight_bytes), format_bytes(in.activation_bytes), format_bytes(in.kv_bytes),
          format_bytes(p.budget_bytes), format_bytes(in.free_bytes),
          format_bytes(in.free_bytes > in.weight_bytes + in.activation_bytes
                           ? in.free_bytes - in.weight_bytes - in.activation_bytes
                           : 0))};
  } else {
    p.budget_bytes = static_cast<uint64_t>(std::floor(in.utilization * static_cast<double>(in.total_bytes)));
  }
  // The budget is a share of the whole device (vLLM): memory another process holds is not ours to take.
  const uint64_t used_by_others = in.total_bytes > in.free_bytes ? in.total_bytes - in.free_bytes : 0;
  if (in.kv_bytes == 0 && used_by_others > 0 && p.budget_bytes > in.free_bytes)
    return Error{fmt::format(
        "--gpu-memory-utilization {} asks for {} of the GPU's {}, but only {} is free ({} is held by other "
        "processes); lower it to at most {:.2f} or free the GPU",
        in.utilization, format_bytes(p.budget_bytes), format_bytes(in.total_bytes), format_bytes(in.free_bytes),
        format_bytes(used_by_others),
        // rounded down: the value printed must fit
        std::floor(100.0 * static_cast<double>(in.free_bytes) / static_cast<double>(in.total_bytes)) / 100.0)};
  const uint64_t fixed = in.weight_bytes + in.activation_bytes;
  if (fixed >= p.budget_bytes)
    return Error{fmt::format(
        "out of GPU memory: the weights ({}) and the activations of the largest step ({}) need {}, more than "
        "--gpu-memory-utilization {} of {} ({}), leaving nothing for the KV cache; raise "
        "--gpu-memory-utilization, lower --max-num-batched-tokens, or use a smaller quantization",
        format_bytes(in.weight_bytes), format_bytes(in.activation_bytes), format_bytes(fixed), in.utilization,
        format_bytes(in.total_bytes), format_bytes(p.budget_bytes))};
  p.kv_blocks = static_cast<int64_t>((in.kv_bytes > 0 ? in.kv_bytes : p.budget_bytes - fixed) / in.kv_block_bytes);
  p.kv_tokens = p.kv_blocks * in.block_size;
  p.kv_bytes = static_cast<uint64_t>(p.kv_blocks) * in.kv_block_bytes;
  if (p.kv_blocks == 0)
    return Error{fmt::format(
        "out of GPU memory: {} is left for the KV cache after the weights and activations, less than one block "
        "({}); raise --gpu-memory-utilization or lower --max-num-batched-tokens",
        format_bytes(p.budget_bytes - fixed), format_bytes(in.kv_block_bytes))};
  if (in.max_model_len > 0) {
    if (in.max_model_len > p.kv_tokens)
      return Error{fmt::format(
          "out of GPU memory: --max-model-len {} needs {} tokens of KV cache, but {} holds {} (the largest "
          "context that fits); use --max-model-len {} or raise --gpu-memory-utilization",
          in.max_model_len, in.max_model_len, format_bytes(p.kv_bytes), p.kv_tokens, p.kv_tokens)};
    p.max_model_len = in.max_model_len;
  } else {
    p.max_model_len = in.trained_ctx > 0 ? in.trained_ctx : p.kv_tokens;
    if (p.max_model_len > p.kv_tokens) {
      p.max_model_len = p.kv_tokens;
      p.lowered = true;
    }
  }
  p.summary = fmt::format(
      "GPU memory: {} budget ({}): weights {}, activations {}, KV cache {} ({} blocks of {} tokens, {} "
      "tokens); max_model_len {}{}",
      format_bytes(p.budget_bytes),
      in.kv_bytes > 0 ? fmt::format("--kv-cache-memory of {}", format_bytes(in.total_bytes))
                      : fmt::format("{} x {}", in.utilization, format_bytes(in.total_bytes)),
      format_bytes(in.weight_bytes),
      format_bytes(in.activation_bytes), format_bytes(p.kv_bytes), p.kv_blocks, in.block_size, p.kv_tokens,
      p.max_model_len, p.lowered ? fmt::format(" (lowered from the trained {} to fit)", in.trained_ctx) : "");
  return p;
}

}  // namespace tmill::gpu
