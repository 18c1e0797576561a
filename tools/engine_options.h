// Engine options shared by the commands that run the engine (generate, bench engine, serve, eval).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "core/result.h"
#include "engine/engine.h"

namespace tmill::cli {

struct EngineCli {
  std::string model;
  int threads = 0;
  std::string kv_cache_memory;  // "2GiB"; empty = automatic
  int64_t kv_cache_tokens = 0;  // not a flag: commands that size the cache in tokens (bench engine)
  std::string kv_cache_dtype = "auto";
  int32_t block_size = defaults::kBlockSize;
  int32_t max_num_seqs = defaults::kMaxNumSeqs;
  int32_t max_num_batched_tokens = defaults::kMaxNumBatchedTokens;
  int32_t max_model_len = 0;
  bool no_prefix_caching = false;
  std::string policy = "fcfs";
  int32_t long_prefill_token_threshold = 0;
  double debug_step_delay_ms = 0;  // hidden testing aid (EngineConfig::debug_step_delay_s)
};

// Adds --model --threads --kv-cache-memory --kv-cache-dtype --block-size --max-num-seqs
// --max-num-batched-tokens --max-model-len --no-prefix-caching --scheduling-policy
// --long-prefill-token-threshold.
void add_engine_options(CLI::App& app, EngineCli& o);
// Fills an EngineConfig (default model when --model is absent).
Result<EngineConfig> engine_config(const EngineCli& o);
// Creates the engine and logs the model, memory plan and load time (also returned in *load_seconds).
Result<std::unique_ptr<Engine>> create_engine(const EngineCli& o, double* load_seconds = nullptr);

}  // namespace tmill::cli
