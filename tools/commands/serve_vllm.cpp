#include "serve_vllm.h"

#include <charconv>
#include <filesystem>

#include <fmt/format.h>

#include "cli_common.h"
#include "core/log.h"
#include "core/memory.h"
#include "server/generation_config.h"

namespace tmill::cli {

void add_vllm_options(CLI::App& app, VllmCli& v) {
  app.add_option("model", v.model, "the model, as `vllm serve MODEL` takes it (same as --model)");
  // vLLM's -tp / -pp: two-letter short names, which CLI11 lacks; main() spells them out.
  app.add_option("--tensor-parallel-size", v.tensor_parallel, "vLLM (-tp): 1 (one device)");
  app.add_option("--pipeline-parallel-size", v.pipeline_parallel, "vLLM (-pp): 1 (one device)");
  app.add_flag("--enable-prefix-caching", v.enable_prefix_caching, "vLLM: prefix caching (the default)");
  app.add_flag("--no-enable-prefix-caching", v.no_enable_prefix_caching, "vLLM: = --no-prefix-caching");
  app.add_flag("--enable-chunked-prefill", v.enable_chunked_prefill, "vLLM: chunked prefill (always on)");
  app.add_flag("--no-enable-chunked-prefill", v.no_enable_chunked_prefill, "vLLM: refused (always on)");
  app.add_flag("--disable-log-requests", v.disable_log_requests, "vLLM: no access log (the default)");
  app.add_flag("--enable-log-requests", v.enable_log_requests, "vLLM: = --log-requests");
  app.add_flag("--trust-remote-code", v.trust_remote_code,
               "vLLM: accepted (no model code runs: GGUF and safetensors are data)");
  app.add_flag("--enable-auto-tool-choice", v.enable_auto_tool_choice,
               "vLLM: accepted (tool_choice \"auto\" is always served)");
  app.add_flag("--disable-log-stats", v.disable_log_stats, "vLLM: accepted (no periodic stats lines; /metrics)");
  app.add_option("--max-log-len", v.max_log_len, "vLLM: accepted (prompts are never logged)");
  app.add_flag("--enable-lora", v.enable_lora, "vLLM: accepted (adapters load with --lora-modules or at run time)");
  app.add_flag("--disable-custom-all-reduce", v.disable_custom_all_reduce, "vLLM: accepted (one device)");
  app.add_option("--distributed-executor-backend", v.distributed_executor_backend,
                 "vLLM: accepted (one process, one device)");
  app.add_option("--download-dir", v.download_dir, "vLLM: accepted (nothing is downloaded: a local model)");
  app.add_option("--max-seq-len-to-capture", v.max_seq_len_to_capture,
                 "vLLM: accepted (CUDA graphs cover decode steps at every context length)");
  app.add_flag("--disable-uvicorn-access-log", v.disable_uvicorn_access_log,
               "vLLM: accepted (no access log unless --log-requests)");
  app.add_flag("--disable-fastapi-docs", v.disable_fastapi_docs, "vLLM: accepted (no /docs pages; --no-ui)");
  app.add_flag("--enable-request-id-headers", v.enable_request_id_headers,
               "vLLM: accepted (X-Request-Id is always returned)");
  app.add_option("--guided-decoding-backend", v.guided_decoding_backend,
                 "vLLM: accepted (tokenmill's own grammar engine serves structured output)");
  app.add_option("--data-parallel-size", v.data_parallel, "vLLM (-dp): 1 (one engine per model)");
  app.add_option("--cpu-offload-gb", v.cpu_offload_gb, "vLLM: 0 (weights are not offloaded)");
  app.add_option("--load-format", v.load_format, "vLLM: auto, gguf or safetensors (as the model is)");
  app.add_option("--tokenizer", v.tokenizer, "vLLM: the model's own path (its tokenizer is used)");
  app.add_option("--tokenizer-mode", v.tokenizer_mode, "vLLM: auto or hf");
  app.add_option("--kv-cache-memory-bytes", v.kv_cache_memory_bytes, "vLLM: = --kv-cache-memory");
  app.add_option("--seed", v.seed,
                 "vLLM: requests without a seed draw theirs from a generator seeded with this "
                 "(reproducible runs); default: each from the OS");
  app.add_option("--override-generation-config", v.override_generation_config,
                 "vLLM: JSON of sampling defaults (temperature, top_p, top_k, min_p, repetition_penalty, "
                 "max_new_tokens) over --generation-config's");
  app.add_flag("--calculate-kv-scales", v.calculate_kv_scales,
               "vLLM: with --kv-cache-dtype fp8 (scales per token and KV head, always computed)");
  app.add_option("--log-level", v.log_level,
                 "log lines shown: trace/debug, info (default), warning, error/critical");
  app.add_option("--uvicorn-log-level", v.uvicorn_log_level, "vLLM: = --log-level");
  // accepted: what each means here is logged at start (docs/server.md, "vLLM's flags")
  app.add_flag("--enable-prompt-tokens-details", v.enable_prompt_tokens_details,
               "vLLM: accepted (usage.prompt_tokens_details.cached_tokens is always given)");
  app.add_flag("--enable-reasoning", v.enable_reasoning, "vLLM: accepted (reasoning is parsed per --reasoning-parser)");
  app.add_flag("--enable-server-load-tracking", v.enable_server_load_tracking,
               "vLLM: accepted (the load is in /metrics: running and waiting requests)");
  app.add_flag("--enable-expert-parallel", v.enable_expert_parallel, "vLLM: accepted (one device)");
  app.add_flag("--fully-sharded-loras", v.fully_sharded_loras, "vLLM: accepted (one device)");
  app.add_flag("--enable-log-outputs", v.enable_log_outputs, "vLLM: accepted (outputs are never logged)");
  app.add_flag("--skip-mm-profiling", v.skip_mm_profiling, "vLLM: accepted (text models)");
  app.add_flag("--disable-mm-preprocessor-cache", v.disable_mm_preprocessor_cache, "vLLM: accepted (text models)");
  app.add_flag("--enable-force-include-usage", v.enable_force_include_usage,
               "vLLM: streams end with a usage chunk without stream_options.include_usage");
  app.add_flag("--return-tokens-as-token-ids", v.return_tokens_as_token_ids, "vLLM: refused (not supported)");
  app.add_option("--root-path", v.root_path, "vLLM: accepted (a proxy's path prefix; routes are served at /)");
  app.add_option("-O,--compilation-config", v.compilation_config, "vLLM: accepted (no torch.compile)");
  app.add_option("--model-impl", v.model_impl, "vLLM: auto, vllm or transformers (tokenmill's own)");
  app.add_option("--lora-dtype", v.lora_dtype, "vLLM: accepted (adapters compute in their file's type)");
  app.add_option("--otlp-traces-endpoint", v.otlp_traces_endpoint, "vLLM: accepted with a warning (no tracing)");
  app.add_option("--structured-outputs-config", v.structured_outputs_config,
                 "vLLM: accepted (tokenmill's own grammar engine serves structured output)");
  app.add_option("--limit-mm-per-prompt", v.limit_mm_per_prompt, "vLLM: accepted (text models: images are refused)");
  app.add_option("--mm-processor-kwargs", v.mm_processor_kwargs, "vLLM: accepted (text models)");
  app.add_option("--allowed-local-media-path", v.allowed_local_media_path, "vLLM: accepted (text models)");
  app.add_option("--mm-encoder-tp-mode", v.mm_encoder_tp_mode, "vLLM: accepted (text models)");
  app.add_option("--max-num-partial-prefills", v.max_num_partial_prefills,
                 "vLLM: accepted (prompts are chunked per --long-prefill-token-threshold)");
  app.add_option("--max-long-partial-prefills", v.max_long_partial_prefills,
                 "vLLM: accepted (prompts are chunked per --long-prefill-token-threshold)");
  app.add_option("--tokenizer-pool-size", v.tokenizer_pool_size, "vLLM: accepted (tokenizing runs on the request's thread)");
  app.add_option("--hf-overrides", v.hf_overrides, "vLLM: {} only (config.json is read as it is)");
  app.add_option("--config-format", v.config_format, "vLLM: auto or hf");
  app.add_option("--chat-template-content-format", v.chat_template_content_format,
                 "vLLM: auto or string (a message's text parts reach the template as one string)");
  app.add_option("--response-role", v.response_role, "vLLM: assistant");
  app.add_option("--middleware", v.middleware, "vLLM: refused (no Python middleware)");
  app.add_option("--logits-processors", v.logits_processors, "vLLM: refused (no Python logits processors)");
  app.add_option("--long-lora-scaling-factors", v.long_lora_scaling_factors, "vLLM: refused (no long-context LoRA)");
}

namespace {

// vLLM's flags that change nothing here: each given one is logged with why.
void log_accepted_vllm_flags(const VllmCli& v) {
  const std::pair<bool, const char*> flags[] = {
      {v.enable_prompt_tokens_details, "--enable-prompt-tokens-details: usage.prompt_tokens_details is always given"},
      {v.enable_reasoning, "--enable-reasoning: reasoning is separated per --reasoning-parser (auto by default)"},
      {v.enable_server_load_tracking,
       "--enable-server-load-tracking: the load is in /metrics (vllm:num_requests_running, vllm:num_requests_waiting)"},
      {v.enable_expert_parallel, "--enable-expert-parallel: one device, every expert on it"},
      {v.fully_sharded_loras, "--fully-sharded-loras: one device"},
      {v.enable_log_outputs, "--enable-log-outputs: outputs are never logged (--log-requests logs one line a request)"},
      {v.skip_mm_profiling || v.disable_mm_preprocessor_cache || !v.mm_processor_kwargs.empty() ||
           !v.allowed_local_media_path.empty() || !v.mm_encoder_tp_mode.empty() || !v.limit_mm_per_prompt.empty(),
       "multimodal flags (--limit-mm-per-prompt, --mm-*): the models are served as text models; image, audio and "
       "video parts are refused per request"},
      {!v.root_path.empty(), "--root-path: routes are served at /; a proxy in front strips its prefix"},
      {!v.compilation_config.empty(), "--compilation-config: no torch.compile (kernels are compiled ahead)"},
      {!v.lora_dtype.empty(), "--lora-dtype: adapters compute in their file's type"},
      {!v.structured_outputs_config.empty(), "--structured-outputs-config: tokenmill's own grammar engine serves "
                                             "structured output"},
      {v.max_num_partial_prefills || v.max_long_partial_prefills,
       "--max-num-partial-prefills / --max-long-partial-prefills: long prompts are chunked per "
       "--long-prefill-token-threshold"},
      {v.tokenizer_pool_size != 0, "--tokenizer-pool-size: tokenizing runs on each request's thread"},
  };
  for (const auto& [given, why] : flags)
    if (given) log_info("vLLM flag accepted: {}", why);
  if (!v.otlp_traces_endpoint.empty())
    log_warn("--otlp-traces-endpoint {}: no OpenTelemetry traces are sent (the figures are in /metrics)",
             v.otlp_traces_endpoint);
}

}  // namespace

Status apply_vllm_flags(VllmCli& v, EngineCli& engine, server::ServerOptions& server, bool several) {
  if (!several && !v.model.empty()) {
    if (!engine.model.empty() && engine.model != v.model)
      return Error{"the model is given twice: '" + v.model + "' and --model '" + engine.model + "'"};
    engine.model = v.model;
  }
  if (v.tensor_parallel != 1)
    return Error{fmt::format("--tensor-parallel-size {}: tensor parallelism is not supported; tokenmill runs a model "
                             "on one device (the CPU; CUDA: one GPU), use 1",
                             v.tensor_parallel)};
  if (v.pipeline_parallel != 1)
    return Error{fmt::format("--pipeline-parallel-size {}: pipeline parallelism is not supported; tokenmill runs a "
                             "model on one device, use 1",
                             v.pipeline_parallel)};
  if (v.enable_prefix_caching && (v.no_enable_prefix_caching || engine.no_prefix_caching))
    return Error{"--enable-prefix-caching and --no-enable-prefix-caching (--no-prefix-caching) contradict each other"};
  if (v.no_enable_prefix_caching) engine.no_prefix_caching = true;
  if (v.no_enable_chunked_prefill)
    return Error{"--no-enable-chunked-prefill: chunked prefill is always on in tokenmill; --max-num-batched-tokens "
                 "bounds a step and --long-prefill-token-threshold one prompt's share of it"};
  if (v.enable_log_requests && v.disable_log_requests)
    return Error{"--enable-log-requests and --disable-log-requests contradict each other"};
  if (v.enable_log_requests) server.log_requests = true;
  if (v.data_parallel != 1)
    return Error{fmt::format("--data-parallel-size {}: data parallelism is not supported; tokenmill runs one engine "
                             "per model (run several servers behind a load balancer), use 1",
                             v.data_parallel)};
  if (v.cpu_offload_gb != 0)
    return Error{fmt::format("--cpu-offload-gb {}: weights are not offloaded; on --device cuda the model must fit the "
                             "GPU (--quantization q4_k_m shrinks it), and on the CPU it already lives there",
                             v.cpu_offload_gb)};
  if (!several && !v.load_format.empty()) {
    const std::string path = engine.model.empty() ? cli::default_model_path() : engine.model;
    const bool gguf = path.ends_with(".gguf");
    if (v.load_format != "auto" && v.load_format != "gguf" && v.load_format != "safetensors")
      return Error{"--load-format " + v.load_format + ": tokenmill loads GGUF files and safetensors folders (auto, "
                   "gguf, safetensors)"};
    if ((v.load_format == "gguf" && !gguf) || (v.load_format == "safetensors" && gguf))
      return Error{"--load-format " + v.load_format + ": the model " + path + " is " +
                   (gguf ? "a GGUF file" : "not a GGUF file")};
  }
  if (!several && !v.tokenizer.empty()) {
    namespace fs = std::filesystem;
    const std::string path = engine.model.empty() ? cli::default_model_path() : engine.model;
    std::error_code ec;
    const fs::path model_dir = fs::is_directory(path, ec) ? fs::path(path) : fs::path(path).parent_path();
    if (v.tokenizer != path && !fs::equivalent(v.tokenizer, path, ec) &&
        !fs::equivalent(v.tokenizer, model_dir.empty() ? "." : model_dir, ec))
      return Error{"--tokenizer " + v.tokenizer + ": the tokenizer comes from the model itself (a GGUF file's "
                   "tokenizer.* keys, a folder's tokenizer.json); give the model's own path or leave it out"};
  }
  if (!v.tokenizer_mode.empty() && v.tokenizer_mode != "auto" && v.tokenizer_mode != "hf")
    return Error{"--tokenizer-mode " + v.tokenizer_mode + ": tokenmill has one tokenizer (auto, hf)"};
  if (!v.kv_cache_memory_bytes.empty()) {
    if (!engine.kv_cache_memory.empty() && engine.kv_cache_memory != v.kv_cache_memory_bytes)
      return Error{"--kv-cache-memory-bytes and --kv-cache-memory contradict each other"};
    engine.kv_cache_memory = v.kv_cache_memory_bytes;
  }
  if (!v.seed.empty()) {
    uint64_t seed = 0;
    const auto [end, ec] = std::from_chars(v.seed.data(), v.seed.data() + v.seed.size(), seed);
    if (ec != std::errc{} || end != v.seed.data() + v.seed.size())
      return Error{"--seed " + v.seed + ": expected a non-negative integer"};
    engine.seed = seed;
  }
  if (!v.override_generation_config.empty())  // over llama-server's --temp & co. when both are given
    TM_TRY(server::overlay_generation_json(v.override_generation_config, "--override-generation-config",
                                                  server.sampling_overrides));
  if (v.calculate_kv_scales) {  // (vLLM's flag only matters to an fp8 cache)
    if (engine.kv_cache_dtype.starts_with("fp8"))
      log_info("--calculate-kv-scales: the fp8 KV cache's scales are computed per token and KV head as each "
                      "token is stored (always, in tokenmill)");
    else
      log_warn("--calculate-kv-scales has no effect: the KV cache is not fp8 (--kv-cache-dtype {})",
                      engine.kv_cache_dtype);
  }
  if (!v.log_level.empty() && !v.uvicorn_log_level.empty() && v.log_level != v.uvicorn_log_level)
    return Error{"--log-level and --uvicorn-log-level contradict each other"};
  if (const std::string& lv = v.log_level.empty() ? v.uvicorn_log_level : v.log_level; !lv.empty()) {
    // uvicorn's names (vLLM passes them through): trace and debug, info, warning, error, critical.
    if (lv == "trace" || lv == "debug") set_log_level(LogLevel::Debug);
    else if (lv == "info") set_log_level(LogLevel::Info);
    else if (lv == "warning" || lv == "warn") set_log_level(LogLevel::Warn);
    else if (lv == "error" || lv == "critical") set_log_level(LogLevel::Error);
    else
      return Error{"--log-level " + lv + ": expected one of trace, debug, info, warning, error, critical"};
  }
  log_accepted_vllm_flags(v);
  if (!v.model_impl.empty() && v.model_impl != "auto" && v.model_impl != "vllm" && v.model_impl != "transformers")
    return Error{"--model-impl " + v.model_impl + ": expected auto, vllm or transformers (tokenmill's own either way)"};
  if (!v.hf_overrides.empty() && v.hf_overrides != "{}")
    return Error{"--hf-overrides " + v.hf_overrides + ": config.json is read as it is; edit a copy of the folder's "
                 "config.json instead"};
  if (!v.config_format.empty() && v.config_format != "auto" && v.config_format != "hf")
    return Error{"--config-format " + v.config_format + ": tokenmill reads Hugging Face config.json (auto, hf)"};
  if (!v.chat_template_content_format.empty() && v.chat_template_content_format != "auto" &&
      v.chat_template_content_format != "string")
    return Error{"--chat-template-content-format " + v.chat_template_content_format +
                 ": a message's text parts reach the chat template as one string (auto, string)"};
  if (!v.response_role.empty() && v.response_role != "assistant")
    return Error{"--response-role " + v.response_role + ": responses' messages have the role assistant"};
  if (v.return_tokens_as_token_ids)
    return Error{"--return-tokens-as-token-ids: not supported; logprobs carry each token's text and bytes"};
  if (!v.middleware.empty()) return Error{"--middleware: no Python middleware runs in tokenmill"};
  if (!v.logits_processors.empty()) return Error{"--logits-processors: no Python logits processors run in tokenmill"};
  if (!v.long_lora_scaling_factors.empty())
    return Error{"--long-lora-scaling-factors: long-context LoRA adapters are not supported"};
  if (v.enable_force_include_usage) server.force_include_usage = true;
  if (!several && v.gpu_memory_utilization != 0) {
    TM_TRY(cli::check_gpu_memory_utilization(v.gpu_memory_utilization));
    if (Engine::is_gpu_device(engine.device)) {
      engine.gpu_memory_utilization = v.gpu_memory_utilization;  // the GPU's memory plan (engine/gpu_engine.cpp)
    } else if (engine.kv_cache_memory.empty()) {  // --kv-cache-memory, explicit, wins
      const uint64_t total = meminfo_bytes("MemTotal");
      if (total == 0) return Error{"--gpu-memory-utilization: cannot read the memory size (/proc/meminfo)"};
      const std::string path = engine.model.empty() ? cli::default_model_path() : engine.model;
      // the weights as they will load: a GGUF's size, a folder's weights in the type they get
      auto sized = estimate_model_bytes(path, cli::load_options(engine));
      if (!sized.ok()) return Error{"--gpu-memory-utilization: cannot size the model " + path + ": " + sized.error()};
      const uint64_t weights = *sized;
      const double budget = v.gpu_memory_utilization * static_cast<double>(total);
      if (budget <= static_cast<double>(weights))
        return Error{fmt::format("--gpu-memory-utilization {}: {:.2f} GiB of {:.2f} GiB leaves nothing for the KV "
                                 "cache beside {:.2f} GiB of weights",
                                 v.gpu_memory_utilization, budget / (1 << 30), static_cast<double>(total) / (1 << 30),
                                 static_cast<double>(weights) / (1 << 30))};
      engine.kv_cache_memory = std::to_string(static_cast<uint64_t>(budget) - weights);
    }
  }
  return {};
}

}  // namespace tmill::cli
