// The engine's configuration: what `tokenmill serve`, `generate`, `bench engine` and `eval` set from
// their flags. The defaults written here are the only ones: the CLI shows them, the scheduler's own
// config starts from them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "api/lora.h"

namespace tmill {

enum class SchedulingPolicy : uint8_t { Fcfs, Priority };

namespace defaults {
inline constexpr int32_t kBlockSize = 16;               // tokens per KV block
inline constexpr int32_t kMaxNumSeqs = 64;              // sequences per step
inline constexpr int32_t kMaxNumBatchedTokens = 1024;   // token budget per step
inline constexpr int32_t kMaxLoras = 8;                 // LoRA adapters loaded at once
}  // namespace defaults

struct EngineConfig {
  std::string model_path;               // GGUF model file
  int threads = 0;                      // 0: all cores this process may use
  uint64_t kv_cache_bytes = 0;          // 0: automatic (see the memory plan)
  // > 0: weights (as prepared) + KV cache may take at most this: the automatic KV cache is capped at
  // it minus the weights; weights, or weights plus an explicit KV size, above it are a load error.
  uint64_t memory_limit_bytes = 0;
  int64_t kv_cache_tokens = 0;          // > 0: a cache of this many tokens (whole blocks), not bytes
  std::string kv_cache_dtype = "auto";  // auto (f32 for f32 models, else f16), f32, f16, bf16, int8
  int32_t block_size = defaults::kBlockSize;
  int32_t max_num_seqs = defaults::kMaxNumSeqs;
  int32_t max_num_batched_tokens = defaults::kMaxNumBatchedTokens;
  int32_t max_model_len = 0;            // 0: trained context, shrunk to what the KV cache holds
  bool enable_prefix_caching = true;
  SchedulingPolicy policy = SchedulingPolicy::Fcfs;
  int32_t long_prefill_token_threshold = 0;  // > 0: most prompt tokens one request computes per step
  // LoRA adapters: loaded at create (more at run time with Engine::load_lora), at most max_loras at
  // once; every loaded adapter can be used by any request of any batch.
  std::vector<LoraSpec> loras;
  int32_t max_loras = defaults::kMaxLoras;
  // Testing aid: the engine thread (start()) sleeps this long after every step, so tests can hold a
  // request in flight for a known time on any machine. 0 in production.
  double debug_step_delay_s = 0;
};

}  // namespace tmill
