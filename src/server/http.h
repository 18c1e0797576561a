// Transport-neutral HTTP: what the routes see (HttpRequest) and return (HttpResponse, with a body or
// a stream of chunks), and what a transport drives (HttpHandler). The transport - an epoll loop in
// http_server.cpp - parses requests, asks the handler before it reads a body, reads the body
// (bounded), calls the handler and writes its response; no route includes the transport's headers,
// so another transport (an event loop) replaces it without touching a route.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tmill::server {

struct HttpRequest {
  std::string method;  // "GET", "HEAD", "POST", ...
  std::string path;    // decoded, without the query string
  std::string query;   // the query string after '?', as sent ("" when none)
  std::vector<std::pair<std::string, std::string>> headers;  // as received
  std::string body;    // read in full before HttpHandler::handle (never for before_body)
  // True once the client has closed or reset its connection (a non-blocking check supplied by the
  // transport; null: never). Handlers poll it while they wait for the engine, and streams with it.
  std::function<bool()> client_gone;
  // Set by the handler's front (per-API-key accounting) before a route runs: the routes that run a
  // model call it with the tokens a request used (prompt + completion), once they are known. Null:
  // nobody counts.
  std::function<void(int64_t)> count_tokens;
  // The name of the API key the request came with, set by the handler's front; "" without keys.
  std::string api_key_name;
  bool api_key_admin = true;  // the key's role is admin (true without keys)

  const std::string* header(std::string_view name) const;  // case-insensitive; first match
  bool has_header(std::string_view name) const { return header(name) != nullptr; }
  std::string header_or(std::string_view name, std::string fallback = {}) const;
  bool disconnected() const { return client_gone && client_gone(); }
  // A query parameter's value (%XX and '+' decoded); "" when absent.
  std::string query_param(std::string_view name) const;
};

// Where a streamed response writes its chunks.
class ChunkSink {
 public:
  virtual ~ChunkSink() = default;
  virtual bool write(std::string_view data) = 0;  // false: the client is gone
  virtual void done() = 0;                        // the last chunk has been written
};

struct HttpResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string content_type;
  std::string body;
  bool close_connection = false;  // close after this response (its body unread, or draining)
  // A chunked body instead of `body`: the transport calls next_chunk until it returns false (the
  // response is cut) or calls sink.done(); on_close runs once when the response is over, however it
  // ended (sent, failed, cut).
  std::function<bool(ChunkSink&)> next_chunk;
  std::function<void()> on_close;

  void set_header(std::string name, std::string value) { headers.emplace_back(std::move(name), std::move(value)); }
  bool streaming() const { return static_cast<bool>(next_chunk); }
};

// The transport's limits and timeouts (`tokenmill serve` flags).
struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                     // 0: any free port (see HttpServer::port())
  int max_threads = 1024;              // requests handled at once (worker threads; a stream holds one)
  int max_connections = 16384;         // open connections (idle ones included); more are closed at accept
  int backlog = 1024;                  // listen() backlog
  int keep_alive_timeout_s = 10;       // idle time before a keep-alive connection is closed
  int keep_alive_max_requests = 1000;  // requests per connection
  int header_timeout_s = 30;           // to receive a request line and headers (slowloris)
  int read_timeout_s = 30;             // the longest pause while receiving a body
  int body_timeout_s = 120;            // to receive a whole body
  int write_timeout_s = 30;            // the longest a response may wait for a client that reads nothing
  size_t output_buffer_max_bytes = 1u << 20;  // per connection: a stream waits (then fails) above it
  size_t max_request_line = 8192;      // longer: 414
  size_t max_header_bytes = 65536;     // request line + headers; larger: 431
  size_t max_headers = 100;            // more header lines: 431
  size_t payload_max_bytes = 8u << 20; // larger bodies get 413
  // Memory for bytes received, request bodies and their parsing, and output buffers, all connections
  // together (server/memory_budget.h); 0: counted, not limited. A request that does not fit is shed
  // (503 + Retry-After); one that could never fit gets 413.
  uint64_t buffer_memory_bytes = 0;
  // TLS (vLLM's flags): a certificate chain and key in PEM turn it on; client certificates signed by
  // ssl_ca_certs are asked for with ssl_cert_reqs 1 (optional) or 2 (required).
  std::string ssl_certfile, ssl_keyfile, ssl_ca_certs;
  int ssl_cert_reqs = 0;
};

// What a transport drives, for every request on every connection (from any number of threads).
class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  // After the request line and headers, before any body byte is read: a response ends the request
  // here (unknown route, wrong method, body too large by Content-Length, missing credentials).
  virtual std::optional<HttpResponse> before_body(const HttpRequest& head) = 0;
  // The largest body the transport reads; beyond it the transport answers body_error(true).
  virtual size_t max_body_bytes() const = 0;
  virtual HttpResponse handle(HttpRequest& request) = 0;
  // The body could not be read: larger than max_body_bytes (a chunked body), or the connection
  // failed. The transport closes the connection after this response.
  virtual HttpResponse body_error(bool too_large, const HttpRequest& head) = 0;
  // The transport could not parse the request (malformed request line or headers: 400, URI too
  // long: 414, ...); `status` is what it will answer, the handler gives the body.
  virtual HttpResponse transport_error(int status, const HttpRequest& head) = 0;
  // A handler threw.
  virtual HttpResponse internal_error(const std::string& what) = 0;
  // The request needs `needed` bytes of the transport's memory budget (`limit`) and they are not free
  // now (503, retry) or never could be (needed > limit: 413).
  virtual HttpResponse memory_full(uint64_t needed, uint64_t limit, const HttpRequest& head) = 0;
};

}  // namespace tmill::server
