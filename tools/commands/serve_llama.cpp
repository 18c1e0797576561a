#include "serve_llama.h"

#include <fmt/format.h>

#include "core/log.h"

namespace tmill::cli {

void add_llama_server_options(CLI::App& app, LlamaServerCli& l) {
  const char* same = "llama-server: accepted, no effect (docs/server.md)";
  app.add_option("-c,--ctx-size", l.ctx_size, "llama-server: = --max-model-len (0: the model's)");
  app.add_option("--n-gpu-layers,--gpu-layers", l.n_gpu_layers,
                 "llama-server (-ngl): layers are not offloaded one by one; --device cuda runs the whole model on the GPU");
  app.add_option("--parallel", l.parallel, "llama-server (-np): = --max-num-seqs");
  app.add_option("--cache-type-k", l.cache_type_k, "llama-server (-ctk): = --kv-cache-dtype (q8_0: int8)");
  app.add_option("--cache-type-v", l.cache_type_v, "llama-server (-ctv): = --kv-cache-dtype (one type for K and V)");
  app.add_option("--flash-attn", l.flash_attn, "llama-server (-fa) on|off|auto: accepted (fused attention always)")
      ->expected(0, 1);
  app.add_flag("--cont-batching", l.cont_batching, "llama-server (-cb): accepted (continuous batching always)");
  app.add_flag("--no-cont-batching", l.no_cont_batching, "llama-server (-nocb): refused (continuous batching always)");
  app.add_option("-b,--batch-size", l.batch_size, "llama-server: = --max-num-batched-tokens");
  app.add_option("--ubatch-size", l.ubatch_size, same);
  app.add_option("-n,--n-predict", l.n_predict, "llama-server: = --max-tokens-default (-1: no cap)");
  app.add_option("--keep", l.keep, "llama-server: = --context-shift-keep");
  app.add_option("-a,--alias", l.alias, "llama-server: = --served-model-name");
  app.add_option("--chat-template-file", l.chat_template_file, "llama-server: = --chat-template FILE");
  app.add_option("--reasoning-format", l.reasoning_format,
                 "llama-server: none (reasoning stays in the content) = --reasoning-parser none; auto, deepseek = auto");
  app.add_flag("--jinja", l.jinja, "llama-server: accepted (chat templates are Jinja always)");
  app.add_flag("--metrics", l.metrics, "llama-server: accepted (/metrics always)");
  app.add_flag("--slots", l.slots, "llama-server: accepted (GET /slots on by default)");
  app.add_flag("--no-slots", l.no_slots, "llama-server: GET /slots answers 501");
  app.add_flag("--props", l.props, "llama-server: accepted with a warning (POST /props changes nothing here)");
  app.add_option("--slot-save-path", l.slot_save_path,
                 "llama-server: accepted with a warning (slot save/restore answers 501: one shared paged KV cache)");
  app.add_flag("--no-webui", l.no_webui, "llama-server: = --no-ui");
  app.add_flag("--embedding,--embeddings", l.embedding,
               "llama-server: accepted (an embedding model, or any with --pooling, serves /v1/embeddings)");
  app.add_flag("--reranking,--rerank", l.reranking, "llama-server: = --pooling rank");
  app.add_flag("--mlock", l.mlock, same);
  app.add_flag("--no-mmap", l.no_mmap, same);
  app.add_flag("-v,--verbose", l.verbose, "llama-server: = --log-level debug");
  app.add_flag("--cpu-moe", l.cpu_moe, same);
  app.add_option("--n-cpu-moe", l.n_cpu_moe, same);
  app.add_option("--override-tensor", l.override_tensor, same);
  app.add_option("--split-mode", l.split_mode, same);
  app.add_flag("--no-kv-offload", l.no_kv_offload, same);
  app.add_option("--threads-http", l.threads_http, "llama-server: = --http-threads (-1: the default)");
  app.add_option("--temp", l.temp, "llama-server: default temperature of requests that omit it");
  app.add_option("--top-k", l.top_k, "llama-server: default top_k of requests that omit it");
  app.add_option("--top-p", l.top_p, "llama-server: default top_p of requests that omit it");
  app.add_option("--min-p", l.min_p, "llama-server: default min_p of requests that omit it");
  app.add_option("--repeat-penalty", l.repeat_penalty, "llama-server: default repetition_penalty of requests that omit it");
}

namespace {

// llama.cpp's cache type names -> --kv-cache-dtype (its q8_0 blocks and our int8's per-token scale are
// both an 8-bit cache); "" for names no KV cache here takes.
std::string kv_type_of(const std::string& t) {
  if (t == "f32" || t == "f16" || t == "bf16" || t == "q4_0") return t;
  if (t == "q8_0") return "int8";
  return "";
}

}  // namespace

Status apply_llama_server_flags(const LlamaServerCli& l, EngineCli& engine, server::ServerOptions& server,
                                std::vector<std::string>& served_names) {
  if (l.ctx_size >= 0) {
    if (engine.max_model_len != 0 && engine.max_model_len != l.ctx_size)
      return Error{"--ctx-size and --max-model-len contradict each other"};
    engine.max_model_len = l.ctx_size;
  }
  if (l.n_gpu_layers > 0 && !Engine::is_gpu_device(engine.device))
    log_warn("--n-gpu-layers {}: layers are not offloaded one by one; --device cuda runs the whole model on the GPU "
             "(this server: --device {})",
             l.n_gpu_layers, engine.device);
  if (l.parallel != -1) {
    if (l.parallel < 1) return Error{"--parallel must be at least 1"};
    engine.max_num_seqs = l.parallel;
  }
  for (const std::string* t : {&l.cache_type_k, &l.cache_type_v})
    if (!t->empty() && kv_type_of(*t).empty())
      return Error{fmt::format("--cache-type {}: not a KV cache type here (f32, f16, bf16, q8_0 -- as int8 --, q4_0)", *t)};
  if (!l.cache_type_k.empty() || !l.cache_type_v.empty()) {
    const std::string k = kv_type_of(l.cache_type_k.empty() ? l.cache_type_v : l.cache_type_k);
    const std::string v = kv_type_of(l.cache_type_v.empty() ? l.cache_type_k : l.cache_type_v);
    if (k != v) return Error{"--cache-type-k and --cache-type-v differ: keys and values share one type here (--kv-cache-dtype)"};
    if (engine.kv_cache_dtype != "auto" && engine.kv_cache_dtype != k)
      return Error{"--cache-type-k/-v and --kv-cache-dtype contradict each other"};
    engine.kv_cache_dtype = k;
  }
  if (!l.flash_attn.empty() && l.flash_attn != "on" && l.flash_attn != "off" && l.flash_attn != "auto")
    return Error{"--flash-attn " + l.flash_attn + ": expected on, off or auto"};
  if (l.no_cont_batching) return Error{"--no-cont-batching: continuous batching is always on in tokenmill"};
  if (l.batch_size != 0) {
    if (l.batch_size < 1) return Error{"--batch-size must be at least 1"};
    engine.max_num_batched_tokens = static_cast<int32_t>(l.batch_size);
  }
  if (l.n_predict != -2) {
    if (l.n_predict < -1) return Error{"--n-predict must be -1 (no cap) or at least 0"};
    server.max_tokens_default = l.n_predict == -1 ? 0 : static_cast<int32_t>(l.n_predict);
  }
  if (l.keep != -2) engine.context_shift_keep = l.keep;
  if (!l.alias.empty()) {
    if (!served_names.empty() && served_names.front() != l.alias)
      return Error{"--alias and --served-model-name contradict each other"};
    if (served_names.empty()) served_names.push_back(l.alias);
  }
  if (!l.chat_template_file.empty()) {
    if (!server.chat_template.empty() && server.chat_template != l.chat_template_file)
      return Error{"--chat-template-file and --chat-template contradict each other"};
    server.chat_template = l.chat_template_file;
  }
  if (!l.reasoning_format.empty()) {
    if (l.reasoning_format == "none") server.reasoning_parser = "none";
    else if (l.reasoning_format != "auto" && l.reasoning_format != "deepseek" && l.reasoning_format != "deepseek-legacy")
      return Error{"--reasoning-format " + l.reasoning_format + ": expected none, auto or deepseek"};
  }
  if (l.no_webui) server.no_ui = true;
  if (l.slots && l.no_slots) return Error{"--slots and --no-slots contradict each other"};
  if (l.no_slots) server.slots_endpoint = false;
  if (l.props) log_warn("--props: POST /props is not served (the server's settings change only at start)");
  if (!l.slot_save_path.empty())
    log_warn("--slot-save-path {}: POST /slots/ID?action=save|restore answers 501 here (sequences share one paged KV "
             "cache with automatic prefix caching)",
             l.slot_save_path);
  if (l.threads_http < -1 || l.threads_http > 65536) return Error{"--threads-http must be in [1, 65536] (or -1: the default)"};
  if (l.threads_http > 0) server.http.max_threads = l.threads_http;  // requests handled at once, as there
  if (l.reranking) {
    if (!engine.pooling.empty() && engine.pooling != "rank") return Error{"--reranking and --pooling contradict each other"};
    engine.pooling = "rank";
  }
  if (l.verbose) set_log_level(LogLevel::Debug);
  GenerationDefaults& d = server.sampling_overrides;
  if (l.temp != -1) {
    if (l.temp < 0) return Error{"--temp must not be negative"};
    d.temperature = static_cast<float>(l.temp);
  }
  if (l.top_p != -1) {
    if (!(l.top_p > 0 && l.top_p <= 1)) return Error{"--top-p must be in (0, 1]"};
    d.top_p = static_cast<float>(l.top_p);
  }
  if (l.min_p != -1) {
    if (!(l.min_p >= 0 && l.min_p <= 1)) return Error{"--min-p must be in [0, 1]"};
    d.min_p = static_cast<float>(l.min_p);
  }
  if (l.repeat_penalty != -1) {
    if (!(l.repeat_penalty > 0)) return Error{"--repeat-penalty must be positive"};
    d.repetition_penalty = static_cast<float>(l.repeat_penalty);
  }
  if (l.top_k != -1) {
    if (l.top_k < 0) return Error{"--top-k must not be negative (0: off)"};
    d.top_k = l.top_k;
  }
  return {};
}

}  // namespace tmill::cli
