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
#include "core/mmap.h"
#include "server/http_server.h"
#include "server/openai_response.h"
#include "tokenizer/tokenizer.h"

namespace tmill::server {

namespace {

std::string default_model_name(const std::string& path) {
  std::string stem = std::filesystem::path(path).filename().string();
  if (stem.size() > 5 && stem.substr(stem.size() - 5) == ".gguf") stem.resize(stem.size() - 5);
  return stem.empty() ? "model" : stem;
}

}  // namespace

Server::Server(ServerOptions options) : opts_(std::move(options)) {}

Server::~Server() { shutdown(0); }

int Server::port() const { return http_->port(); }

Result<std::unique_ptr<Server>> Server::create(ServerOptions options) {
  if (options.served_model_name.empty()) options.served_model_name = default_model_name(options.model_path);
  if (auto r = reasoning_config(options.reasoning_parser); !r.ok()) return Error{"--reasoning-parser: " + r.error()};
  auto s = std::unique_ptr<Server>(new Server(std::move(options)));
  s->created_unix_ = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  s->metrics_ = std::make_unique<ServerMetrics>(s->opts_.served_model_name);
  s->http_ = std::make_unique<HttpServer>(s->opts_.http, *s);
  TM_ASSIGN_OR_RETURN(int port, s->http_->bind());
  s->http_->start();
  log_info("listening on http://{}:{} (model {} loading; /health answers 503 until it is ready)", s->opts_.http.host,
           port, s->opts_.served_model_name);
  return s;
}

Status Server::attach_engine(std::unique_ptr<Engine> engine, double load_seconds) {
  engine_ = std::move(engine);
  ctx_.served_model_name = opts_.served_model_name;
  ctx_.tokenizer = engine_->tokenizer();
  ctx_.max_model_len = engine_->max_model_len();
  ctx_.n_vocab = engine_->model_info().n_vocab;  // valid for both the model and the tokenizer
  ctx_.max_tokens_default = opts_.max_tokens_default;
  ctx_.max_n = opts_.max_n;
  ctx_.queue_timeout_s = opts_.request_timeout_s;
  ctx_.max_request_time_s = opts_.max_request_time_s;
  ctx_.priority_scheduling = engine_->config().policy == SchedulingPolicy::Priority;
  ctx_.check = [e = engine_.get()](const GenerateRequest& r) { return e->check(r); };  // compiles constraints

  // Chat template: --chat-template (a file, else the text itself), else the model's, else ChatML.
  std::string source;
  if (!opts_.chat_template.empty()) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(opts_.chat_template, ec)) {
      auto text = read_file(opts_.chat_template);
      if (!text.ok()) return Error{"--chat-template: " + text.error()};
      source = std::move(text).value();
      log_info("chat template: {}", opts_.chat_template);
    } else if (opts_.chat_template.find("{{") != std::string::npos || opts_.chat_template.find("{%") != std::string::npos) {
      source = opts_.chat_template;
      log_info("chat template: given inline on the command line");
    } else {
      return Error{"--chat-template: " + opts_.chat_template + " is neither a file nor a template"};
    }
    auto t = ChatTemplate::parse(source);
    if (!t.ok()) return Error{"--chat-template: " + t.error()};
    ctx_.chat_template = std::make_shared<const ChatTemplate>(std::move(t).value());
  } else {
    // chat_template_for_model logs a warning when it falls back to ChatML.
    const std::string model_tmpl = ctx_.tokenizer->chat_template().value_or("");
    if (!model_tmpl.empty()) log_info("chat template: the model's tokenizer.chat_template");
    auto t = chat_template_for_model(model_tmpl, opts_.served_model_name);
    if (!t.ok()) {
      log_warn("the model's chat template does not parse ({}); /v1/chat/completions is disabled", t.error());
    } else {
      ctx_.chat_template = std::make_shared<const ChatTemplate>(std::move(t).value());
    }
  }

  if (opts_.truncation != "auto" && opts_.truncation != "disabled")
    return Error{"--truncation: '" + opts_.truncation + "' is not one of auto, disabled"};
  ctx_.truncation_auto = opts_.truncation == "auto";

  // Tool calls: --tool-call-parser, else the chat template's format (checked per request for a
  // request's own chat_template).
  if (!opts_.tool_call_parser.empty()) {
    ctx_.tool_call_parser = tool_call_format_from_name(opts_.tool_call_parser);
    if (!ctx_.tool_call_parser)
      return Error{"--tool-call-parser: unknown parser '" + opts_.tool_call_parser + "' (one of " +
                   tool_call_format_names() + ")"};
  }
  if (ctx_.chat_template)
    log_info("tool-call parser: {}", tool_call_format_name(ctx_.tool_call_parser.value_or(
                                         detect_tool_call_format(ctx_.chat_template->source()))));

  auto reasoning = reasoning_config(opts_.reasoning_parser);
  if (!reasoning.ok()) return Error{"--reasoning-parser: " + reasoning.error()};
  ctx_.reasoning = std::move(reasoning).value();
  if (ctx_.reasoning.spec)
    log_info("reasoning parser: {} ({}…{})", ctx_.reasoning.spec->name, ctx_.reasoning.spec->start, ctx_.reasoning.spec->end);
  else if (ctx_.reasoning.auto_detect && ctx_.chat_template && reasoning_parser_for_template(ctx_.chat_template->source()))
    log_info("reasoning parser: detected from the chat template (<think>…</think>)");

  metrics_->attach_engine(engine_.get(), load_seconds);
  engine_->set_observer(metrics_.get());
  engine_->start();
  ready_.store(true);
  log_info("ready: serving {} (max_model_len {}) on http://{}:{}", opts_.served_model_name, ctx_.max_model_len,
           opts_.http.host, http_->port());
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
  if (engine_) engine_->stop();
  log_info("server stopped after {:.2f} s of draining",
           std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

}  // namespace tmill::server
