// Client side of the OpenAI-compatible HTTP API: one streaming request at a time over a kept-alive
// HTTP/1.1 connection (cpp-httplib), measuring TTFT/ITL/E2E from the SSE chunks.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/result.h"
#include "loadgen/datasets.h"
#include "loadgen/sse.h"

namespace httplib {
class Client;
}

namespace tmill::loadgen {

enum class Endpoint { Chat, Completions };
const char* endpoint_name(Endpoint e);           // "chat" / "completions"
const char* endpoint_path(Endpoint e);           // "/v1/chat/completions" / "/v1/completions"

// "http://host:port[/prefix]" -> "http://host:port" + "/prefix" (a trailing "/v1" is dropped: the
// API paths add it).
struct ServerUrl {
  std::string origin;  // scheme://host:port, what httplib::Client takes
  std::string prefix;  // "" or "/something", prepended to every path
  std::string str() const { return origin + prefix; }
};
Result<ServerUrl> parse_base_url(std::string_view url);

enum class FailureKind {
  None,
  Http,         // a non-200 status (429, 500, 503 ...): an explicit error response
  StreamError,  // 200, but an {"error": ...} event inside the stream: explicit too
  Timeout,      // no complete answer within --timeout
  Connection,   // could not connect, or the connection failed before any response
  Disconnect,   // the response started but the connection dropped / stream ended early
  Malformed,    // undecodable stream (bad JSON, not an event stream)
};
// "http_429", "stream_error", "timeout", "connection", "disconnect", "malformed_stream".
std::string failure_label(FailureKind kind, int http_status);
// True when the server answered with an explicit error (the request was not lost).
inline bool is_explicit_failure(FailureKind k) { return k == FailureKind::Http || k == FailureKind::StreamError; }

struct RequestResult {
  size_t index = 0;  // position in the run
  int phase = 0;     // scenario phase (recovery: 0 baseline, 1 overload, 2 after)
  bool success = false;
  FailureKind failure = FailureKind::None;
  int http_status = 0;
  std::string error;
  double send_s = 0;  // when it was sent, seconds since the run started
  double ttft_s = 0;  // send -> first chunk with non-empty content (E2E when none came)
  double e2el_s = 0;  // send -> end of stream
  std::vector<double> chunk_s;  // arrival of each content chunk, seconds since send
  int prompt_tokens = 0;
  int output_tokens = 0;
  bool usage_reported = false;  // false: output_tokens counts content chunks instead
  size_t output_chars = 0;
  std::string finish_reason;
  bool resent = false;  // sent again on a new connection (see OpenAiClient::stream)
  bool connect_failed = false;  // no connection could be made: the request never reached a server
};

// Number of requests that were resent that way.
int count_resent(const std::vector<RequestResult>& requests);

// Consumes an SSE response body and records what it carries. Chat chunks count when
// choices[0].delta has non-empty "content" (or "reasoning_content"/"reasoning"); completions
// chunks when choices[0].text is non-empty. Usage comes from any chunk's "usage" object (the last
// one wins, as servers send it in the final chunk with include_usage).
class StreamAccumulator {
 public:
  explicit StreamAccumulator(Endpoint e) : endpoint_(e) {}
  // `t` = seconds since the request was sent, when these bytes arrived.
  void on_bytes(std::string_view bytes, double t);
  void on_end();  // end of body: flushes an unterminated final event
  // Sets success/failure (stream level), ttft/chunks/tokens; e2el_s must be set by the caller.
  void fill(RequestResult& r) const;

  bool done() const { return done_; }
  bool malformed() const { return malformed_ || parser_.malformed(); }
  const std::string& stream_error() const { return stream_error_; }

 private:
  void on_event(const SseEvent& ev, double t);

  Endpoint endpoint_;
  SseParser parser_;
  bool done_ = false, malformed_ = false, usage_ = false;
  std::string malformed_msg_, stream_error_, finish_reason_;
  std::vector<double> chunks_;
  int prompt_tokens_ = 0, completion_tokens_ = 0;
  size_t chars_ = 0;
};

// The JSON request body: model, prompt (or chat messages), max_tokens, stream with
// include_usage, temperature 0, and "ignore_eos": true when asked (vLLM/tokenmill extension).
nlohmann::json build_request_body(Endpoint e, const std::string& model, const Prompt& p,
                                  int max_tokens, bool ignore_eos);

// Structured output for the load: whether request `index` is one of `fraction` of all (spread
// evenly: 0.5 is every second request), a built-in schema of the usual shape (an object of strings,
// numbers, an enum and an array), and the response_format that carries a schema.
bool structured_request(size_t index, double fraction);
const std::string& default_structured_schema();
void add_json_schema(nlohmann::json& body, const nlohmann::json& schema);

struct ModelInfo {
  std::string id;
  int max_model_len = 0;  // 0 when the server does not say
};

class OpenAiClient {
 public:
  OpenAiClient(const ServerUrl& url, std::string api_key, double timeout_s);
  ~OpenAiClient();
  OpenAiClient(const OpenAiClient&) = delete;
  OpenAiClient& operator=(const OpenAiClient&) = delete;

  Result<std::vector<ModelInfo>> list_models();
  // GET of a plain resource: the body when the status is 200.
  Result<std::string> get(const std::string& path, double timeout_s);
  // GET /health, else GET /v1/models: ok when either answers 200, else what /health answered
  // (e.g. "GET /health: HTTP 503" while a server loads its model).
  Status alive(double timeout_s);
  // Sends one streaming request (timings relative to the moment of the call); never throws.
  // When a reused keep-alive connection turns out to be closed by the server before any response
  // byte (llama-server closes the connection after every stream although it answers "Keep-Alive"),
  // the request is sent once more on a new connection, as HTTP clients do for a request that never
  // reached the server; the retry's time counts in the request's latency.
  RequestResult stream(Endpoint e, const nlohmann::json& body);

 private:
  ServerUrl url_;
  std::string api_key_;
  double timeout_s_;
  std::unique_ptr<httplib::Client> cli_;
};

}  // namespace tmill::loadgen
