// Engine options shared by the commands that run the engine (generate, bench engine, serve, eval).
#pragma once

#include <CLI/CLI.hpp>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "convert/model_source.h"
#include "core/result.h"
#include "engine/engine.h"

namespace tmill::cli {

// The flags' values. Their defaults are EngineConfig's (src/api/config.h), the only place engine
// defaults are written.
struct EngineCli {
  std::string model;  // a GGUF file, a split GGUF's shard, or a Hugging Face folder (convert/model_source.h)
  std::string dtype = "auto";   // --dtype: the type weights are converted to at load
  std::string quantization;     // --quantization: a `tokenmill quantize` type the weights get at load
  uint64_t memory_limit_bytes = 0;  // not a flag: serve's --memory-limit for its one model
  int threads = EngineConfig{}.threads;
  std::string device = EngineConfig{}.device;  // --device
  double gpu_memory_utilization = 0;  // add_gpu_memory_option's; serve's own --gpu-memory-utilization (0: default)
  bool enforce_eager = EngineConfig{}.enforce_eager;  // --enforce-eager
  bool async_scheduling = false;     // --async-scheduling (the default: EngineConfig::async_scheduling)
  bool no_async_scheduling = !EngineConfig{}.async_scheduling;  // --no-async-scheduling
  std::string kv_cache_memory;  // "2GiB"; empty = automatic
  int64_t kv_cache_tokens = 0;  // not a flag: commands that size the cache in tokens (bench engine)
  std::string kv_cache_dtype = EngineConfig{}.kv_cache_dtype;
  int32_t block_size = EngineConfig{}.block_size;
  int32_t max_num_seqs = EngineConfig{}.max_num_seqs;
  int32_t max_num_batched_tokens = EngineConfig{}.max_num_batched_tokens;
  int32_t max_model_len = EngineConfig{}.max_model_len;
  bool no_prefix_caching = !EngineConfig{}.enable_prefix_caching;
  std::string policy = "fcfs";  // EngineConfig::policy's default, spelled as the flag takes it
  int32_t long_prefill_token_threshold = EngineConfig{}.long_prefill_token_threshold;
  bool context_shift = EngineConfig{}.context_shift;
  int32_t context_shift_keep = EngineConfig{}.context_shift_keep;
  double debug_step_delay_ms = 0;  // hidden testing aid (EngineConfig::debug_step_delay_s)
  // LoRA adapters (add_lora_options): "[NAME=]FILE[:SCALE]" and llama.cpp's "--lora-scaled FILE SCALE"
  std::vector<std::string> lora;
  std::vector<std::pair<std::string, std::string>> lora_scaled;
  int32_t max_loras = EngineConfig{}.max_loras;
  int32_t max_lora_rank = 0;           // --max-lora-rank (vLLM's): 0 = any
  std::optional<uint64_t> seed;        // not a flag here: serve's vLLM --seed (EngineConfig::seed)
  std::string speculative_config;  // --speculative-config JSON (vLLM's keys); empty: off
  std::string speculative_model;     // --speculative-model / --model-draft FILE: a draft model (draft_model)
  int32_t num_speculative_tokens = 0;  // --num-speculative-tokens / --draft-max N: k (0: the config's, else 4)
  std::string pooling = EngineConfig{}.pooling;  // --pooling: "" = the file's
};

// One adapter of the command line: loaded under `name`, applied with `scale` where the command
// applies adapters to its requests.
struct CliLora {
  std::string name;  // NAME= or the file name without ".gguf"
  std::string path;
  float scale = 1.0f;
};

// Adds --gpu-memory-utilization (generate; serve has its own, which also sizes the CPU's KV cache;
// bench engine sizes its KV cache in tokens, which would win over it).
void add_gpu_memory_option(CLI::App& app, EngineCli& o);
// --gpu-memory-utilization's range, (0, 1] (serve checks it with its own flag too).
Status check_gpu_memory_utilization(double share);

// Adds --model --dtype --quantization --threads --device --enforce-eager --[no-]async-scheduling --kv-cache-memory --kv-cache-dtype --block-size --max-num-seqs
// --max-num-batched-tokens --max-model-len --no-prefix-caching --scheduling-policy
// --long-prefill-token-threshold --context-shift --context-shift-keep --speculative-config --speculative-model
// --num-speculative-tokens --pooling.
void add_engine_options(CLI::App& app, EngineCli& o);
// Adds --lora [NAME=]FILE[:SCALE] (repeatable), --lora-scaled FILE SCALE (llama.cpp's spelling)
// and --max-loras: the adapters go into EngineConfig::loras.
void add_lora_options(CLI::App& app, EngineCli& o);
// The adapters of --lora / --lora-scaled, in order. Errors: a scale that is not a number.
Result<std::vector<CliLora>> lora_flags(const EngineCli& o);
// --dtype, --quantization and the threads, for convert/model_source.h.
ModelLoadOptions load_options(const EngineCli& o);
// Fills an EngineConfig (default model when --model is absent).
Result<EngineConfig> engine_config(const EngineCli& o);
// Creates the engine and logs the model, memory plan and load time (also returned in *load_seconds).
// A Hugging Face folder or split GGUF is made into one GGUF in memory first, converted (--dtype) or
// quantized (--quantization) when asked, with a progress display; the load time includes it.
Result<std::unique_ptr<Engine>> create_engine(const EngineCli& o, double* load_seconds = nullptr);

}  // namespace tmill::cli
