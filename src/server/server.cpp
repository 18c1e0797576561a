// Server lifecycle: create (listen at once), attach the engine (request context, chat template,
// metrics), drain and shut down. The routes are in routes*.cpp.
#include "server/server.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "chat/chat_template.h"
#include "chat/tool_calls.h"
#include "core/log.h"
#include "server/generation_config.h"
#include "core/mmap.h"
#include "server/http_server.h"
#include "server/openai_response.h"
#include "tokenizer/tokenizer.h"

namespace tmill::server {

std::string default_model_name(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();  // a folder given as DIR/
  std::string stem = std::filesystem::path(p).filename().string();
  if (stem.size() > 5 && stem.substr(stem.size() - 5) == ".gguf") stem.resize(stem.size() - 5);
  // a split GGUF's shard: NAME-00001-of-00003 -> NAME
  if (stem.size() > 15 && stem[stem.size() - 15] == '-' && stem.compare(stem.size() - 9, 4, "-of-") == 0) {
    bool digits = true;
    for (size_t i = stem.size() - 14; i < stem.size(); ++i)
      if (i < stem.size() - 9 || i >= stem.size() - 5) digits = digits && stem[i] >= '0' && stem[i] <= '9';
    if (digits) stem.resize(stem.size() - 15);
  }
  return stem.empty() ? "model" : stem;
}

Server::Server(ServerOptions options) : opts_(std::move(options)) {}

Server::~Server() { shutdown(0); }

int Server::port() const { return http_->port(); }

Result<std::unique_ptr<Server>> Server::create(ServerOptions options) {
  if (options.served_model_name.empty()) options.served_model_name = default_model_name(options.model_path);
  if (options.models.empty()) {
    ModelSpec one;
    one.name = options.served_model_name;
    one.path = options.model_path;
    one.aliases = options.served_model_aliases;
    options.models.push_back(std::move(one));
  }
  options.served_model_name = options.models[0].name;
  for (size_t i = 0; i < options.models.size(); ++i)
    for (size_t j = 0; j < i; ++j) {
      const ModelSpec& a = options.models[i];
      const ModelSpec& b = options.models[j];
      auto names = [](const ModelSpec& m) {
        std::vector<std::string> n = m.aliases;
        n.push_back(m.name);
        return n;
      };
      for (const auto& x : names(a))
        for (const auto& y : names(b))
          if (x == y) return Error{fmt::format("the model name '{}' is given to two models ({} and {})", x, b.path, a.path)};
    }
  auto model_index = [&options](const std::string& n) -> std::optional<size_t> {
    for (size_t i = 0; i < options.models.size(); ++i) {
      const ModelSpec& m = options.models[i];
      if (m.name == n || std::find(m.aliases.begin(), m.aliases.end(), n) != m.aliases.end()) return i;
    }
    return std::nullopt;
  };
  // LoRA adapters: the command line's onto their base models; every adapter name is unique among
  // models, aliases and adapters.
  for (AdapterSpec& a : options.loras) {
    const auto base = a.base.empty() ? std::optional<size_t>(0) : model_index(a.base);
    if (!base) return Error{fmt::format("LoRA adapter '{}': no model is named '{}' (base_model_name)", a.name, a.base)};
    options.models[*base].loras.push_back(std::move(a));
  }
  options.loras.clear();
  {
    std::vector<std::string> seen;
    for (const ModelSpec& m : options.models)
      for (const AdapterSpec& a : m.loras) {
        if (a.name.empty()) return Error{fmt::format("a LoRA adapter ({}) has no name", a.path)};
        if (model_index(a.name)) return Error{fmt::format("the LoRA adapter name '{}' is a model's name", a.name)};
        if (std::find(seen.begin(), seen.end(), a.name) != seen.end())
          return Error{fmt::format("two LoRA adapters are named '{}'", a.name)};
        seen.push_back(a.name);
      }
  }
  auto model_exists = [&](const std::string& n) {
    if (model_index(n)) return true;
    for (const ModelSpec& m : options.models)
      for (const AdapterSpec& a : m.loras)
        if (a.name == n) return true;  // a router's chain may name an adapter
    return false;
  };
  for (size_t i = 0; i < options.routers.size(); ++i) {
    RouterSpec& r = options.routers[i];
    if (model_exists(r.name)) return Error{fmt::format("the router '{}' has a model's name", r.name)};
    for (size_t j = 0; j < i; ++j)
      if (options.routers[j].name == r.name) return Error{fmt::format("two routers are named '{}'", r.name)};
    TM_TRY(prepare_router(r, model_exists));
  }
  if (auto r = reasoning_config(options.reasoning_parser); !r.ok()) return Error{"--reasoning-parser: " + r.error()};
  auto keys = KeyStore::create(options.api_keys, options.api_key_file);
  if (!keys.ok()) return Error{keys.error()};
  auto s = std::unique_ptr<Server>(new Server(std::move(options)));
  s->keys_ = std::move(keys).value();
  s->responses_ = std::make_unique<ResponseStore>(s->opts_.max_stored_responses, s->opts_.stored_responses_memory);
  if (s->keys_->has_file()) {
    std::string names;
    for (const auto& x : s->keys_->names()) names += (names.empty() ? "" : ", ") + x;
    log_info("API keys: {} key(s) from {} ({}); SIGHUP reloads the file", s->keys_->size(), s->keys_->file(), names);
  }
  s->created_unix_ = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  // One set of series per model; a single model's output is the same as before (one model_name).
  for (const ModelSpec& m : s->opts_.models)
    s->model_metrics_.push_back(std::make_unique<ServerMetrics>(m.name, &s->metrics_registry_));
  s->metrics_ = s->model_metrics_[0].get();
  Server* self = s.get();
  s->models_ = std::make_unique<ModelRegistry>(
      s->opts_.models, s->opts_.memory_limit,
      [self](size_t slot, const ModelSpec& spec, double* load_s) -> Result<std::shared_ptr<LoadedModel>> {
        if (!self->opts_.engine_loader) return Error{"the server has no model loader"};
        log_info("loading model {} from {}", spec.name, spec.path);
        TM_ASSIGN_OR_RETURN(auto engine, self->opts_.engine_loader(spec, load_s));
        return self->make_loaded(slot, std::move(engine), *load_s);
      });
  // The budget's figures at scrape time (model residency: tokenmill:model_loaded per model).
  s->metrics_registry_.add_collector([self] {
    if (!self->models_) return;
    auto& r = self->metrics_registry_;
    r.gauge("tokenmill:memory_limit_bytes", "The memory budget for resident models (--memory-limit; 0: none).")
        .set(static_cast<double>(self->models_->memory_limit()));
    r.gauge("tokenmill:models_memory_bytes",
            "Memory counted against the budget: each resident model's KV cache and unmapped weights, each weight "
            "file once.")
        .set(static_cast<double>(self->models_->used_bytes()));
    r.counter("tokenmill:model_loads_total", "Models loaded (at start, on demand, by the admin routes).")
        .set(static_cast<double>(self->models_->loads()));
    r.counter("tokenmill:model_unloads_total", "Models unloaded (idle, to make room, by the admin routes).")
        .set(static_cast<double>(self->models_->unloads()));
    if (self->responses_) {
      r.gauge("tokenmill:stored_responses", "Responses API responses kept for previous_response_id (--max-stored-responses).")
          .set(static_cast<double>(self->responses_->size()));
      r.gauge("tokenmill:stored_responses_bytes",
              "The stored responses' JSON bytes (bounded by --stored-responses-memory).")
          .set(static_cast<double>(self->responses_->bytes()));
    }
    if (!self->http_) return;
    const MemoryBudget& b = self->http_->memory();
    r.gauge("tokenmill:buffer_memory_bytes",
            "Memory held for requests and responses: bytes received, request bodies and their parsing, output "
            "buffers (counted, not measured).")
        .set(static_cast<double>(b.used()));
    r.gauge("tokenmill:buffer_memory_limit_bytes", "The budget of tokenmill:buffer_memory_bytes (--buffer-memory).")
        .set(static_cast<double>(b.limit()));
    r.gauge("tokenmill:buffer_memory_peak_bytes", "The highest tokenmill:buffer_memory_bytes since the start.")
        .set(static_cast<double>(b.peak()));
    r.counter("tokenmill:buffer_memory_refusals_total",
              "Requests shed (503, or a connection closed while sending a large head) because the request memory "
              "was full, and requests larger than it (413).")
        .set(static_cast<double>(b.refused()));
  });
  s->http_ = std::make_unique<HttpServer>(s->opts_.http, *s);
  TM_ASSIGN_OR_RETURN(int port, s->http_->bind());
  s->http_->start();
  std::string names;
  for (const ModelSpec& m : s->opts_.models) names += (names.empty() ? "" : ", ") + m.name;
  log_info("listening on {}://{}:{} (model {} loading; /health answers 503 until it is ready)", s->scheme(),
           s->opts_.http.host, port, names);
  return s;
}

Result<ServerContext> Server::build_context(const ModelSpec& spec, Engine& engine) const {
  ServerContext ctx;
  ctx.served_model_name = spec.name;
  ctx.tokenizer = engine.tokenizer();
  ctx.max_model_len = engine.max_model_len();
  ctx.n_vocab = engine.model_info().n_vocab;  // valid for both the model and the tokenizer
  ctx.max_tokens_default = opts_.max_tokens_default;
  ctx.max_n = opts_.max_n;
  ctx.max_logprobs = opts_.max_logprobs;
  ctx.queue_timeout_s = opts_.request_timeout_s;
  ctx.max_request_time_s = opts_.max_request_time_s;
  ctx.priority_scheduling = engine.config().policy == SchedulingPolicy::Priority;
  ctx.context_shift = engine.config().context_shift;
  ctx.check = [e = &engine](const GenerateRequest& r) { return e->check(r); };  // compiles constraints
  TM_ASSIGN_OR_RETURN(ctx.defaults, load_generation_defaults(opts_.generation_config, spec.path, engine.model_info()));
  if (!ctx.defaults.empty())
    log_info("model {}: sampling defaults from the model (--generation-config {}): {}", spec.name,
             opts_.generation_config, describe(ctx.defaults));
  if (const GenerationDefaults& o = opts_.sampling_overrides; !o.empty()) {  // over the model's
    if (o.temperature) ctx.defaults.temperature = o.temperature;
    if (o.top_p) ctx.defaults.top_p = o.top_p;
    if (o.min_p) ctx.defaults.min_p = o.min_p;
    if (o.repetition_penalty) ctx.defaults.repetition_penalty = o.repetition_penalty;
    if (o.top_k) ctx.defaults.top_k = o.top_k;
    if (o.max_tokens) ctx.defaults.max_tokens = o.max_tokens;
    log_info("model {}: sampling defaults from the command line: {}", spec.name, describe(o));
  }

  // Chat template: the model's chat_template (models file) or --chat-template (a file, else the text
  // itself), else the model's own, else ChatML.
  const std::string& given = spec.chat_template.empty() ? opts_.chat_template : spec.chat_template;
  const char* what = spec.chat_template.empty() ? "--chat-template" : "chat_template";
  std::string source;
  if (!given.empty()) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(given, ec)) {
      auto text = read_file(given);
      if (!text.ok()) return Error{fmt::format("{}: {}", what, text.error())};
      source = std::move(text).value();
      log_info("chat template: {}", given);
    } else if (given.find("{{") != std::string::npos || given.find("{%") != std::string::npos) {
      source = given;
      log_info("chat template: given inline");
    } else {
      return Error{fmt::format("{}: {} is neither a file nor a template", what, given)};
    }
    auto t = ChatTemplate::parse(source);
    if (!t.ok()) return Error{fmt::format("{}: {}", what, t.error())};
    ctx.chat_template = std::make_shared<const ChatTemplate>(std::move(t).value());
  } else {
    // chat_template_for_model logs a warning when it falls back to ChatML.
    const std::string model_tmpl = ctx.tokenizer->chat_template().value_or("");
    if (!model_tmpl.empty()) log_info("chat template: the model's tokenizer.chat_template");
    auto t = chat_template_for_model(model_tmpl, spec.name);
    if (!t.ok()) {
      log_warn("the model's chat template does not parse ({}); /v1/chat/completions is disabled", t.error());
    } else {
      ctx.chat_template = std::make_shared<const ChatTemplate>(std::move(t).value());
    }
  }

  if (opts_.truncation != "auto" && opts_.truncation != "disabled")
    return Error{"--truncation: '" + opts_.truncation + "' is not one of auto, disabled"};
  ctx.truncation_auto = opts_.truncation == "auto";

  // Tool calls: --tool-call-parser, else the chat template's format (checked per request for a
  // request's own chat_template).
  if (!opts_.tool_call_parser.empty()) {
    ctx.tool_call_parser = tool_call_format_from_name(opts_.tool_call_parser);
    if (!ctx.tool_call_parser)
      return Error{"--tool-call-parser: unknown parser '" + opts_.tool_call_parser + "' (one of " +
                   tool_call_format_names() + ")"};
  }
  if (ctx.chat_template)
    log_info("tool-call parser: {}", tool_call_format_name(ctx.tool_call_parser.value_or(
                                         detect_tool_call_format(ctx.chat_template->source()))));

  auto reasoning = reasoning_config(opts_.reasoning_parser);
  if (!reasoning.ok()) return Error{"--reasoning-parser: " + reasoning.error()};
  ctx.reasoning = std::move(reasoning).value();
  auto shown = [](std::string m) {  // (Gemma 4's start marker ends in a newline)
    for (size_t i = 0; (i = m.find('\n', i)) != std::string::npos;) m.replace(i, 1, "\\n");
    return m;
  };
  if (ctx.reasoning.spec)
    log_info("reasoning parser: {} ({}…{})", ctx.reasoning.spec->name, shown(ctx.reasoning.spec->start),
             shown(ctx.reasoning.spec->end));
  else if (auto detected = ctx.reasoning.auto_detect && ctx.chat_template
                               ? reasoning_parser_for_template(ctx.chat_template->source())
                               : std::nullopt)
    log_info("reasoning parser: detected from the chat template ({}…{})", shown(detected->start), shown(detected->end));
  return ctx;
}

Result<std::shared_ptr<LoadedModel>> Server::make_loaded(size_t slot, std::unique_ptr<Engine> engine,
                                                         double load_s) {
  const ModelSpec& spec = opts_.models[slot];
  TM_ASSIGN_OR_RETURN(ServerContext ctx, build_context(spec, *engine));
  auto m = std::make_shared<LoadedModel>();
  m->ctx = std::move(ctx);
  const MemoryPlan& plan = engine->memory_plan();
  // Anonymous memory: the KV cache and the weights the engine holds itself (packed layouts, huge-page
  // copies, norms); the weights it reads in place from the file mapping are counted once per file
  // (models of one file share those pages). An engine that does not say (0) counts all as its own.
  const uint64_t mapped = std::min(plan.weight_mapped_bytes, plan.weight_bytes);
  m->anon_bytes = plan.kv_bytes + (plan.weight_bytes - mapped);
  if (plan.device == "cuda") m->anon_bytes = 0;  // weights and KV cache are in GPU memory, not the host's
  m->mapped_bytes = mapped;
  // The model's LoRA adapters (those of the start and those loaded at run time).
  for (const AdapterSpec& a : models_->adapters(slot)) {
    auto info = engine->load_lora(a.name, a.path);
    if (!info.ok()) {
      // A configured adapter that fails fails the model; one added at run time while the model was
      // unloaded (only its file's existence was checked) is dropped instead, with a warning.
      const bool configured = std::any_of(spec.loras.begin(), spec.loras.end(),
                                          [&](const AdapterSpec& c) { return c.name == a.name && c.path == a.path; });
      if (configured) return Error{fmt::format("LoRA adapter '{}' ({}): {}", a.name, a.path, info.error())};
      log_warn("model {}: LoRA adapter '{}' ({}) dropped: {}", spec.name, a.name, a.path, info.error());
      models_->remove_adapter(a.name);
      continue;
    }
    log_info("model {}: LoRA adapter '{}' from {} (rank {}, {} tensors)", spec.name, a.name, a.path, info->rank,
             info->n_tensors);
  }
  for (const LoraInfo& l : engine->loras()) m->anon_bytes += l.bytes;  // adapters loaded with the model
  ServerMetrics* metrics = model_metrics_[slot].get();
  if (!engine->loras().empty()) metrics->enable_lora();
  metrics->attach_engine(engine.get(), load_s);
  engine->set_observer(metrics);
  engine->start();
  m->engine = std::move(engine);
  m->on_unload = [metrics] { metrics->detach_engine(); };
  log_info("model {} ready (max_model_len {})", spec.name, m->ctx.max_model_len);
  return m;
}

Status Server::attach_engine(std::unique_ptr<Engine> engine, double load_seconds) {
  TM_ASSIGN_OR_RETURN(auto m, make_loaded(0, std::move(engine), load_seconds));
  models_->attach(0, std::move(m));
  ready_.store(true);
  log_info("ready: serving {} (max_model_len {}) on {}://{}:{}", opts_.served_model_name,
           models_->view(0).max_model_len, scheme(), opts_.http.host, http_->port());
  return {};
}

Status Server::load_pinned_models() {
  for (size_t i = 0; i < models_->size(); ++i) {
    if (!opts_.models[i].pinned) continue;
    if (Status st = models_->load(i); !st.ok()) return Error{fmt::format("model {}: {}", opts_.models[i].name, st.error())};
  }
  ready_.store(true);
  std::string names;
  for (size_t i = 0; i < models_->size(); ++i)
    names += fmt::format("{}{}{}", names.empty() ? "" : ", ", opts_.models[i].name,
                         opts_.models[i].pinned ? "" : " (on demand)");
  log_info("ready: serving {} on {}://{}:{}", names, scheme(), opts_.http.host, http_->port());
  return {};
}

void Server::shutdown(double drain_timeout_s) {
  std::lock_guard<std::mutex> lock(shutdown_mu_);
  if (shut_down_) return;
  shut_down_ = true;
  draining_.store(true);
  http_->stop_accepting();
  const auto t0 = std::chrono::steady_clock::now();
  const auto deadline = t0 + std::chrono::duration<double>(drain_timeout_s);
  if (inflight_.load() > 0) log_info("draining {} in-flight request(s) (up to {:.0f} s)", inflight_.load(), drain_timeout_s);
  while (inflight_.load() > 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (inflight_.load() > 0) {
    log_warn("drain timeout: aborting {} request(s)", inflight_.load());
    force_stop_.store(true);
    const auto hard = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (inflight_.load() > 0 && std::chrono::steady_clock::now() < hard)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  http_->shutdown();
  models_.reset();  // stops every engine
  log_info("server stopped after {:.2f} s of draining",
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

}  // namespace tmill::server
