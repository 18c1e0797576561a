// A small OpenAI-compatible server for testing the load generator: it streams a fixed reply at a
// fixed pace (first content chunk `ttft_ms` after the request is admitted, then one chunk every
// `itl_ms`), reports usage in the last chunk, serves /v1/models, /health and a Prometheus /metrics
// with vLLM's metric names, and can misbehave on purpose (error statuses, dropped connections,
// limited decode slots with queueing or 429 rejections).
//
// Token accounting the tests rely on: prompt tokens = words in the prompt (+5 for chat, a pretend
// chat template); output tokens = max_tokens (else default_tokens), tokens_per_chunk per chunk.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace httplib {
class Server;
}

namespace tmill::test {

struct StubConfig {
  std::string model = "stub-model";
  int max_model_len = 4096;
  int ttft_ms = 200;
  int itl_ms = 20;
  int default_tokens = 16;
  int tokens_per_chunk = 1;
  int prefill_us_per_token = 0;  // extra TTFT per prompt token
  bool send_usage = true;        // final usage chunk (when the client asks for it)
  bool role_chunk = true;        // chat: an empty-content {"role":"assistant"} chunk first, at once
  bool crlf = false;             // "\r\n" line endings in the event stream
  bool metrics = true;
  int fail_status = 0;  // answer with this HTTP status ...
  int fail_every = 0;   // ... every Nth request (0 or 1: every request)
  int drop_after_chunks = -1;  // drop the connection after this many content chunks
  int drop_every = 0;          // ... for every Nth request only (0 or 1: all)
  int max_parallel = 0;   // decode slots (0: unlimited); requests beyond wait in a queue
  int reject_above = 0;   // 429 when running + waiting would exceed this (0: never)
  int preempt_above = 0;  // count a preemption for each admitted request beyond this many running
  int loading_ms = 0;     // "loading the model": every route but /metrics answers 503 this long
  // Hold every stream's first content chunk until this many requests have been running at once
  // (at most hold_timeout_ms): makes "N streams at once" independent of how fast a loaded machine
  // opens the connections.
  int hold_until_running = 0;
  int hold_timeout_ms = 20000;
};

class StubServer {
 public:
  explicit StubServer(StubConfig cfg);
  ~StubServer();
  StubServer(const StubServer&) = delete;
  StubServer& operator=(const StubServer&) = delete;

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // Stops the listener and waits for handlers (also done by the destructor).
  void stop();

  int requests() const { return requests_.load(); }        // generation requests received
  int max_running() const { return max_running_.load(); }  // most streams decoding at once
  int rejected() const { return rejected_.load(); }
  int preemptions() const { return preemptions_.load(); }  // what /metrics reports
  std::string last_body() const;

 private:
  struct Slot;
  bool admit(int* status);
  void release();

  StubConfig cfg_;
  std::unique_ptr<httplib::Server> svr_;
  std::thread thread_;
  int port_ = 0;
  int listen_fd_ = -1;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::atomic<int> requests_{0}, max_running_{0}, rejected_{0}, preemptions_{0};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int running_ = 0, waiting_ = 0;
  std::string last_body_;
};

}  // namespace tmill::test
