// The OpenAI-compatible HTTP server around an Engine.
//
//   auto srv = Server::create(options);          // listens at once: /health answers 503 while loading
//   srv->attach_engine(std::move(engine), load_s); // serves requests from now on
//   ...                                          // SIGINT/SIGTERM:
//   srv->shutdown(drain_timeout_s);              // refuse new work, finish in-flight, close
//
// Routes (see docs/server.md and the one route table in routes.cpp): POST /v1/chat/completions,
// POST /v1/completions, GET /v1/models[/ID], POST /tokenize, POST /detokenize, GET /health,
// GET /version, GET /metrics, and the admin POST /models/load|unload|reload.
//
// Several models: ServerOptions::models (one ModelSpec each) and an engine_loader; the ModelRegistry
// (model_registry.h) keeps them, routers (router.h) are virtual models over them, and
// load_pinned_models() replaces attach_engine(). The routes speak server/http.h only; HttpServer (the epoll transport) is the
// transport that drives them.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/result.h"
#include "engine/engine.h"
#include "server/api_keys.h"
#include "server/history_compression.h"
#include "server/http.h"
#include "server/model_registry.h"
#include "server/ollama.h"
#include "server/openai_request.h"
#include "server/response_store.h"
#include "server/router.h"
#include "server/server_metrics.h"

namespace tmill::server {

class HttpServer;

// The name a model is served under when none is given: the file name without ".gguf" (a split
// GGUF's "-00001-of-0000N" dropped too), or a Hugging Face folder's name.
std::string default_model_name(const std::string& path);

// A request's keep_alive in seconds (Ollama's meaning), or nullopt; throws RequestError (400).
std::optional<double> keep_alive_of(const json& body);

struct ServerOptions {
  HttpOptions http;
  std::string served_model_name;    // empty: the model file's name without ".gguf"
  std::vector<std::string> served_model_aliases;  // one model: more names it answers to (vLLM's extra --served-model-name values)
  std::string model_path;           // for /v1/models "root" and the default name
  std::vector<std::string> api_keys;  // --api-key: admin keys without limits; none (and no file): no authentication
  std::string api_key_file;           // --api-key-file: named keys with roles and limits (api_keys.h); reloadable
  int64_t max_queued_requests = 512;  // engine requests waiting to be scheduled; more get 429
  double request_timeout_s = 600;     // longest wait in the queue (0: unlimited)
  double max_request_time_s = 0;      // --max-request-time: longest a whole request may take (0: unlimited)
  int32_t max_tokens_default = 4096;  // cap when a chat request omits max_tokens (0: no cap)
  int32_t max_n = 16;
  int32_t max_logprobs = 20;          // largest logprobs / top_logprobs (vLLM's --max-logprobs, same default)
  // Sampling defaults set on the command line (llama-server's --temp, --top-k, ...; vLLM's
  // --override-generation-config): over --generation-config's, under a request's own fields.
  GenerationDefaults sampling_overrides;
  std::string chat_template;          // --chat-template: a file, or the template text itself
  std::string reasoning_parser = "auto";  // --reasoning-parser: auto, none, or a vLLM name (deepseek_r1, ...)
  std::string tool_call_parser;       // --tool-call-parser NAME; empty: from the chat template
  // CORS (vLLM's --allowed-origins / --allowed-methods / --allowed-headers); no origins: off.
  std::vector<std::string> allowed_origins;  // "*" allows any
  std::vector<std::string> allowed_methods;  // empty or "*": GET, POST, DELETE, OPTIONS
  std::vector<std::string> allowed_headers;  // empty or "*": Authorization, Content-Type, X-Request-Id, X-Api-Key
  std::string truncation = "disabled";  // --truncation: auto drops a chat's oldest turns to fit (per request: "truncation")
  CompressionOptions compression;     // --compress-history ...: summarize a long chat's oldest turns (history_compression.h)
  bool log_requests = false;          // --log-requests: one access line per request (id, route, status, time)
  std::string version = "0";
  std::string generation_config = "auto";  // --generation-config: auto, vllm, or a folder (generation_config.h)
  bool no_ui = false;                 // --no-ui: GET /, /dashboard, /ui/* answer 404 (routes_ui.cpp)
  bool slots_endpoint = true;         // llama-server's --no-slots: GET /slots answers 501 (routes_llama.cpp)
  // The Responses API's stored responses (response_store.h): --max-stored-responses (0: none kept,
  // previous_response_id then finds nothing) and --stored-responses-memory (their JSON's bytes).
  bool force_include_usage = false;  // vLLM's --enable-force-include-usage: streams end with usage regardless
  size_t max_stored_responses = 1024;
  uint64_t stored_responses_memory = uint64_t{256} << 20;
  // Several models (docs/server.md, "Several models"): empty means one, named served_model_name,
  // from model_path, attached with attach_engine (or loaded by engine_loader).
  std::vector<ModelSpec> models;
  std::vector<RouterSpec> routers;    // virtual models (tiered routing), prepared by Server::create
  // LoRA adapters of the command line (--lora-modules, --lora): each on the model its `base` names
  // ("": the first model), added to that ModelSpec's loras by Server::create.
  std::vector<AdapterSpec> loras;
  uint64_t memory_limit = 0;          // --memory-limit in bytes (0: no budget)
  double load_timeout_s = 300;        // how long a request waits for its on-demand model to load
  // Creates a model's engine (serve.cpp: the model's engine options); null: attach_engine only.
  std::function<Result<std::unique_ptr<Engine>>(const ModelSpec&, double* load_seconds)> engine_loader;
};

class Server final : public HttpHandler {
 public:
  static Result<std::unique_ptr<Server>> create(ServerOptions options);
  ~Server() override;

  int port() const;
  // "https" when TLS is on (--ssl-certfile), else "http": what the start-up lines print.
  const char* scheme() const {
    return opts_.http.ssl_certfile.empty() && opts_.http.ssl_keyfile.empty() ? "http" : "https";
  }
  const std::string& served_model_name() const { return opts_.served_model_name; }

  // Builds the request context (tokenizer, chat template, limits), registers the metrics observer
  // and starts the engine thread, for the first (or only) model; the server is ready afterwards.
  // Errors: an unreadable or invalid --chat-template.
  Status attach_engine(std::unique_ptr<Engine> engine, double load_seconds);
  // Loads every pinned model with engine_loader (in order), then the server is ready. Errors: the
  // first model that fails to load.
  Status load_pinned_models();

  // Stops accepting connections, answers 503 to new requests, waits up to drain_timeout_s for
  // in-flight requests, aborts the rest, then closes connections and stops the engine.
  void shutdown(double drain_timeout_s);

  int64_t inflight() const { return inflight_.load(); }

  // Reads --api-key-file again (serve does on SIGHUP) and swaps the keys at once; a file that does
  // not load keeps the keys the server had. Logs the outcome (key names and counts, never keys).
  Result<size_t> reload_api_keys();

 private:
  explicit Server(ServerOptions options);
  void register_routes();

  // HttpHandler (routes.cpp): the route table, the checks before a body is read, error bodies.
  std::optional<HttpResponse> before_body(const HttpRequest& head) override;
  size_t max_body_bytes() const override { return opts_.http.payload_max_bytes; }
  HttpResponse handle(HttpRequest& req) override;
  HttpResponse body_error(bool too_large, const HttpRequest& head) override;
  HttpResponse body_error_untagged(bool too_large);
  // Every response: X-Request-Id (and error.request_id), CORS headers for an allowed Origin.
  HttpResponse finish(HttpResponse res, const HttpRequest& req, const std::string& id) const;
  std::optional<HttpResponse> cors_preflight(const HttpRequest& req) const;
  bool origin_allowed(const std::string& origin) const;
  HttpResponse transport_error(int status, const HttpRequest& head) override;
  HttpResponse internal_error(const std::string& what) override;
  HttpResponse memory_full(uint64_t needed, uint64_t limit, const HttpRequest& head) override;

  // The route table (routes.cpp): path -> method, credentials, readiness, handler.
  enum class Access { Open, Key, Admin };
  struct Route {
    const char* path;
    bool prefix;        // path is a prefix ("/v1/models/ID")
    bool post;          // POST; else GET and HEAD
    Access access;      // open, any key, or an admin key (when the server has keys)
    bool needs_engine;  // 503 while the model loads or the server drains
    bool limited;       // runs a model: a key's limits apply (concurrency, tokens per minute)
    HttpResponse (Server::*handler)(HttpRequest&);
    bool del = false;        // GET, HEAD and DELETE (a stored resource)
    bool post_too = false;   // GET, HEAD and POST (a setting read and written)
  };
  static const Route* find_route(const std::string& path);
  // API keys (routes_keys.cpp). check_key: the request's key for a route that needs one (*id null
  // when keys are off or the route is open), or the refusal (401 unknown key, 403 not an admin key).
  std::optional<ApiError> check_key(const HttpRequest& req, const Route& r, std::shared_ptr<const KeyIdentity>* id) const;
  // Runs the route as `key`: its limits (429 with Retry-After when over), the x-ratelimit-* headers,
  // its slot released when the response is over, its per-key metrics.
  HttpResponse run_as_key(HttpRequest& req, const Route& r, const KeyIdentity& key);
  void count_key_request(const std::string& name, int status);  // tokenmill:api_key_requests_total

  // Route pieces shared by the routes.
  HttpResponse reply_error(const ApiError& e, const char* failure_reason);
  static HttpResponse reply_json(const json& j, int status = 200);
  std::optional<HttpResponse> check_available();
  json models_json() const;
  json model_json(size_t slot) const;
  json router_json(const RouterSpec& r) const;
  // A model's metrics (its model_name series).
  ServerMetrics* metrics_for(size_t slot) const { return model_metrics_[slot].get(); }
  HttpResponse reply_error(const ApiError& e, const char* failure_reason, ServerMetrics* metrics);

  // Model lifecycle (server.cpp): the registry's loader, and the context a model's requests map with.
  Result<std::shared_ptr<LoadedModel>> make_loaded(size_t slot, std::unique_ptr<Engine> engine, double load_s);
  Result<ServerContext> build_context(const ModelSpec& spec, Engine& engine) const;
  // The request's model (a router: its tokenizer_model, for /tokenize): resolved (404
  // model_not_found) and leased, loading it if needed (503).
  // *resolved (when given) gets the adapter a LoRA adapter's name adds.
  Result<ModelLease> lease_model(const json& body, ApiError* err, ResolvedModel* resolved = nullptr);
  // A request for an adapter: the engine has it loaded (it loads it when a run-time load raced a
  // model load), the response names the adapter, every prompt carries it. A request's `lora` list
  // (llama-server's [{id, scale}], ids indexing the model's adapters) picks the adapter and its scale
  // instead. On error *err is the reply (400 for a malformed `lora`, else 503).
  Status apply_adapter(const ResolvedModel& r, ModelLease& lease, const json& body, MappedRequest* m, ApiError* err);

  // The model chosen for a generation request, its mapped request, admitted (routes_select.cpp).
  struct Target {
    ModelLease lease;
    ServerMetrics* metrics = nullptr;
    std::optional<MappedRequest> mapped;
    std::string router, rule;  // a virtual model's name and the rule that matched; empty otherwise
  };
  // Fills *t, or returns the response to send (404, 400, 429, 503). Sets body["model"] to the name
  // of the model that answers.
  std::optional<HttpResponse> select_target(json& body, const HttpRequest& req, ApiKind kind, Target* t);
  const RouterSpec* find_router(const std::string& name) const;
  // The router's classifier model's answer (one of its choices) about `message`.
  // The routes below run generations of their own for a request (a router's classifier, a chat's
  // summary); `count_tokens` (the request's per-key accounting, may be null) is charged their tokens.
  Result<std::string> classify(const RouterSpec& router, const std::string& message,
                               const std::function<void(int64_t)>& count_tokens);
  // History compression of a chat body on the leased model (routes_compress.cpp); err set on failure.
  std::optional<CompressionReport> compress_chat(json& body, ModelLease& lease, ServerMetrics* metrics,
                                                 const std::function<void(int64_t)>& count_tokens, ApiError* err);

  // The routes (routes.cpp, routes_generate.cpp, routes_tokenize.cpp).
  HttpResponse route_chat(HttpRequest& req) { return handle_generate(req, ApiKind::Chat); }
  HttpResponse route_completions(HttpRequest& req) { return handle_generate(req, ApiKind::Completion); }
  // llama-server's own routes (routes_llama.cpp; /completion through generate()).
  HttpResponse route_native_completion(HttpRequest& req) { return handle_generate(req, ApiKind::Native); }
  HttpResponse route_props(HttpRequest& req);
  HttpResponse route_slots(HttpRequest& req);
  HttpResponse route_slot_action(HttpRequest& req);
  HttpResponse route_apply_template(HttpRequest& req);
  HttpResponse route_native_embeddings(HttpRequest& req);
  HttpResponse route_infill(HttpRequest& req);
  // Anthropic's Messages API (routes_anthropic.cpp, anthropic.h): the chat route, translated.
  HttpResponse route_messages(HttpRequest& req);
  HttpResponse route_count_tokens(HttpRequest& req);
  HttpResponse route_responses(HttpRequest& req);  // OpenAI's Responses API (routes_responses.cpp), the same way
  HttpResponse route_stored_response(HttpRequest& req);  // GET / DELETE /v1/responses/{id}[/input_items]
  // Ollama's API (routes_ollama.cpp, ollama.h).
  HttpResponse handle_ollama(HttpRequest& req, OllamaKind kind);
  HttpResponse route_ollama_chat(HttpRequest& req) { return handle_ollama(req, OllamaKind::Chat); }
  HttpResponse route_ollama_generate(HttpRequest& req) { return handle_ollama(req, OllamaKind::Generate); }
  HttpResponse route_ollama_tags(HttpRequest& req);
  HttpResponse route_ollama_ps(HttpRequest& req);
  HttpResponse route_ollama_version(HttpRequest& req);
  HttpResponse route_ollama_show(HttpRequest& req);
  HttpResponse route_ollama_embed(HttpRequest& req);
  HttpResponse handle_generate(HttpRequest& req, ApiKind kind);
  HttpResponse generate(HttpRequest& req, ApiKind kind, Target& t);
  HttpResponse route_tokenize(HttpRequest& req);
  HttpResponse route_map_reduce(HttpRequest& req);  // routes_map_reduce.cpp: POST /v1/map_reduce
  // routes_embed.cpp: embedding models (Engine::embed)
  enum class EmbedKind { Embeddings, Rerank, Score };
  HttpResponse route_embeddings(HttpRequest& req);
  HttpResponse route_rerank(HttpRequest& req);
  HttpResponse route_score(HttpRequest& req);
  HttpResponse handle_embed(HttpRequest& req, EmbedKind kind);
  HttpResponse route_detokenize(HttpRequest& req);
  HttpResponse route_models(HttpRequest& req);
  HttpResponse route_model(HttpRequest& req);
  HttpResponse route_health(HttpRequest& req);
  HttpResponse route_version(HttpRequest& req);
  HttpResponse route_metrics(HttpRequest& req);
  HttpResponse route_ui(HttpRequest& req);       // routes_ui.cpp: GET /, /dashboard, /ui/<asset>
  HttpResponse route_ui_info(HttpRequest& req);  // routes_ui.cpp: GET /ui/info
  HttpResponse route_admin_load(HttpRequest& req);
  HttpResponse route_admin_unload(HttpRequest& req);
  HttpResponse route_admin_reload(HttpRequest& req);
  HttpResponse route_load_lora(HttpRequest& req);    // routes_lora.cpp: vLLM's /v1/load_lora_adapter
  HttpResponse route_unload_lora(HttpRequest& req);  // vLLM's /v1/unload_lora_adapter
  // llama-server's GET /lora-adapters: [{id, path, scale, model}], id the position among the base
  // model's adapters (what a request's `lora` list names).
  HttpResponse route_lora_adapters(HttpRequest& req);
  json adapter_json(const ModelRegistry::AdapterEntry& a) const;

  ServerOptions opts_;
  std::unique_ptr<KeyStore> keys_;
  std::unique_ptr<ResponseStore> responses_;  // the Responses API's stored responses
  std::unique_ptr<HttpServer> http_;
  MetricsRegistry metrics_registry_;  // every model's series, one /metrics
  std::vector<std::unique_ptr<ServerMetrics>> model_metrics_;  // per slot (model_name label)
  ServerMetrics* metrics_ = nullptr;  // the first model's: failures before a model is known
  std::unique_ptr<ModelRegistry> models_;
  SummaryCache summaries_;             // history compression: summaries by conversation prefix
  std::atomic<bool> ready_{false};     // engine attached
  std::atomic<bool> draining_{false};  // shutdown started: new requests get 503
  std::atomic<bool> force_stop_{false};  // drain timed out: in-flight requests are aborted
  std::atomic<int64_t> inflight_{0};     // generation requests being served
  int64_t created_unix_ = 0;
  std::mutex shutdown_mu_;
  bool shut_down_ = false;
};

}  // namespace tmill::server
