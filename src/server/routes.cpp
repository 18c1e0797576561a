// The route table (the only list of routes), what happens before a handler runs (unknown route,
// wrong method, body length, credentials, readiness), the error bodies, and the small routes:
// /v1/models, /health, /version, /metrics. Transport-neutral: server/http.h only.
#include <chrono>
#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

#include "core/log.h"
#include "core/strings.h"
#include "server/openai_response.h"
#include "server/request_fields.h"
#include "server/server.h"

namespace tmill::server {

namespace {

// X-Request-Id: the client's (visible ASCII, at most 128 bytes), else a fresh "req-<32 hex>"; echoed
// on every response and carried in error bodies as error.request_id, so a client's report and the
// server's side can be matched.
std::string request_id_of(const HttpRequest& req) {
  if (const std::string* h = req.header("X-Request-Id")) {
    bool ok = !h->empty() && h->size() <= 128;
    for (char c : *h) ok = ok && c >= 0x21 && c <= 0x7E;
    if (ok) return *h;
  }
  return random_id("req-");
}

std::string join_or(const std::vector<std::string>& v, const char* fallback) {
  if (v.empty() || (v.size() == 1 && v[0] == "*")) return fallback;
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : ", ") + x;
  return out;
}


bool has_body(const HttpRequest& req) {
  if (req.has_header("Transfer-Encoding")) return true;
  const std::string cl = req.header_or("Content-Length");
  return !cl.empty() && cl != "0";
}

const char* failure_reason(int status) {
  return status == 404 ? "not_found" : status == 405 ? "method_not_allowed" : status == 413 ? "payload_too_large"
                                                                                           : "invalid_request";
}

}  // namespace


// /health, /version and /metrics are open even when API keys are set (load balancers and
// Prometheus need them; they reveal no data). The admin routes need an admin key once a key file
// is in use (every --api-key key is an admin key).
const Server::Route* Server::find_route(const std::string& path) {
  constexpr Access kOpen = Access::Open, kKey = Access::Key, kAdmin = Access::Admin;
  static const Route kRoutes[] = {
    {"/v1/chat/completions", false, true, kKey, true, true, &Server::route_chat},
    {"/chat/completions", false, true, kKey, true, true, &Server::route_chat},  // llama-server's spelling
    {"/v1/messages", false, true, kKey, true, true, &Server::route_messages},  // Anthropic's (routes_anthropic.cpp)
    {"/v1/messages/count_tokens", false, true, kKey, true, false, &Server::route_count_tokens},
    {"/v1/responses", false, true, kKey, true, true, &Server::route_responses},  // OpenAI's Responses API
    {"/responses", false, true, kKey, true, true, &Server::route_responses},
    {"/v1/responses/", true, false, kKey, false, false, &Server::route_stored_response, true},  // GET, DELETE
    {"/responses/", true, false, kKey, false, false, &Server::route_stored_response, true},
    // Ollama's API (routes_ollama.cpp).
    {"/api/chat", false, true, kKey, true, true, &Server::route_ollama_chat},
    {"/api/generate", false, true, kKey, true, true, &Server::route_ollama_generate},
    {"/api/embed", false, true, kKey, true, true, &Server::route_ollama_embed},
    {"/api/embeddings", false, true, kKey, true, true, &Server::route_ollama_embed},
    {"/api/show", false, true, kKey, true, false, &Server::route_ollama_show},
    {"/api/tags", false, false, kKey, true, false, &Server::route_ollama_tags},
    {"/api/ps", false, false, kKey, true, false, &Server::route_ollama_ps},
    {"/api/version", false, false, kOpen, false, false, &Server::route_ollama_version},
    {"/v1/completions", false, true, kKey, true, true, &Server::route_completions},
    // llama-server's own API (routes_llama.cpp).
    {"/completion", false, true, kKey, true, true, &Server::route_native_completion},
    {"/completions", false, true, kKey, true, true, &Server::route_native_completion},
    {"/infill", false, true, kKey, true, true, &Server::route_infill},
    {"/embedding", false, true, kKey, true, true, &Server::route_native_embeddings},
    {"/embeddings", false, true, kKey, true, true, &Server::route_native_embeddings},
    {"/apply-template", false, true, kKey, true, false, &Server::route_apply_template},
    {"/props", false, false, kKey, true, false, &Server::route_props},
    {"/slots", false, false, kKey, true, false, &Server::route_slots},
    {"/slots/", true, true, kKey, true, false, &Server::route_slot_action},
    {"/v1/map_reduce", false, true, kKey, true, true, &Server::route_map_reduce},  // routes_map_reduce.cpp
    {"/v1/embeddings", false, true, kKey, true, true, &Server::route_embeddings},
    {"/v1/rerank", false, true, kKey, true, true, &Server::route_rerank},
    {"/rerank", false, true, kKey, true, true, &Server::route_rerank},
    {"/reranking", false, true, kKey, true, true, &Server::route_rerank},
    {"/v1/reranking", false, true, kKey, true, true, &Server::route_rerank},
    {"/v2/rerank", false, true, kKey, true, true, &Server::route_rerank},
    {"/v1/score", false, true, kKey, true, true, &Server::route_score},
    {"/tokenize", false, true, kKey, true, false, &Server::route_tokenize},
    {"/detokenize", false, true, kKey, true, false, &Server::route_detokenize},
    {"/v1/models", false, false, kKey, true, false, &Server::route_models},
    {"/models", false, false, kKey, true, false, &Server::route_models},  // llama-server's spelling
    {"/v1/models/", true, false, kKey, true, false, &Server::route_model},
    // Admin (llama-server's router paths), behind the API key: {"model": NAME}.
    {"/models/load", false, true, kAdmin, true, false, &Server::route_admin_load},
    {"/models/unload", false, true, kAdmin, true, false, &Server::route_admin_unload},
    {"/models/reload", false, true, kAdmin, true, false, &Server::route_admin_reload},
    // vLLM's run-time LoRA routes (routes_lora.cpp), behind the API key.
    {"/v1/load_lora_adapter", false, true, kAdmin, true, false, &Server::route_load_lora},
    {"/v1/unload_lora_adapter", false, true, kAdmin, true, false, &Server::route_unload_lora},
    {"/lora-adapters", false, false, kKey, false, false, &Server::route_lora_adapters, false, true},  // llama-server's
    {"/health", false, false, kOpen, true, false, &Server::route_health},
    {"/v1/health", false, false, kOpen, true, false, &Server::route_health},
    {"/version", false, false, kOpen, false, false, &Server::route_version},
    {"/metrics", false, false, kOpen, false, false, &Server::route_metrics},
    {"/", false, false, kOpen, false, false, &Server::route_ui},           // the chat page (its API calls need the key)
    {"/dashboard", false, false, kOpen, false, false, &Server::route_ui},  // the dashboard page
    {"/ui/info", false, false, kKey, true, false, &Server::route_ui_info},
    {"/ui/", true, false, kOpen, false, false, &Server::route_ui},         // the pages' scripts and style
  };
  for (const Route& r : kRoutes)
    if (r.prefix ? (path.size() > std::strlen(r.path) && path.compare(0, std::strlen(r.path), r.path) == 0)
                 : path == r.path)
      return &r;
  return nullptr;
}

HttpResponse Server::reply_error(const ApiError& e, const char* reason) { return reply_error(e, reason, metrics_); }

HttpResponse Server::reply_error(const ApiError& e, const char* reason, ServerMetrics* metrics) {
  HttpResponse res;
  res.status = e.status;
  res.content_type = "application/json";
  res.body = error_body(e);
  if (reason) metrics->on_failure(reason);
  return res;
}

HttpResponse Server::reply_json(const json& j, int status) {
  HttpResponse res;
  res.status = status;
  res.content_type = "application/json";
  res.body = dump_json(j);
  return res;
}

std::optional<HttpResponse> Server::check_available() {
  if (!draining_.load() && ready_.load()) return std::nullopt;
  ApiError e;
  e.status = 503;
  e.message = draining_.load() ? "The server is shutting down." : "The model is still loading.";
  e.code = draining_.load() ? "shutting_down" : "model_loading";
  HttpResponse res = reply_error(e, "unavailable");
  res.set_header("Retry-After", draining_.load() ? "10" : "5");
  res.close_connection = draining_.load();
  return res;
}

bool Server::origin_allowed(const std::string& origin) const {
  for (const auto& o : opts_.allowed_origins)
    if (o == "*" || o == origin) return true;
  return false;
}

HttpResponse Server::finish(HttpResponse res, const HttpRequest& req, const std::string& id) const {
  res.set_header("X-Request-Id", id);
  if (res.status >= 400 && !res.streaming() && res.content_type == "application/json") {
    json j = json::parse(res.body, nullptr, false);
    if (j.is_object() && j.contains("error") && j["error"].is_object()) {
      j["error"]["request_id"] = id;
      res.body = dump_json(j);
    }
  }
  if (const std::string* origin = req.header("Origin"); origin && origin_allowed(*origin)) {
    const bool any = opts_.allowed_origins.size() == 1 && opts_.allowed_origins[0] == "*";
    res.set_header("Access-Control-Allow-Origin", any ? "*" : *origin);
    if (!any) res.set_header("Vary", "Origin");
    res.set_header("Access-Control-Expose-Headers",
                   "X-Request-Id, Retry-After, x-ratelimit-limit-requests, x-ratelimit-remaining-requests, "
                   "x-ratelimit-limit-tokens, x-ratelimit-remaining-tokens, x-ratelimit-reset-tokens");
  }
  return res;
}

// A CORS preflight (OPTIONS with Origin and Access-Control-Request-Method) when CORS is on: 204 with
// what may be sent, or 403 for an origin not allowed.
std::optional<HttpResponse> Server::cors_preflight(const HttpRequest& req) const {
  if (opts_.allowed_origins.empty() || req.method != "OPTIONS") return std::nullopt;
  const std::string* origin = req.header("Origin");
  if (!origin || !req.has_header("Access-Control-Request-Method")) return std::nullopt;
  HttpResponse res;
  if (!origin_allowed(*origin)) {
    ApiError e;
    e.status = 403;
    e.message = fmt::format("Origin '{}' is not allowed", *origin);
    e.code = "origin_not_allowed";
    res.status = e.status;
    res.content_type = "application/json";
    res.body = error_body(e);
    return res;
  }
  res.status = 204;
  res.set_header("Access-Control-Allow-Methods", join_or(opts_.allowed_methods, "GET, POST, DELETE, OPTIONS"));
  res.set_header("Access-Control-Allow-Headers",
                 join_or(opts_.allowed_headers, "Authorization, Content-Type, X-Request-Id, X-Api-Key"));
  res.set_header("Access-Control-Max-Age", "600");
  return res;
}

std::optional<HttpResponse> Server::before_body(const HttpRequest& req) {
  if (auto pre = cors_preflight(req)) return finish(std::move(*pre), req, request_id_of(req));
  const Route* r = find_route(req.path);
  ApiError e;
  std::vector<std::pair<std::string, std::string>> headers;
  if (!r) {
    e.status = 404;
    e.message = fmt::format("Not found: {} {}", req.method, req.path);
    e.code = "not_found";
  } else if (r->post ? req.method != "POST"
                     : (req.method != "GET" && req.method != "HEAD" && !(r->del && req.method == "DELETE") &&
                        !(r->post_too && req.method == "POST"))) {
    const char* allowed = r->post       ? "POST"
                          : r->del      ? "GET, HEAD, DELETE"
                          : r->post_too ? "GET, HEAD, POST"
                                        : "GET, HEAD";
    e.status = 405;
    e.message = fmt::format("Method {} is not allowed for {} (allowed: {})", req.method, req.path, allowed);
    e.code = "method_not_allowed";
    headers.emplace_back("Allow", allowed);
  } else if (req.method == "POST" && !req.has_header("Content-Length") && !req.has_header("Transfer-Encoding")) {
    // The transport would read such a body until the connection closes.
    e.status = 411;
    e.message = "Length Required: send Content-Length or Transfer-Encoding: chunked";
  } else if (const std::string* cl = req.header("Content-Length")) {
    char* end = nullptr;
    const unsigned long long len = std::strtoull(cl->c_str(), &end, 10);
    if (cl->empty() || *end != '\0' || (*cl)[0] == '-') {
      e.status = 400;
      e.message = "Invalid Content-Length header";
    } else if (len > opts_.http.payload_max_bytes) {
      e.status = 413;
      e.message = fmt::format("The request body ({} bytes) is larger than the server's limit of {} bytes", len,
                              opts_.http.payload_max_bytes);
      e.code = "request_too_large";
    }
  }
  if (e.message.empty()) {
    std::shared_ptr<const KeyIdentity> id;
    if (auto refused = check_key(req, *r, &id)) {
      e = *refused;
      if (e.status == 401) headers.emplace_back("WWW-Authenticate", "Bearer");
      if (id) count_key_request(id->name, e.status);  // a known key refused the route (403)
    }
  }
  if (e.message.empty()) return std::nullopt;
  HttpResponse res = reply_error(e, e.status == 401 || e.status == 403 ? "unauthorized" : failure_reason(e.status));
  res.headers = std::move(headers);
  res.close_connection = has_body(req) || e.status == 411;  // the body stays unread
  return finish(std::move(res), req, request_id_of(req));
}

HttpResponse Server::handle(HttpRequest& req) {
  const Route* r = find_route(req.path);
  TM_ASSERT(r, "before_body let an unknown route through");
  const std::string id = request_id_of(req);
  const auto t0 = std::chrono::steady_clock::now();
  HttpResponse res;
  std::shared_ptr<const KeyIdentity> key;
  if (auto refused = check_key(req, *r, &key)) {  // the keys were reloaded since before_body
    res = reply_error(*refused, "unauthorized");
    if (refused->status == 401) res.set_header("WWW-Authenticate", "Bearer");
  } else if (auto unavailable = r->needs_engine ? check_available() : std::nullopt) {
    res = std::move(*unavailable);
  } else if (key) {
    res = run_as_key(req, *r, *key);  // routes_keys.cpp: the key's limits and metrics
  } else {
    res = (this->*(r->handler))(req);
  }
  if (opts_.log_requests) {
    // An access line (never the prompt or the key): for a stream, the time until it started.
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    log_info("request {} {} {} -> {}{} in {:.1f} ms{}", id, req.method, req.path, res.status,
             res.streaming() ? " (stream started)" : "", ms, key ? " key " + key->name : std::string());
  }
  return finish(std::move(res), req, id);
}

HttpResponse Server::body_error(bool too_large, const HttpRequest& req) {
  return finish(body_error_untagged(too_large), req, request_id_of(req));
}

HttpResponse Server::body_error_untagged(bool too_large) {
  ApiError e;
  if (too_large) {
    e.status = 413;
    e.message = fmt::format("The request body is larger than the server's limit of {} bytes",
                            opts_.http.payload_max_bytes);
    e.code = "request_too_large";
  } else {
    e.status = 400;
    e.message = "Could not read the request body";
  }
  return reply_error(e, too_large ? "payload_too_large" : "invalid_request");
}

HttpResponse Server::transport_error(int status, const HttpRequest& req) {
  ApiError e;
  e.status = status;
  e.message = status == 414   ? "Request URI too long"
              : status == 404 ? fmt::format("Not found: {} {}", req.method, req.path)
                              : fmt::format("Malformed HTTP request (status {})", status);
  return finish(reply_error(e, status >= 500 ? "engine_error" : "invalid_request"), req, request_id_of(req));
}

HttpResponse Server::memory_full(uint64_t needed, uint64_t limit, const HttpRequest& req) {
  ApiError e;
  if (needed > limit) {
    e.status = 413;
    e.message = fmt::format("The request needs about {} of the server's request memory and the whole budget is {} "
                            "(--buffer-memory); send a smaller request",
                            format_bytes(needed), format_bytes(limit));
    e.code = "request_too_large";
  } else {
    e.status = 503;
    e.message = fmt::format("The server's request memory is full (the request needs about {} of {}, "
                            "--buffer-memory); retry later",
                            format_bytes(needed), format_bytes(limit));
    e.code = "memory_full";
  }
  HttpResponse res = reply_error(e, needed > limit ? "payload_too_large" : "memory_full");
  if (e.status == 503) res.set_header("Retry-After", "1");
  res.close_connection = has_body(req);  // a body may still be unread
  return finish(std::move(res), req, request_id_of(req));
}

HttpResponse Server::internal_error(const std::string& what) {
  ApiError e;
  e.status = 500;
  e.message = "Internal server error: " + what;
  return reply_error(e, "engine_error");
}

// A virtual model: "router" with its rules (names and chains) and default chain.
json Server::router_json(const RouterSpec& r) const {
  json m;
  m["id"] = r.name;
  m["object"] = "model";
  m["created"] = created_unix_;
  m["owned_by"] = "tokenmill";
  m["root"] = nullptr;
  m["parent"] = nullptr;
  m["state"] = "router";
  json rules = json::array();
  for (const RouteRule& x : r.rules) rules.push_back({{"name", x.name}, {"models", x.chain}});
  m["router"] = {{"rules", rules}, {"default", r.default_chain}};
  return m;
}

// One model as /v1/models lists it: OpenAI's fields, vLLM's root/parent/max_model_len, and the
// model's residency ("state": loaded, loading, unloaded), aliases and whether it is pinned.
json Server::model_json(size_t slot) const {
  const ModelSpec& spec = opts_.models[slot];
  const ModelRegistry::View v = models_->view(slot);
  json m;
  m["id"] = spec.name;
  m["object"] = "model";
  m["created"] = created_unix_;
  m["owned_by"] = "tokenmill";
  m["root"] = spec.path;
  m["parent"] = nullptr;
  m["max_model_len"] = v.max_model_len > 0 ? json(v.max_model_len) : json(nullptr);
  m["state"] = model_state_name(v.state);
  m["aliases"] = spec.aliases;
  m["pinned"] = spec.pinned;
  m["memory_bytes"] = v.bytes;  // counted against the budget (an estimate until first loaded)
  if (!v.last_error.empty() && v.state == ModelState::Unloaded) m["load_error"] = v.last_error;
  return m;
}

json Server::models_json() const {
  json list;
  list["object"] = "list";
  list["data"] = json::array();
  for (size_t i = 0; i < models_->size(); ++i) list["data"].push_back(model_json(i));
  for (const auto& a : models_->all_adapters()) list["data"].push_back(adapter_json(a));
  for (const RouterSpec& r : opts_.routers) list["data"].push_back(router_json(r));
  return list;
}

HttpResponse Server::route_models(HttpRequest&) { return reply_json(models_json()); }

namespace {

ApiError model_not_found(const std::string& id) {
  ApiError e;
  e.status = 404;
  e.message = fmt::format("The model `{}` does not exist.", id);
  e.param = "model";
  e.code = "model_not_found";
  return e;
}

}  // namespace

HttpResponse Server::route_model(HttpRequest& req) {
  const std::string id = req.path.substr(std::strlen("/v1/models/"));
  if (const RouterSpec* router = find_router(id)) return reply_json(router_json(*router));
  auto r = models_->resolve(id);
  if (!r) return reply_error(model_not_found(id), "not_found");
  if (!r->adapter.empty())
    for (const auto& a : models_->all_adapters())
      if (a.spec.name == r->adapter) return reply_json(adapter_json(a));
  return reply_json(model_json(r->slot));
}

// Admin routes: POST {"model": NAME}. load waits for the model (200 with its /v1/models entry);
// unload refuses a model serving requests (409); reload is unload then load.
namespace {

struct AdminTarget {
  std::optional<ResolvedModel> model;
  std::string name;
  std::optional<ApiError> error;
};

AdminTarget admin_target(const HttpRequest& req, const ModelRegistry& reg) {
  AdminTarget t;
  try {
    const json body = parse_body(req.body);
    auto name = opt_string(body, "model");
    if (!name || name->empty()) throw_bad_request("'model' (a model name) is required", "model");
    t.name = *name;
    t.model = reg.resolve(*name);
    if (!t.model) t.error = model_not_found(*name);
  } catch (const RequestError& e) {
    t.error = e.error;
  }
  return t;
}

ApiError admin_failure(int status, const std::string& code, const std::string& message) {
  ApiError e;
  e.status = status;
  e.message = message;
  e.code = code;
  if (status == 503) e.type = "service_unavailable_error";
  return e;
}

}  // namespace

HttpResponse Server::route_admin_load(HttpRequest& req) {
  AdminTarget t = admin_target(req, *models_);
  if (t.error) return reply_error(*t.error, t.error->status == 404 ? "not_found" : "invalid_request");
  ModelRegistry::Failure why{};
  if (Status st = models_->load(t.model->slot, &why); !st.ok())
    return reply_error(admin_failure(503, "model_unavailable", st.error()), "unavailable");
  return reply_json(json{{"success", true}, {"model", model_json(t.model->slot)}});
}

HttpResponse Server::route_admin_unload(HttpRequest& req) {
  AdminTarget t = admin_target(req, *models_);
  if (t.error) return reply_error(*t.error, t.error->status == 404 ? "not_found" : "invalid_request");
  if (Status st = models_->unload(t.model->slot); !st.ok())
    return reply_error(admin_failure(409, "model_busy", st.error()), "invalid_request");
  return reply_json(json{{"success", true}, {"model", model_json(t.model->slot)}});
}

HttpResponse Server::route_admin_reload(HttpRequest& req) {
  AdminTarget t = admin_target(req, *models_);
  if (t.error) return reply_error(*t.error, t.error->status == 404 ? "not_found" : "invalid_request");
  if (models_->view(t.model->slot).state != ModelState::Unloaded)
    if (Status st = models_->unload(t.model->slot); !st.ok())
      return reply_error(admin_failure(409, "model_busy", st.error()), "invalid_request");
  if (Status st = models_->load(t.model->slot); !st.ok())
    return reply_error(admin_failure(503, "model_unavailable", st.error()), "unavailable");
  return reply_json(json{{"success", true}, {"model", model_json(t.model->slot)}});
}

// llama-server's body; vLLM's clients look at the status only.
HttpResponse Server::route_health(HttpRequest&) { return reply_json(json{{"status", "ok"}}); }

HttpResponse Server::route_version(HttpRequest&) { return reply_json(json{{"version", opts_.version}}); }

HttpResponse Server::route_metrics(HttpRequest&) {
  HttpResponse res;
  res.content_type = "text/plain; version=0.0.4; charset=utf-8";
  res.body = metrics_->render();
  return res;
}

}  // namespace tmill::server
