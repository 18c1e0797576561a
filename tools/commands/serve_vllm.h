// vLLM's command line on `tokenmill serve` (`vllm serve MODEL --tensor-parallel-size 1 ...`):
// accepted as is, mapped onto tokenmill's options, or refused naming the reason (docs/server.md,
// "vLLM's flags"). Unknown flags stay errors.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

#include "core/result.h"
#include "engine_options.h"
#include "server/server.h"

namespace tmill::cli {

struct VllmCli {
  std::string model;  // positional MODEL
  int tensor_parallel = 1, pipeline_parallel = 1;
  bool enable_prefix_caching = false, no_enable_prefix_caching = false;
  bool enable_chunked_prefill = false, no_enable_chunked_prefill = false;
  bool disable_log_requests = false, enable_log_requests = false;
  bool calculate_kv_scales = false;  // fp8 KV scales: always computed here, per token and head
  // accepted, nothing to do here (docs/server.md says why for each)
  bool trust_remote_code = false, enable_auto_tool_choice = false, disable_log_stats = false, enable_lora = false;
  bool disable_custom_all_reduce = false, disable_uvicorn_access_log = false, disable_fastapi_docs = false;
  bool enable_request_id_headers = false;
  int64_t max_log_len = 0, max_seq_len_to_capture = 0;
  std::string distributed_executor_backend, download_dir, guided_decoding_backend;
  // mapped or checked
  int data_parallel = 1;
  double cpu_offload_gb = 0;
  std::string seed, kv_cache_memory_bytes, load_format, tokenizer, tokenizer_mode, override_generation_config;
  double gpu_memory_utilization = 0;  // 0: not given
  std::string log_level, uvicorn_log_level;  // --log-level / vLLM's --uvicorn-log-level
  // more of vLLM's: accepted with what they mean here (a log line each), mapped, or refused
  bool enable_prompt_tokens_details = false, enable_reasoning = false, enable_server_load_tracking = false;
  bool enable_expert_parallel = false, fully_sharded_loras = false, enable_log_outputs = false;
  bool skip_mm_profiling = false, disable_mm_preprocessor_cache = false, enable_force_include_usage = false;
  bool return_tokens_as_token_ids = false;
  std::string root_path, compilation_config, model_impl, lora_dtype, otlp_traces_endpoint, structured_outputs_config;
  std::string limit_mm_per_prompt, mm_processor_kwargs, allowed_local_media_path, mm_encoder_tp_mode;
  std::string hf_overrides, config_format, chat_template_content_format, response_role;
  std::string middleware, logits_processors, long_lora_scaling_factors;
  int64_t max_num_partial_prefills = 0, max_long_partial_prefills = 0, tokenizer_pool_size = 0;
};

void add_vllm_options(CLI::App& app, VllmCli& v);

// Maps the flags onto the engine and server options; an error names the flag and why. With several
// models (called after the memory split) the flags about the one model (MODEL, --load-format,
// --tokenizer) are configure_models' business and --gpu-memory-utilization is refused there; the rest
// apply to every model alike.
Status apply_vllm_flags(VllmCli& v, EngineCli& engine, server::ServerOptions& server, bool several);

}  // namespace tmill::cli
