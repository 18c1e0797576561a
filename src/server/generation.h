// One HTTP generation request on the engine: submits its prompts, receives the engine's outputs
// through a per-request queue, and accumulates each choice.
//
// Threads: the engine calls the output callback on its own thread; the callback only appends to a
// mutex-protected deque and signals a condition variable (it never waits on the client). The HTTP
// thread drains the deque in wait(). The queue is shared (shared_ptr) with the callbacks, so outputs
// arriving after the HTTP side is gone are harmless.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "engine/engine.h"
#include "server/api_error.h"
#include "server/openai_request.h"
#include "server/openai_response.h"

namespace tmill::server {

class ServerMetrics;

struct OutputItem {
  size_t prompt = 0;       // index into MappedRequest::prompts
  RequestOutput out;
  Clock::time_point at{};  // when the engine handed it over
};

// When a choice's tokens came (llama-server's "timings").
struct ChoiceTiming {
  bool started = false;          // first_token is set
  Clock::time_point first_token{};
  Clock::time_point last{};      // the latest output (the last one once finished)
};

class Generation {
 public:
  // `arrival`: when the HTTP request arrived (TTFT and end-to-end latency are measured from it).
  Generation(Engine& engine, ServerMetrics* metrics, const MappedRequest& request, Clock::time_point arrival);
  ~Generation();  // aborts every request that has not finished
  Generation(const Generation&) = delete;
  Generation& operator=(const Generation&) = delete;

  // Submits every prompt. On failure the ones already submitted are aborted; *submitted says how
  // many engine requests were accepted (each later leaves the admission count by itself).
  Status submit(int64_t* submitted);
  void abort();

  // Waits up to `timeout` for outputs, folds them into choices() and returns them in arrival order.
  std::vector<OutputItem> wait(std::chrono::milliseconds timeout);
  bool finished() const { return unfinished_ == 0; }
  bool got_output() const { return got_output_; }
  // The first failure: queue timeout (503, code "queue_timeout") or an engine error (500).
  const std::optional<ApiError>& error() const { return error_; }

  const MappedRequest& request() const { return req_; }
  // Accumulated output per choice; choice index = prompt * n + index.
  const std::vector<ChoiceOutput>& choices() const { return choices_; }
  int32_t choice_index(const OutputItem& it) const { return static_cast<int32_t>(it.prompt) * req_.n + it.out.index; }
  Usage usage() const;
  const std::vector<uint64_t>& ids() const { return ids_; }  // the engine's request ids (after submit)
  Clock::time_point arrival() const;
  const ChoiceTiming& timing(int32_t choice) const { return timings_[static_cast<size_t>(choice)]; }
  int32_t completion_tokens(int32_t choice) const { return completion_tokens_[static_cast<size_t>(choice)]; }
  int32_t cached_tokens(size_t prompt) const { return cached_tokens_[prompt]; }
  // vLLM's stop_reason for a finished output: the stop string, the stop token id, or null.
  json stop_reason(const OutputItem& it) const;

 private:
  struct Channel;
  Engine& engine_;
  ServerMetrics* metrics_;
  MappedRequest req_;
  std::shared_ptr<Channel> chan_;
  std::vector<uint64_t> ids_;
  std::vector<ChoiceOutput> choices_;
  std::vector<int32_t> completion_tokens_;  // per choice
  std::vector<int32_t> cached_tokens_;      // per prompt
  std::vector<ChoiceTiming> timings_;       // per choice
  std::vector<char> cut_;                   // per choice: ended by a native stop (its later outputs dropped)
  // llama-server's n_indent / t_max_predict_ms (ApiKind::Native): ends the choice at `it` when due.
  void apply_native_stop(OutputItem& it, ChoiceOutput& c, const ChoiceTiming& t);
  size_t unfinished_ = 0;
  bool got_output_ = false;
  bool aborted_ = false;
  std::optional<ApiError> error_;
};

}  // namespace tmill::server
