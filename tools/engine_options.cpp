#include "engine_options.h"

#include <chrono>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "cli_common.h"
#include "convert/model_source.h"
#include "core/log.h"
#include "core/progress.h"
#include "core/strings.h"

namespace tmill::cli {

void add_engine_options(CLI::App& app, EngineCli& o) {
  app.add_option("--model", o.model,
                 "GGUF model file, a split GGUF's first shard (NAME-00001-of-0000N.gguf) or a Hugging Face model "
                 "folder (default: the bundled stories260K)");
  app.add_option("--dtype", o.dtype,
                 "type the weights are converted to at load: auto (the file's own), float16 (half), bfloat16, "
                 "float32 (float)")
      ->capture_default_str();
  app.add_option("--quantization", o.quantization,
                 "quantize the weights at load to a `tokenmill quantize` type: q8_0, q4_0, q4_k_m, q5_k_m, q6_k, ...");
  app.add_option("--threads", o.threads, "compute threads (default: all cores)");
  app.add_option("--device", o.device,
                 "where the engine computes: cpu, or auto (vLLM's spelling: the CPU for now); cuda: the first NVIDIA "
                 "GPU (a build with -DTM_CUDA=ON; llama/qwen2/qwen3/phi3/gemma2/gemma3, the MoE families and gpt-oss, "
                 "with an f16, int8, fp8 or q4_0 KV cache; others are refused saying what they lack); cuda-emu: the "
                 "same with the CUDA kernels run by the CPU's emulator of CUDA, any build (tests, slow); gpu-oracle: "
                 "the GPU engine path on the CPU's reference math (tests, slow). llama-server's names (-dev): none = "
                 "cpu, CUDA0 = cuda")
      ->capture_default_str()
      ->transform(CLI::Validator(
          [](std::string& d) -> std::string {
            if (d == "none") d = "cpu";  // llama.cpp's --device none: no GPU
            else if (d == "CUDA0" || d == "cuda0") d = "cuda";
            else if (d.size() > 4 && (d.starts_with("CUDA") || d.starts_with("cuda")) && d != "cuda-emu")
              return "--device " + d + ": one GPU, the first (CUDA0 or cuda)";
            return "";
          },
          "", "llama.cpp device names"));
  app.add_flag("--enforce-eager", o.enforce_eager,
               "GPU devices: run decode steps without CUDA graphs (vLLM's flag; by default each batch size's graph "
               "is captured once and replayed); no effect on the CPU");
  app.add_flag("--async-scheduling", o.async_scheduling,
               "GPU devices: process each step's outputs (text, stop strings, streaming) while the next step runs on "
               "the device (vLLM's flag; the default here); no effect on the CPU");
  app.add_flag("--no-async-scheduling", o.no_async_scheduling,
               "GPU devices: process each step's outputs between steps instead");
  app.add_option("--kv-cache-memory", o.kv_cache_memory, "KV cache size: bytes (2GiB, 512MiB) or a share of available memory (30%); default: automatic");
  app.add_option("--kv-cache-dtype", o.kv_cache_dtype, "auto (f32 for f32 models, else f16), f32, f16, bf16, int8 or fp8 / fp8_e4m3 / fp8_e5m2 (a byte per value and a scale per token: ~1.9x the tokens of f16), or q4_0 (4-bit, f16 scale per 32 dims: ~3.6x)")->capture_default_str();
  app.add_option("--block-size", o.block_size, "tokens per KV block")->capture_default_str();
  app.add_option("--max-num-seqs", o.max_num_seqs, "sequences per step")->capture_default_str();
  app.add_option("--max-num-batched-tokens", o.max_num_batched_tokens, "token budget per step")->capture_default_str();
  app.add_option("--max-model-len", o.max_model_len, "context length (default: the model's, if the KV cache holds it)");
  app.add_flag("--no-prefix-caching", o.no_prefix_caching, "disable automatic prefix caching");
  app.add_option("--scheduling-policy", o.policy, "fcfs or priority")->capture_default_str();
  app.add_option("--long-prefill-token-threshold", o.long_prefill_token_threshold,
                 "most prompt tokens one request computes per step, leaving budget for others (0: no cap)")
      ->capture_default_str();
  app.add_option("--speculative-config", o.speculative_config,
                 "speculative decoding as JSON with vLLM's keys, e.g. '{\"method\": \"ngram\", \"num_speculative_tokens\": 4, "
                 "\"prompt_lookup_max\": 4}' or '{\"model\": \"draft.gguf\", \"num_speculative_tokens\": 3}' "
                 "(docs/speculative.md)");
  app.add_option("--speculative-model,--model-draft", o.speculative_model,
                 "draft model GGUF for speculative decoding (same tokenizer; vLLM's --speculative-model, llama-server's "
                 "--model-draft): '{\"method\": \"draft_model\", \"model\": FILE}'");
  app.add_option("--num-speculative-tokens,--draft-max", o.num_speculative_tokens,
                 "most draft tokens per sequence and step (k) for --speculative-model or --speculative-config (default 4)");
  app.add_flag("--context-shift", o.context_shift,
               "endless generation: a sequence reaching the context drops the oldest half after its kept prefix and goes on");
  app.add_option("--context-shift-keep", o.context_shift_keep,
                 "tokens kept at the start on a context shift (-1: the prompt; at most half the context)")
      ->capture_default_str();
  app.add_option("--pooling", o.pooling,
                 "serve the model as an embedding model with this pooling instead of the file's (llama.cpp's --pooling): "
                 "mean, cls, last or rank; rank on a qwen3 generation model scores relevance with its \"yes\"/\"no\" "
                 "logits (Qwen3-Reranker style, docs/embeddings.md)")
      ->check(CLI::IsMember({"mean", "cls", "last", "rank"}));
  // Hidden (empty group): lets end-to-end tests keep a request running for a known time.
  app.add_option("--debug-step-delay-ms", o.debug_step_delay_ms, "testing aid: sleep after every engine step")
      ->group("");
}

Status check_gpu_memory_utilization(double share) {
  if (!(share > 0 && share <= 1)) return Error{"--gpu-memory-utilization must be in (0, 1]"};
  return {};
}

void add_gpu_memory_option(CLI::App& app, EngineCli& o) {
  app.add_option("--gpu-memory-utilization", o.gpu_memory_utilization,
                 "GPU devices: vLLM's share of the GPU's memory for weights, activations and KV cache (default 0.9; "
                 "--kv-cache-memory wins); no effect on the CPU");
}

void add_lora_options(CLI::App& app, EngineCli& o) {
  app.add_option("--lora", o.lora,
                 "LoRA adapter (llama.cpp's LoRA GGUF) as [NAME=]FILE[:SCALE]; NAME defaults to the file name, SCALE to 1 (repeatable)");
  app.add_option("--lora-scaled", o.lora_scaled, "LoRA adapter FILE with a SCALE (llama.cpp's spelling; repeatable)")
      ->type_name("FILE SCALE");
  app.add_option("--max-loras", o.max_loras, "LoRA adapters loaded at once")->capture_default_str();
  app.add_option("--max-lora-rank", o.max_lora_rank, "vLLM: adapters of a larger rank are refused at load (0: any)")
      ->capture_default_str();
}

Result<std::vector<CliLora>> lora_flags(const EngineCli& o) {
  auto stem = [](const std::string& path) {
    std::string n = path.substr(path.find_last_of('/') + 1);
    if (n.size() > 5 && n.ends_with(".gguf")) n.resize(n.size() - 5);
    return n;
  };
  auto number = [](const std::string& s, float* v) {
    char* end = nullptr;
    *v = std::strtof(s.c_str(), &end);
    return !s.empty() && end == s.c_str() + s.size() && std::isfinite(*v);
  };
  std::vector<CliLora> out;
  for (const std::string& spec : o.lora) {
    CliLora l;
    std::string rest = spec;
    // NAME= only when what precedes '=' has no '/' (a path may contain '=')
    if (auto eq = rest.find('='); eq != std::string::npos && rest.substr(0, eq).find('/') == std::string::npos) {
      l.name = rest.substr(0, eq);
      rest = rest.substr(eq + 1);
      if (l.name.empty()) return Error{fmt::format("--lora {}: empty NAME before '='", spec)};
    }
    // :SCALE only when what follows the last ':' is a number (a path may contain ':')
    if (auto colon = rest.rfind(':'); colon != std::string::npos && number(rest.substr(colon + 1), &l.scale))
      rest.resize(colon);
    else
      l.scale = 1.0f;
    if (rest.empty()) return Error{fmt::format("--lora {}: no file", spec)};
    l.path = rest;
    if (l.name.empty()) l.name = stem(rest);
    out.push_back(l);
  }
  for (const auto& [path, scale] : o.lora_scaled) {
    CliLora l{stem(path), path, 1.0f};
    if (!number(scale, &l.scale)) return Error{fmt::format("--lora-scaled {} {}: the scale is not a number", path, scale)};
    out.push_back(l);
  }
  return out;
}

ModelLoadOptions load_options(const EngineCli& o) {
  ModelLoadOptions l;
  l.dtype = o.dtype;
  l.quantization = o.quantization;
  l.threads = o.threads;
  return l;
}

Result<EngineConfig> engine_config(const EngineCli& o) {
  EngineConfig c;
  c.model_path = o.model.empty() ? default_model_path() : o.model;
  TM_TRY(check_model_load_options(load_options(o)));
  c.memory_limit_bytes = o.memory_limit_bytes;
  c.threads = o.threads;
  c.device = o.device;
  TM_TRY(Engine::check_device(c.device));  // before a server listens or a model loads
  if (o.gpu_memory_utilization != 0) {
    TM_TRY(check_gpu_memory_utilization(o.gpu_memory_utilization));
    c.gpu_memory_utilization = o.gpu_memory_utilization;
  }
  c.enforce_eager = o.enforce_eager;
  if (o.async_scheduling && o.no_async_scheduling)
    return Error{"--async-scheduling and --no-async-scheduling contradict each other"};
  c.async_scheduling = !o.no_async_scheduling;
  if (!o.kv_cache_memory.empty()) {
    auto b = parse_kv_cache_memory(o.kv_cache_memory);
    if (!b.ok()) return Error{"--kv-cache-memory: " + b.error()};
    c.kv_cache_bytes = *b;
  }
  c.kv_cache_tokens = o.kv_cache_tokens;
  c.kv_cache_dtype = o.kv_cache_dtype;
  c.pooling = o.pooling;
  c.block_size = o.block_size;
  if (o.max_num_seqs < 1) return Error{"--max-num-seqs must be at least 1"};
  if (o.max_num_batched_tokens < 1) return Error{"--max-num-batched-tokens must be at least 1"};
  if (o.max_model_len < 0) return Error{"--max-model-len must be positive"};
  c.max_num_seqs = o.max_num_seqs;
  c.max_num_batched_tokens = o.max_num_batched_tokens;
  c.max_model_len = o.max_model_len;
  c.enable_prefix_caching = !o.no_prefix_caching;
  if (o.long_prefill_token_threshold < 0) return Error{"--long-prefill-token-threshold must not be negative"};
  c.long_prefill_token_threshold = o.long_prefill_token_threshold;
  if (o.context_shift_keep < -1) return Error{"--context-shift-keep must be -1 or at least 0"};
  c.context_shift = o.context_shift;
  c.context_shift_keep = o.context_shift_keep;
  if (o.debug_step_delay_ms < 0 || o.debug_step_delay_ms > 10000) return Error{"--debug-step-delay-ms must be in [0, 10000]"};
  c.debug_step_delay_s = o.debug_step_delay_ms / 1000.0;
  if (o.max_loras < 1) return Error{"--max-loras must be at least 1"};
  c.max_loras = o.max_loras;
  if (o.max_lora_rank < 0) return Error{"--max-lora-rank must not be negative"};
  c.max_lora_rank = o.max_lora_rank;
  c.seed = o.seed;
  TM_ASSIGN_OR_RETURN(auto loras, lora_flags(o));
  if (static_cast<int32_t>(loras.size()) > c.max_loras)
    return Error{fmt::format("{} LoRA adapters given, more than --max-loras {}", loras.size(), c.max_loras)};
  for (const CliLora& l : loras) c.loras.push_back({l.name, l.path});
  if (!o.speculative_config.empty() && !o.speculative_model.empty())
    return Error{"--speculative-model and --speculative-config both given: give the draft model as the config's \"model\""};
  if (!o.speculative_config.empty()) {
    TM_ASSIGN_OR_RETURN(c.speculative, parse_speculative_config(o.speculative_config));
  } else if (!o.speculative_model.empty()) {
    c.speculative.method = "draft_model";
    c.speculative.model = o.speculative_model;
    c.speculative.num_speculative_tokens = 4;
  }
  if (o.num_speculative_tokens != 0) {
    if (!c.speculative.enabled())
      return Error{"--num-speculative-tokens needs --speculative-model or --speculative-config"};
    if (o.num_speculative_tokens < 1 || o.num_speculative_tokens > 64)
      return Error{"--num-speculative-tokens must be in [1, 64]"};
    c.speculative.num_speculative_tokens = o.num_speculative_tokens;
  }
  if (o.policy == "fcfs") c.policy = SchedulingPolicy::Fcfs;
  else if (o.policy == "priority") c.policy = SchedulingPolicy::Priority;
  else return Error{"--scheduling-policy must be fcfs or priority"};
  return c;
}

Result<std::unique_ptr<Engine>> create_engine(const EngineCli& o, double* load_seconds) {
  TM_ASSIGN_OR_RETURN(EngineConfig c, engine_config(o));
  const std::string source = c.model_path;
  const auto t0 = std::chrono::steady_clock::now();
  // A folder, split GGUF, --dtype or --quantization: one GGUF prepared in memory, with a progress
  // display per stage.
  ModelLoadOptions lo = load_options(o);
  std::unique_ptr<ProgressBar> bar;
  std::string stage;
  lo.progress = [&](const std::string& st, size_t done, size_t n, const std::string& name) {
    if (st != stage || !bar) {
      bar = std::make_unique<ProgressBar>("load: " + st, n, "tensors");
      stage = st;
    }
    bar->update(done, name);
  };
  TM_ASSIGN_OR_RETURN(PreparedModel prepared, prepare_model(source, lo));
  bar.reset();
  c.model_path = prepared.path;
  if (!prepared.steps.empty())
    log_info("model {}: {} in {:.2f} s", source, prepared.steps, prepared.seconds);
  auto created = Engine::create(c);
  prepared.memory.reset();  // the engine has mapped it (or failed): the mapping keeps the pages
  if (!created.ok()) return Error{prepared.steps.empty() ? created.error() : source + ": " + created.error()};
  auto e = std::move(created).value();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (load_seconds) *load_seconds = secs;
  const auto& p = e->memory_plan();
  const ModelInfo& mi = e->model_info();
  log_info("model {} ({}, {} layers, {} params, weights {}) loaded in {:.2f} s", source, mi.architecture, mi.n_layer,
           mi.n_params, mi.weight_type, secs);
  log_info("memory: weights {}, KV cache {} ({} blocks of {} tokens, {} tokens, {}), max_model_len {}, "
           "{} full-length sequences fit",
           format_bytes(p.weight_bytes), format_bytes(p.kv_bytes), p.num_blocks, c.block_size, p.kv_tokens,
           p.kv_dtype, p.max_model_len, p.max_full_sequences);
  if (!p.note.empty()) log_info("{}", p.note);
  if (c.speculative.enabled())
    log_info("speculative decoding: {}{}, up to {} draft tokens per sequence{}", c.speculative.method,
             c.speculative.model.empty() ? "" : " (" + c.speculative.model + ")", c.speculative.num_speculative_tokens,
             c.speculative.adaptive ? " (adaptive)" : "");
  for (const LoraInfo& l : e->loras())
    log_info("LoRA adapter '{}': {} (rank {}, alpha {}, {} tensors, {})", l.name, l.path, l.rank, l.alpha, l.n_tensors,
             format_bytes(l.bytes));
  if (o.max_model_len == 0 && p.max_model_len < mi.n_ctx_train)
    log_warn("max_model_len {} is below the model's trained context of {} tokens (KV cache {}); raise "
             "--kv-cache-memory for longer prompts",
             p.max_model_len, mi.n_ctx_train, format_bytes(p.kv_bytes));
  return e;
}

}  // namespace tmill::cli
