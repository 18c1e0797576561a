// tokenmill serve: the OpenAI-compatible HTTP server (see docs/server.md).
// Listens first (GET /health answers 503 while the model loads), then loads the engine. SIGINT /
// SIGTERM drain: new requests get 503, in-flight ones finish (up to --drain-timeout), exit 0. A
// second signal (1 s or more after the first) exits at once.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "cli_common.h"
#include "core/log.h"
#include "core/memory.h"
#include "core/sd_notify.h"
#include "core/strings.h"
#include "engine_options.h"
#include "chat/tool_calls.h"
#include "serve_llama.h"
#include "serve_vllm.h"
#include "serve_models.h"
#include "server/models_file.h"
#include "server/server.h"

namespace {

struct ServeCli {
  tmill::cli::EngineCli engine;
  tmill::server::ServerOptions server;
  tmill::cli::VllmCli vllm;  // vllm serve's command line (serve_vllm.h)
  tmill::cli::LlamaServerCli llama;  // llama-server's command line (serve_llama.h)
  std::string max_body = "8MiB";
  std::string stored_responses_memory = "256MiB";
  double drain_timeout = 30;
  bool threshold_given = false;
  bool threads_given = false;
  // Several models (docs/server.md, "Several models"): --model [NAME=]FILE (repeatable), --models-file.
  std::vector<std::string> model_entries;
  std::string models_file;
  std::string memory_limit;
  std::string buffer_memory;  // --buffer-memory; empty: an eighth of the limit (or of RAM), 16 MiB..1 GiB
  std::vector<std::string> lora_modules;  // vLLM's --lora-modules: NAME=FILE or a JSON object
  std::vector<std::string> served_names;  // --served-model-name NAME [ALIAS ...]
};

// The LoRA adapters of --lora-modules (vLLM: NAME=FILE, or {"name", "path", "base_model_name"}) and
// llama-server's --lora [NAME=]FILE[:SCALE] / --lora-scaled FILE SCALE. They become model names
// (ServerOptions::loras); the server loads them into their base model's engine, so the engine
// options keep none of them.
tmill::Status collect_loras(ServeCli& o) {
  using tmill::Error;
  TM_ASSIGN_OR_RETURN(auto flags, tmill::cli::lora_flags(o.engine));
  for (const auto& l : flags) o.server.loras.push_back({l.name, l.path, l.scale, ""});
  o.engine.lora.clear();
  o.engine.lora_scaled.clear();
  for (const std::string& m : o.lora_modules) {
    tmill::server::AdapterSpec a;
    if (!m.empty() && m.front() == '{') {
      auto j = nlohmann::json::parse(m, nullptr, false);
      if (!j.is_object() || !j.contains("name") || !j.contains("path") || !j["name"].is_string() ||
          !j["path"].is_string())
        return Error{"--lora-modules " + m + ": a JSON module needs string \"name\" and \"path\""};
      for (auto it = j.begin(); it != j.end(); ++it)
        if (it.key() != "name" && it.key() != "path" && it.key() != "base_model_name")
          return Error{"--lora-modules " + m + ": unknown key '" + it.key() + "' (name, path, base_model_name)"};
      a.name = j["name"].get<std::string>();
      a.path = j["path"].get<std::string>();
      if (j.contains("base_model_name")) {
        if (!j["base_model_name"].is_string()) return Error{"--lora-modules " + m + ": base_model_name must be a string"};
        a.base = j["base_model_name"].get<std::string>();
      }
    } else {
      const size_t eq = m.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == m.size())
        return Error{"--lora-modules " + m + ": expected NAME=FILE or a JSON object"};
      a.name = m.substr(0, eq);
      a.path = m.substr(eq + 1);
    }
    o.server.loras.push_back(std::move(a));
  }
  for (const auto& a : o.server.loras) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(a.path, ec))
      return Error{fmt::format("LoRA adapter '{}': no such file {}", a.name, a.path)};
  }
  return {};
}

// One model the way serve always took it (positional MODEL and/or one --model FILE): the
// single-model path, unchanged. Several models, NAME=FILE or a models file: the registry's path.
bool several_models(const ServeCli& o) {
  if (!o.models_file.empty()) return true;
  std::vector<std::string> all = o.model_entries;
  if (!o.vllm.model.empty()) all.insert(all.begin(), o.vllm.model);
  for (const auto& e : all) {
    const size_t eq = e.find('=');
    std::error_code ec;
    if (eq != std::string::npos && e.substr(0, eq).find('/') == std::string::npos && !std::filesystem::exists(e, ec))
      return true;  // NAME=FILE
  }
  std::sort(all.begin(), all.end());
  return std::unique(all.begin(), all.end()) - all.begin() > 1;
}

// --buffer-memory's default: an eighth of the memory limit (or of RAM), at least 16 MiB (a quarter of
// a smaller limit), at most 1 GiB.
uint64_t default_buffer_memory(uint64_t limit) {
  const uint64_t floor = std::min<uint64_t>(16ull << 20, limit / 4);
  return std::min<uint64_t>(std::max(limit / 8, floor), 1ull << 30);
}

// The memory limit (limit_text, else `fallback`; 0: none) split into the request buffers
// (--buffer-memory, else default_buffer_memory of the limit or of RAM) and the rest, the models'.
struct MemorySplit {
  uint64_t limit = 0, buffers = 0;
  uint64_t models() const { return limit ? limit - buffers : 0; }
};
tmill::Result<MemorySplit> split_memory(const std::string& limit_text, uint64_t fallback, const std::string& buffer_text) {
  using namespace tmill;
  MemorySplit s;
  s.limit = fallback;
  if (!limit_text.empty()) {
    TM_ASSIGN_OR_RETURN(s.limit, cli::parse_memory_limit(limit_text));
  }
  if (!buffer_text.empty()) {
    auto b = parse_size(buffer_text);
    if (!b.ok() || *b == 0) return Error{fmt::format("--buffer-memory: {}", b.ok() ? "must be positive" : b.error())};
    s.buffers = *b;
  } else {
    s.buffers = default_buffer_memory(s.limit ? s.limit : meminfo_bytes("MemTotal"));
  }
  if (s.limit && s.buffers >= s.limit)
    return Error{fmt::format("--buffer-memory {} leaves nothing of the memory limit {} for the models",
                             format_bytes(s.buffers), format_bytes(s.limit))};
  return s;
}

// The registry's path: every model's spec and engine options, the thread policy, the memory
// budget and the routers, into the server's options; the loader creates a model's engine by name.
tmill::Status configure_models(ServeCli& o) {
  using namespace tmill;
  if (!o.server.served_model_name.empty())
    return Error{"--served-model-name names one model; with several models use --model NAME=FILE or the models "
                 "file's 'name' and 'aliases'"};
  if (o.vllm.gpu_memory_utilization != 0)
    return Error{"--gpu-memory-utilization sizes one model's KV cache; with several models set each model's "
                 "kv_cache_memory and the process's --memory-limit"};
  std::vector<cli::ServeModel> models;
  std::vector<server::RouterSpec> routers;
  std::optional<std::string> file_limit;
  if (!o.models_file.empty()) {
    if (!o.model_entries.empty() || !o.vllm.model.empty())
      return Error{"--models-file lists the models: give no --model or MODEL beside it"};
    TM_ASSIGN_OR_RETURN(server::ModelsFile f, server::load_models_file(o.models_file));
    TM_ASSIGN_OR_RETURN(models, cli::models_from_file(f, o.engine));
    routers = std::move(f.routers);
    file_limit = f.memory_limit;
  } else {
    std::vector<std::string> entries;
    if (!o.vllm.model.empty()) entries.push_back(o.vllm.model);
    entries.insert(entries.end(), o.model_entries.begin(), o.model_entries.end());
    TM_ASSIGN_OR_RETURN(models, cli::models_from_cli(entries, o.engine));
  }
  cli::apply_thread_policy(models, o.threads_given);
  TM_TRY(cli::size_models(models));
  // The request memory (--buffer-memory) comes out of the limit (the file's or the default one too).
  const std::string limit_text = !o.memory_limit.empty() ? o.memory_limit : file_limit.value_or("");
  TM_ASSIGN_OR_RETURN(const MemorySplit mem, split_memory(limit_text, cli::default_memory_limit(), o.buffer_memory));
  const uint64_t limit = mem.limit;
  o.server.http.buffer_memory_bytes = mem.buffers;
  o.server.memory_limit = mem.models();
  auto engines = std::make_shared<std::map<std::string, cli::EngineCli>>();
  for (auto& m : models) {
    // Engine options are checked now, not at a model's first request.
    if (auto c = cli::engine_config(m.engine); !c.ok()) return Error{fmt::format("model {}: {}", m.spec.name, c.error())};
    (*engines)[m.spec.name] = m.engine;
    log_info("model {}: {} ({}, {} threads{})", m.spec.name, m.spec.path, m.spec.pinned ? "pinned" : "on demand",
             m.engine.threads,
             m.spec.pinned || m.spec.idle_unload_s <= 0 ? "" : fmt::format(", unloaded after {:g} s idle", m.spec.idle_unload_s));
    o.server.models.push_back(m.spec);
  }
  o.server.routers = std::move(routers);
  if (limit)
    log_info("memory limit: {}: {} for weights and KV caches of resident models, {} for requests (--buffer-memory)",
             format_bytes(limit), format_bytes(o.server.memory_limit), format_bytes(o.server.http.buffer_memory_bytes));
  o.server.engine_loader = [engines](const server::ModelSpec& spec, double* load_s) {
    return cli::create_engine(engines->at(spec.name), load_s);
  };
  o.server.model_path = models[0].spec.path;
  return {};
}


int run(ServeCli& o) {
  using namespace tmill;
  // Signals are handled by one thread with sigwait(); every other thread (created below) inherits
  // the blocked mask.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);  // reloads --api-key-file (never stops the server)
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  signal(SIGPIPE, SIG_IGN);

  if (auto st = collect_loras(o); !st.ok()) {
    log_error("{}", st.error());
    return 1;
  }
  if (auto st = cli::apply_llama_server_flags(o.llama, o.engine, o.server, o.served_names); !st.ok()) {
    log_error("{}", st.error());
    return 2;
  }
  const bool several = several_models(o);
  if (!several && !o.model_entries.empty()) o.engine.model = o.model_entries[0];
  if (auto st = several ? Status{} : cli::apply_vllm_flags(o.vllm, o.engine, o.server, false); !st.ok()) {
    log_error("{}", st.error());
    return 2;
  }
  if (!o.served_names.empty()) {  // vLLM: the first name is the one responses carry
    o.server.served_model_name = o.served_names[0];
    o.server.served_model_aliases.assign(o.served_names.begin() + 1, o.served_names.end());
  }
  if (const char* k = std::getenv("TOKENMILL_API_KEY"); k && *k) o.server.api_keys.push_back(k);
  for (const auto& k : o.server.api_keys)
    if (k.empty()) {
      log_error("--api-key must not be empty");
      return 1;
    }
  // CORS lists as vLLM takes them (a JSON list, '["http://a", "http://b"]') or comma-separated.
  for (auto* list : {&o.server.allowed_origins, &o.server.allowed_methods, &o.server.allowed_headers}) {
    std::vector<std::string> out;
    for (const auto& v : *list) {
      if (!v.empty() && v.front() == '[') {
        auto j = nlohmann::json::parse(v, nullptr, false);
        if (!j.is_array()) {
          log_error("CORS option: '{}' is not a JSON list", v);
          return 1;
        }
        for (const auto& x : j) {
          if (!x.is_string()) {
            log_error("CORS option: '{}' must list strings", v);
            return 1;
          }
          out.push_back(x.get<std::string>());
        }
      } else {
        for (std::string item : split(v, ',')) {
          while (!item.empty() && item.front() == ' ') item.erase(0, 1);
          while (!item.empty() && item.back() == ' ') item.pop_back();
          // CLI11 splits a '[...]' value itself and keeps the items' JSON quotes.
          if (item.size() >= 2 && (item.front() == '"' || item.front() == '\'') && item.back() == item.front())
            item = item.substr(1, item.size() - 2);
          if (!item.empty()) out.push_back(item);
        }
      }
    }
    *list = std::move(out);
  }
  if (!o.server.allowed_origins.empty()) {
    std::string origins;
    for (const auto& x : o.server.allowed_origins) origins += (origins.empty() ? "" : ", ") + x;
    log_info("CORS: origins allowed: {}", origins);
  }
  auto body = parse_size(o.max_body);
  if (!body.ok() || *body == 0) {
    log_error("--max-body-size: {}", body.ok() ? "must be positive" : body.error());
    return 1;
  }
  o.server.http.payload_max_bytes = *body;
  auto stored = parse_size(o.stored_responses_memory);
  if (!stored.ok()) {
    log_error("--stored-responses-memory: {}", stored.error());
    return 1;
  }
  o.server.stored_responses_memory = *stored;
  // The request memory (--buffer-memory) comes out of --memory-limit; the models get the rest.
  if (!o.memory_limit.empty() || !o.buffer_memory.empty()) bound_allocator();
  // (with several models configure_models splits again: the models file may set the limit)
  auto mem = split_memory(o.memory_limit, 0, o.buffer_memory);
  if (!mem.ok()) {
    log_error("{}", mem.error());
    return 2;
  }
  o.server.http.buffer_memory_bytes = mem->buffers;
  // Serving default: one long prompt takes at most half of a step's token budget, so requests that
  // arrive during its prefill start at the next step instead of waiting for all of it.
  if (!o.threshold_given) o.engine.long_prefill_token_threshold = std::max(1, o.engine.max_num_batched_tokens / 2);
  if (several) {
    if (auto st = cli::apply_vllm_flags(o.vllm, o.engine, o.server, true); !st.ok()) {  // the vLLM flags that are not about the model
      log_error("{}", st.error());
      return 2;
    }
    if (auto st = configure_models(o); !st.ok()) {
      log_error("{}", st.error());
      return 1;
    }
  } else {
    // --memory-limit with one model: its weights + KV cache (the automatic KV size is capped by it)
    // and the request memory.
    o.engine.memory_limit_bytes = mem->models();
    auto cfg = cli::engine_config(o.engine);
    if (!cfg.ok()) {
      log_error("{}", cfg.error());
      return 1;
    }
    o.server.model_path = cfg->model_path;
  }
  o.server.version = cli::version_string();

  auto srv = server::Server::create(o.server);
  if (!srv.ok()) {
    log_error("{}", srv.error());
    return 1;
  }
  static std::atomic<int> signals{0};
  static std::atomic<bool> loaded{false};
  server::Server* const server_ptr = srv->get();
  std::thread([set, server_ptr] {
    // A signal within 1 s of the first is the same stop request delivered twice (GNU timeout and
    // a terminal's Ctrl-C also signal the whole process group), not the operator insisting.
    std::chrono::steady_clock::time_point first{};
    for (;;) {
      int sig = 0;
      if (sigwait(&set, &sig) != 0) continue;
      if (sig == SIGHUP) {
        (void)server_ptr->reload_api_keys();  // logs what happened; a broken file keeps the old keys
        continue;
      }
      const auto now = std::chrono::steady_clock::now();
      if (signals.load() == 1 && now - first < std::chrono::seconds(1)) {
        log_info("signal {} again within 1 s: ignored (send it again later to exit at once)", sig);
        continue;
      }
      if (signals.load() == 0) first = now;
      const int n = ++signals;
      if (n == 1 && !loaded.load()) {
        log_info("signal {} while loading the model: exiting", sig);
        std::_Exit(0);
      }
      if (n == 1) log_info("signal {}: draining (send it again to exit at once)", sig);
      else {
        log_warn("signal {} again: exiting without draining", sig);
        std::_Exit(1);
      }
    }
  }).detach();

  if (!o.server.api_keys.empty() || !o.server.api_key_file.empty())
    log_info("API keys required on /v1/*, /tokenize, /detokenize ({} --api-key key(s){}); /health, /metrics, /version "
             "stay open",
             o.server.api_keys.size(), o.server.api_key_file.empty() ? "" : ", and the --api-key-file's");
  if (several) {
    if (Status st = (*srv)->load_pinned_models(); !st.ok()) {
      log_error("{}", st.error());
      (*srv)->shutdown(0);
      return 1;
    }
    loaded = true;
  } else {
    double load_s = 0;
    auto eng = cli::create_engine(o.engine, &load_s);
    if (!eng.ok()) {
      log_error("{}", eng.error());
      (*srv)->shutdown(0);
      return 1;
    }
    loaded = true;
    if (Status st = (*srv)->attach_engine(std::move(eng).value(), load_s); !st.ok()) {
      log_error("{}", st.error());
      (*srv)->shutdown(0);
      return 1;
    }
  }
  // systemd (Type=notify): started once the model serves; a stop is under way from the signal on.
  tmill::sd_notify(fmt::format("READY=1\nSTATUS=serving on {}:{}", o.server.http.host, (*srv)->port()));
  while (signals.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  tmill::sd_notify("STOPPING=1\nSTATUS=draining");
  (*srv)->shutdown(o.drain_timeout);
  return 0;
}

TM_COMMAND("serve", "OpenAI-compatible HTTP server (chat/completions, completions, models, metrics)",
           [](CLI::App& app) -> tmill::cli::CommandRun {
             auto o = std::make_shared<ServeCli>();
             auto& s = o->server;
             tmill::cli::add_engine_options(app, o->engine);
             tmill::cli::add_lora_options(app, o->engine);
             app.add_option("--lora-modules", o->lora_modules,
                            "LoRA adapters served as model names (vLLM's flag): NAME=FILE or "
                            "'{\"name\": N, \"path\": FILE, \"base_model_name\": M}' (repeatable)");
             // llama-server's -t for --threads (other commands' -t is their text)
             app.remove_option(app.get_option("--threads"));
             app.add_option("-t,--threads", o->engine.threads, "compute threads (default: all cores)");
             // --model is repeatable here: [NAME=]FILE, one engine per model.
             app.remove_option(app.get_option("--model"));
             app.add_option("-m,--model", o->model_entries,
                            "GGUF model file (default: the bundled stories260K); repeat as --model NAME=FILE to "
                            "serve several models, each under its name")
                 ->allow_extra_args(false);  // one file per --model: a following MODEL stays positional
             app.add_option("--models-file", o->models_file,
                            "YAML file of models (name, aliases, file, engine options, residency) and routers "
                            "(docs/server.md, \"The models file\")");
             app.add_option("--memory-limit", o->memory_limit,
                            "memory for the weights + KV caches of the process's models (24GiB, 80%; 0: none); "
                            "default: none with one model, 90% of RAM with several");
             app.add_option("--model-load-timeout", s.load_timeout_s,
                            "seconds a request waits for its on-demand model to load")
                 ->capture_default_str();
             app.get_option("--long-prefill-token-threshold")
                 ->description("most prompt tokens one request computes per step, leaving budget for requests that "
                               "arrive meanwhile (default for serve: half of --max-num-batched-tokens; 0: no cap)")
                 ->default_str("");
             app.add_option("--host", s.http.host, "address to listen on")->capture_default_str();
             app.add_option("--port", s.http.port, "port (0: any free port, printed in the log)")->capture_default_str();
             app.add_option("--served-model-name", o->served_names,
                            "model name in the API (default: the model file or folder name without .gguf); more "
                            "names (vLLM) are aliases the model also answers to");
             app.add_option("--api-key", s.api_keys,
                            "require 'Authorization: Bearer KEY' (repeatable; also env TOKENMILL_API_KEY)");
             app.add_option("--api-key-file", s.api_key_file,
                            "YAML file of named API keys with a role (admin, user) and limits "
                            "(max_concurrent_requests, tokens_per_minute); SIGHUP reloads it (docs/server.md, "
                            "\"API keys\")")
                 ->check(CLI::ExistingFile);
             app.add_option("--max-queued-requests", s.max_queued_requests,
                            "requests waiting to be scheduled before new ones get 429 (0: unlimited)")
                 ->capture_default_str();
             app.add_option("--request-timeout", s.request_timeout_s,
                            "seconds a request may wait in the queue before it fails with 503 (0: forever)")
                 ->capture_default_str();
             app.add_option("--max-request-time", s.max_request_time_s,
                            "seconds a whole request may take, queue to last token (a request's \"timeout\" is "
                            "capped by it and defaults to it); past it: 408, or an error event ending the stream "
                            "(0: unlimited)")
                 ->capture_default_str();
             app.add_option("--max-tokens-default", s.max_tokens_default,
                            "max_tokens for chat requests that give none: the rest of the context, capped at this "
                            "(0: no cap, as vLLM)")
                 ->capture_default_str();
             app.add_option("--max-n", s.max_n, "largest n (choices) a request may ask for")->capture_default_str();
             app.add_option("--chat-template", s.chat_template,
                            "chat template file (or template text) instead of the model's tokenizer.chat_template");
             app.add_option("--reasoning-parser", s.reasoning_parser,
                            "split <think>…</think> into reasoning_content: auto (when the chat template writes "
                            "<think>), none, or deepseek_r1, deepseek_v3, qwen3, glm45, minimax_m2, step3, seed_oss")
                 ->capture_default_str();
             app.add_option("--allowed-origins", s.allowed_origins,
                            "CORS: origins allowed to call the API from a browser (\"*\": any; a JSON list or "
                            "values); default: none, CORS off");
             app.add_option("--allowed-methods", s.allowed_methods,
                            "CORS: methods a preflight allows (default GET, POST, OPTIONS)");
             app.add_option("--allowed-headers", s.allowed_headers,
                            "CORS: request headers a preflight allows (default Authorization, Content-Type, "
                            "X-Request-Id)");
             app.add_flag("--log-requests", s.log_requests,
                          "log one line per request: its X-Request-Id, route, status and time (never prompts or keys)");
             app.add_flag("--no-ui", s.no_ui, "no web pages: GET / and /dashboard answer 404 (the API is unchanged)");
             // vLLM's command line (docs/server.md, "vLLM's flags"; serve_vllm.h) and llama-server's (serve_llama.h)
             tmill::cli::add_vllm_options(app, o->vllm);
             tmill::cli::add_llama_server_options(app, o->llama);
             app.add_option("--max-logprobs", s.max_logprobs, "largest logprobs / top_logprobs a request may ask for")
                 ->capture_default_str();
             app.add_option("--generation-config", s.generation_config,
                            "sampling defaults for fields a request omits: auto (the model file's general.sampling.* "
                            "keys, and a generation_config.json beside it), vllm (none), or a folder holding "
                            "generation_config.json")
                 ->capture_default_str();
             app.add_option("--gpu-memory-utilization", o->vllm.gpu_memory_utilization,
                            "vLLM: share of memory for weights + KV cache (KV = share x memory - weights); "
                            "--kv-cache-memory wins");
             app.add_option("--truncation", s.truncation,
                            "chat requests too long for the context: auto drops the oldest whole turns (never the "
                            "system prompt or the latest turn), disabled answers 400; a request's \"truncation\" wins")
                 ->capture_default_str();
             app.add_flag("--compress-history", s.compression.default_on,
                          "summarize a chat's oldest turns when its prompt passes --compress-threshold of the context "
                          "(per request: \"context_management\": {\"compress\": true|false})");
             app.add_option("--compress-threshold", s.compression.threshold,
                            "share of the context a chat prompt may take before its oldest turns are summarized")
                 ->check(CLI::Range(0.05, 1.0))
                 ->capture_default_str();
             app.add_option("--compress-max-tokens", s.compression.summary_max_tokens, "longest summary, in tokens")
                 ->check(CLI::Range(8, 1 << 20))
                 ->capture_default_str();
             app.add_option("--compress-prompt", s.compression.prompt, "the instruction the summary is written from");
             app.add_option("--tool-call-parser", s.tool_call_parser,
                            "how tool calls are read from the output (default: from the chat template): " +
                                tmill::tool_call_format_names());
             app.add_option("--max-body-size", o->max_body, "largest request body (413 above)")->capture_default_str();
             app.add_option("--max-stored-responses", s.max_stored_responses,
                            "Responses API: responses kept for previous_response_id and GET /v1/responses/{id}, the "
                            "least recently used dropped first (0: none kept)")
                 ->capture_default_str();
             app.add_option("--stored-responses-memory", o->stored_responses_memory,
                            "Responses API: the most memory the stored responses' JSON may take")
                 ->capture_default_str();
             app.add_option("--buffer-memory", o->buffer_memory,
                            "memory for requests and responses: bytes received, bodies and their parsing, output "
                            "buffers (503 when full; part of --memory-limit); default: an eighth of --memory-limit "
                            "(or of RAM), 16MiB (a quarter of a smaller limit) to 1GiB");
             app.add_option("--max-connections", s.http.max_connections,
                            "open connections held at once, idle ones included (more are refused; the open-file "
                            "limit is raised to fit)")
                 ->capture_default_str()
                 ->check(CLI::Range(1, 1000000));
             app.add_option("--http-threads", s.http.max_threads,
                            "requests handled at once (worker threads; a stream holds one, idle connections none)")
                 ->capture_default_str()
                 ->check(CLI::Range(1, 65536));
             app.add_option("--ssl-certfile", s.http.ssl_certfile, "TLS: the certificate chain (PEM); with --ssl-keyfile")
                 ->check(CLI::ExistingFile);
             app.add_option("--ssl-keyfile", s.http.ssl_keyfile, "TLS: the private key (PEM)")->check(CLI::ExistingFile);
             app.add_option("--ssl-ca-certs", s.http.ssl_ca_certs, "TLS: CA certificates (PEM) for client certificates")
                 ->check(CLI::ExistingFile);
             app.add_option("--ssl-cert-reqs", s.http.ssl_cert_reqs,
                            "TLS client certificates: 0 not asked, 1 optional, 2 required (needs --ssl-ca-certs)")
                 ->capture_default_str()
                 ->check(CLI::Range(0, 2));
             app.add_option("--header-timeout", s.http.header_timeout_s,
                            "seconds to receive a request line and headers (slowloris)")
                 ->capture_default_str()
                 ->check(CLI::Range(1, 3600));
             app.add_option("--write-timeout", s.http.write_timeout_s,
                            "seconds a response may wait for a client that reads nothing (then it is cut)")
                 ->capture_default_str()
                 ->check(CLI::Range(1, 3600));
             app.add_option("--keep-alive-timeout", s.http.keep_alive_timeout_s, "idle keep-alive seconds")
                 ->capture_default_str();
             app.add_option("--drain-timeout", o->drain_timeout,
                            "seconds to let in-flight requests finish on SIGINT/SIGTERM")
                 ->capture_default_str();
             return [o, &app] {
               o->threshold_given = app.count("--long-prefill-token-threshold") > 0;
               o->threads_given = app.count("--threads") > 0;
               return run(*o);
             };
           });

}  // namespace
