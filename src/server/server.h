// The OpenAI-compatible HTTP server around an Engine.
//
//   auto srv = Server::create(options);          // listens at once: /health answers 503 while loading
//   srv->attach_engine(std::move(engine), load_s); // serves requests from now on
//   ...                                          // SIGINT/SIGTERM:
//   srv->shutdown(drain_timeout_s);              // refuse new work, finish in-flight, close
//
// Routes (see docs/server.md): POST /v1/chat/completions, POST /v1/completions, GET /v1/models[/ID],
// POST /tokenize, POST /detokenize, GET /health, GET /version, GET /metrics.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/result.h"
#include "engine/engine.h"
#include "server/http_server.h"
#include "server/openai_request.h"
#include "server/server_metrics.h"

namespace tmill::server {

struct ServerOptions {
  HttpOptions http;
  std::string served_model_name;    // empty: the model file's name without ".gguf"
  std::string model_path;           // for /v1/models "root" and the default name
  std::vector<std::string> api_keys;  // empty: no authentication
  int64_t max_queued_requests = 512;  // engine requests waiting to be scheduled; more get 429
  double request_timeout_s = 600;     // longest wait in the queue (0: unlimited)
  int32_t max_tokens_default = 4096;  // cap when a chat request omits max_tokens (0: no cap)
  int32_t max_n = 16;
  std::string chat_template;          // --chat-template: a file, or the template text itself
  std::string version = "0";
};

class Server {
 public:
  static Result<std::unique_ptr<Server>> create(ServerOptions options);
  ~Server();

  int port() const { return http_->port(); }
  const std::string& served_model_name() const { return opts_.served_model_name; }

  // Builds the request context (tokenizer, chat template, limits), registers the metrics observer
  // and starts the engine thread. Errors: an unreadable or invalid --chat-template.
  Status attach_engine(std::unique_ptr<Engine> engine, double load_seconds);

  // Stops accepting connections, answers 503 to new requests, waits up to drain_timeout_s for
  // in-flight requests, aborts the rest, then closes connections and stops the engine.
  void shutdown(double drain_timeout_s);

  int64_t inflight() const { return inflight_.load(); }

 private:
  explicit Server(ServerOptions options);
  void register_routes();

  // Route pieces (routes.cpp, routes_generate.cpp).
  bool check_auth(const httplib::Request& req, httplib::Response& res);
  bool check_available(httplib::Response& res);
  void reply_error(httplib::Response& res, const ApiError& e, const char* failure_reason);
  void reply_json(httplib::Response& res, const json& j);
  bool read_body(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader, std::string* body);
  void handle_generate(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader, ApiKind kind);
  void handle_tokenize(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader);
  void handle_detokenize(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& reader);
  json models_json() const;


  ServerOptions opts_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<ServerMetrics> metrics_;
  std::unique_ptr<Engine> engine_;
  ServerContext ctx_;
  std::atomic<bool> ready_{false};     // engine attached
  std::atomic<bool> draining_{false};  // shutdown started: new requests get 503
  std::atomic<bool> force_stop_{false};  // drain timed out: in-flight requests are aborted
  std::atomic<int64_t> inflight_{0};     // generation requests being served
  int64_t created_unix_ = 0;
  std::mutex shutdown_mu_;
  bool shut_down_ = false;
};

}  // namespace tmill::server
