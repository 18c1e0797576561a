// Server lifecycle (create, attach the engine, drain) and the HTTP plumbing shared by every route:
// route table, method and body-size checks before a body is read, authentication, error bodies.
#include "server/server.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "chat/chat_template.h"
#include "core/log.h"
#include "core/mmap.h"
#include "server/auth.h"
#include "server/openai_response.h"
#include "tokenizer/tokenizer.h"

namespace tmill::server {

namespace {

struct RouteSpec {
  const char* path;
  bool prefix;         // path is a prefix ("/v1/models/ID")
  const char* methods; // allowed, for the Allow header
  bool post;
};

const RouteSpec kRoutes[] = {
    {"/v1/chat/completions", false, "POST", true}, {"/v1/completions", false, "POST", true},
    {"/tokenize", false, "POST", true},            {"/detokenize", false, "POST", true},
    {"/v1/models", false, "GET, HEAD", false},     {"/v1/models/", true, "GET, HEAD", false},
    {"/health", false, "GET, HEAD", false},        {"/version", false, "GET, HEAD", false},
    {"/metrics", false, "GET, HEAD", false},
};

const RouteSpec* find_route(const std::string& path) {
  for (const RouteSpec& r : kRoutes)
    if (r.prefix ? (path.size() > std::strlen(r.path) && path.compare(0, std::strlen(r.path), r.path) == 0)
                 : path == r.path)
      return &r;
  return nullptr;
}

// After this response the connection closes (its request body was not read, or we are draining).
void close_connection(httplib::Response& res) {
  res.set_header("Connection", "close");
  HttpServer::close_after_response();
}

bool has_body(const httplib::Request& req) {
  if (req.has_header("Transfer-Encoding")) return true;
  const std::string cl = req.get_header_value("Content-Length");
  return !cl.empty() && cl != "0";
}

std::string default_model_name(const std::string& path) {
  std::string stem = std::filesystem::path(path).filename().string();
  if (stem.size() > 5 && stem.substr(stem.size() - 5) == ".gguf") stem.resize(stem.size() - 5);
  return stem.empty() ? "model" : stem;
}

}  // namespace

Server::Server(ServerOptions options) : opts_(std::move(options)) {}

Server::~Server() { shutdown(0); }

Result<std::unique_ptr<Server>> Server::create(ServerOptions options) {
  if (options.served_model_name.empty()) options.served_model_name = default_model_name(options.model_path);
  auto s = std::unique_ptr<Server>(new Server(std::move(options)));
  s->created_unix_ = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch())
                         .count();
  s->metrics_ = std::make_unique<ServerMetrics>(s->opts_.served_model_name);
  s->http_ = std::make_unique<HttpServer>(s->opts_.http);
  s->register_routes();
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
  ctx_.priority_scheduling = engine_->config().policy == SchedulingPolicy::Priority;

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

void Server::reply_error(httplib::Response& res, const ApiError& e, const char* failure_reason) {
  res.status = e.status;
  res.set_content(error_body(e), "application/json");
  if (failure_reason) metrics_->on_failure(failure_reason);
}

void Server::reply_json(httplib::Response& res, const json& j) {
  res.status = 200;
  res.set_content(dump_json(j), "application/json");
}

bool Server::check_auth(const httplib::Request& req, httplib::Response& res) {
  if (authorized(opts_.api_keys, req.get_header_value("Authorization"))) return true;
  ApiError e;
  e.status = 401;
  e.message = req.has_header("Authorization") ? "Incorrect API key provided." : "Missing API key: send 'Authorization: Bearer <key>'.";
  e.type = "invalid_request_error";
  e.code = "invalid_api_key";
  res.set_header("WWW-Authenticate", "Bearer");
  if (has_body(req)) close_connection(res);  // the body stays unread
  reply_error(res, e, "unauthorized");
  return false;
}

bool Server::check_available(httplib::Response& res) {
  if (!draining_.load() && ready_.load()) return true;
  ApiError e;
  e.status = 503;
  e.message = draining_.load() ? "The server is shutting down." : "The model is still loading.";
  e.code = draining_.load() ? "shutting_down" : "model_loading";
  res.set_header("Retry-After", draining_.load() ? "10" : "5");
  if (draining_.load()) close_connection(res);
  reply_error(res, e, "unavailable");
  return false;
}

bool Server::read_body(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader,
                       std::string* body) {
  const size_t max = opts_.http.payload_max_bytes;
  bool too_large = false;
  const bool ok = reader([&](const char* d, size_t n) {
    if (body->size() + n > max) {
      too_large = true;
      return false;
    }
    body->append(d, n);
    return true;
  });
  if (ok && !too_large) return true;
  close_connection(res);
  ApiError e;
  if (too_large) {
    e.status = 413;
    e.message = fmt::format("The request body is larger than the server's limit of {} bytes", max);
    e.code = "request_too_large";
  } else {
    e.status = 400;
    e.message = "Could not read the request body";
  }
  reply_error(res, e, too_large ? "payload_too_large" : "invalid_request");
  return false;
}

void Server::register_routes() {
  HttpServer& h = *http_;
  // Before any body is read: unknown routes, wrong methods and oversized bodies.
  h.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    const RouteSpec* r = find_route(req.path);
    ApiError e;
    if (!r) {
      e.status = 404;
      e.message = fmt::format("Not found: {} {}", req.method, req.path);
      e.code = "not_found";
    } else if (r->post ? req.method != "POST" : (req.method != "GET" && req.method != "HEAD")) {
      e.status = 405;
      e.message = fmt::format("Method {} is not allowed for {} (allowed: {})", req.method, req.path, r->methods);
      e.code = "method_not_allowed";
      res.set_header("Allow", r->methods);
    } else if (r->post && !req.has_header("Content-Length") && !req.has_header("Transfer-Encoding")) {
      // httplib would read such a body until the connection closes.
      e.status = 411;
      e.message = "Length Required: send Content-Length or Transfer-Encoding: chunked";
    } else if (req.has_header("Content-Length")) {
      const std::string v = req.get_header_value("Content-Length");
      char* end = nullptr;
      const unsigned long long len = std::strtoull(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || v[0] == '-') {
        e.status = 400;
        e.message = "Invalid Content-Length header";
      } else if (len > opts_.http.payload_max_bytes) {
        e.status = 413;
        e.message = fmt::format("The request body ({} bytes) is larger than the server's limit of {} bytes", len,
                                opts_.http.payload_max_bytes);
        e.code = "request_too_large";
      }
    }
    if (e.status == 400 && e.message.empty()) return httplib::Server::HandlerResponse::Unhandled;
    if (has_body(req) || e.status == 411) close_connection(res);
    const char* reason = e.status == 404 ? "not_found"
                         : e.status == 405 ? "method_not_allowed"
                         : e.status == 413 ? "payload_too_large"
                                           : "invalid_request";
    reply_error(res, e, reason);
    return httplib::Server::HandlerResponse::Handled;
  });

  // httplib's own errors (malformed request line or headers, URI too long): JSON bodies too.
  h.set_error_handler(httplib::Server::HandlerWithResponse([this](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;  // a route already answered
    ApiError e;
    e.status = res.status;
    e.message = res.status == 414 ? "Request URI too long"
                : res.status == 404 ? fmt::format("Not found: {} {}", req.method, req.path)
                                    : fmt::format("Malformed HTTP request (status {})", res.status);
    res.set_content(error_body(e), "application/json");
    metrics_->on_failure(res.status >= 500 ? "engine_error" : "invalid_request");
    return httplib::Server::HandlerResponse::Handled;
  }));
  h.set_exception_handler([this](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "unknown exception";
    try {
      if (ep) std::rethrow_exception(ep);
    } catch (const std::exception& ex) {
      what = ex.what();
    } catch (...) {
    }
    log_error("http handler exception: {}", what);
    ApiError e;
    e.status = 500;
    e.message = "Internal server error: " + what;
    reply_error(res, e, "engine_error");
  });

  using Reader = httplib::ContentReader;
  h.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res, const Reader& rd) {
    handle_generate(req, res, rd, ApiKind::Chat);
  });
  h.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res, const Reader& rd) {
    handle_generate(req, res, rd, ApiKind::Completion);
  });
  h.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res, const Reader& rd) {
    handle_tokenize(req, res, rd);
  });
  h.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res, const Reader& rd) {
    handle_detokenize(req, res, rd);
  });
  h.Get("/v1/models", [this](const httplib::Request& req, httplib::Response& res) {
    if (!check_auth(req, res) || !check_available(res)) return;
    reply_json(res, models_json());
  });
  h.Get("/v1/models/(.+)", [this](const httplib::Request& req, httplib::Response& res) {
    if (!check_auth(req, res) || !check_available(res)) return;
    const std::string id = req.matches[1];
    if (id != opts_.served_model_name) {
      ApiError e;
      e.status = 404;
      e.message = fmt::format("The model `{}` does not exist.", id);
      e.param = "model";
      e.code = "model_not_found";
      reply_error(res, e, "not_found");
      return;
    }
    reply_json(res, models_json()["data"][0]);
  });
  // Open even when API keys are set (load balancers and Prometheus need them; they reveal no data).
  h.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
    if (!check_available(res)) return;
    res.status = 200;
  });
  h.Get("/version", [this](const httplib::Request&, httplib::Response& res) {
    reply_json(res, json{{"version", opts_.version}});
  });
  h.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.status = 200;
    res.set_content(metrics_->render(), "text/plain; version=0.0.4; charset=utf-8");
  });
}

json Server::models_json() const {
  json m;
  m["id"] = opts_.served_model_name;
  m["object"] = "model";
  m["created"] = created_unix_;
  m["owned_by"] = "tokenmill";
  m["root"] = opts_.model_path;
  m["parent"] = nullptr;
  m["max_model_len"] = ctx_.max_model_len;
  json list;
  list["object"] = "list";
  list["data"] = json::array({m});
  return list;
}

}  // namespace tmill::server
