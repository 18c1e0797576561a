// The engine: owns the model, tokenizer, KV cache and scheduler, and runs the step loop
//   schedule() -> forward(batch) -> sample -> update()
// on its own thread. Other threads submit requests, receive outputs through a callback, and abort.
// `tokenmill generate`, `bench engine`, `eval tasks` and the HTTP server all run on this.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"
#include "sampling/sampler.h"
#include "sched/request.h"
#include "sched/scheduler.h"

namespace tmill {

class Model;
class Tokenizer;

struct EngineConfig {
  std::string model_path;           // GGUF model file
  int threads = 0;                  // 0: all cores this process may use
  uint64_t kv_cache_bytes = 0;      // 0: automatic (see memory plan)
  std::string kv_cache_dtype = "auto";  // auto (f32 for f32 models, else f16), f32, f16, bf16, int8
  int32_t block_size = 16;
  int32_t max_num_seqs = 64;
  int32_t max_num_batched_tokens = 1024;
  int32_t max_model_len = 0;        // 0: trained context, shrunk to what the KV cache holds
  bool enable_prefix_caching = true;
  SchedulingPolicy policy = SchedulingPolicy::Fcfs;
  int32_t long_prefill_token_threshold = 0;
  // Testing aid: the engine thread (start()) sleeps this long after every step, so tests can hold a
  // request in flight for a known time on any machine. 0 in production.
  double debug_step_delay_s = 0;
};

struct GenerateRequest {
  std::vector<int32_t> prompt;           // token ids (BOS already added when the model wants it)
  SamplingParams sampling;
  int32_t max_tokens = 16;
  int32_t min_tokens = 0;
  std::vector<std::string> stop;         // stop strings (not included in the output text)
  std::vector<int32_t> stop_token_ids;   // in addition to the model's end-of-generation tokens
  bool ignore_eos = false;
  bool include_stop_str_in_output = false;
  bool skip_special_tokens = true;
  int32_t n = 1;                         // choices; they share the prompt's KV blocks
  int32_t priority = 0;
  // Fail the request (FinishReason::Error, stop_reason "timeout") if it has not been scheduled this
  // long after submission. 0: wait forever.
  double queue_timeout_s = 0;
};

using Clock = std::chrono::steady_clock;

// Streamed to the submitter's callback on the engine thread; the callback must not block.
struct RequestOutput {
  uint64_t request_id = 0;
  int32_t index = 0;                   // choice index (n > 1)
  std::vector<int32_t> token_ids;      // new tokens since the previous output for this choice
  std::vector<SampleResult> logprobs;  // one per new token when sampling.logprobs >= 0
  std::string text;                    // new text (complete UTF-8, stop strings held back/removed)
  bool finished = false;
  FinishReason finish_reason = FinishReason::None;
  std::string stop_reason;             // the stop string or token that ended it, or an error message
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;       // total so far for this choice
  int32_t cached_prompt_tokens = 0;    // prompt tokens served from the prefix cache
};

using OutputCallback = std::function<void(const RequestOutput&)>;

// Per-request timings (engine clock), reported once when a request (all its choices) ends.
struct RequestTimings {
  uint64_t request_id = 0;
  Clock::time_point arrival, first_scheduled, first_token, last_token, finished;
  std::vector<double> itl_s;  // gaps between consecutive tokens of choice 0
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;  // all choices
  int32_t num_preemptions = 0;
  FinishReason finish_reason = FinishReason::None;
  bool scheduled = false;
  bool produced_token = false;
};

struct StepStats {
  int32_t num_seqs = 0;
  int32_t num_tokens = 0;
  int32_t num_prefill_tokens = 0;
  int32_t num_decode_tokens = 0;
  double seconds = 0;
};

// Hooks for metrics (called on the engine thread; must be cheap).
class EngineObserver {
 public:
  virtual ~EngineObserver() = default;
  virtual void on_step(const StepStats&) {}
  // Once per request, when it is first scheduled (it leaves the waiting queue); timings has
  // request_id, arrival, first_scheduled and prompt_tokens set.
  virtual void on_request_scheduled(const RequestTimings&) {}
  virtual void on_request_done(const RequestTimings&) {}
};

struct MemoryPlan {
  uint64_t weight_bytes = 0;
  uint64_t kv_bytes = 0;
  int64_t num_blocks = 0;
  int64_t kv_tokens = 0;
  int32_t max_model_len = 0;
  int64_t max_full_sequences = 0;  // concurrent sequences of max_model_len that fit
  std::string kv_dtype;
  std::string note;                // e.g. why max_model_len was lowered
};

struct EngineStats {
  SchedulerStats sched;
  uint64_t prompt_tokens_total = 0;
  uint64_t generation_tokens_total = 0;
  uint64_t requests_finished = 0;
  uint64_t steps = 0;
};

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(const EngineConfig& config);
  ~Engine();

  const Model& model() const { return *model_; }
  std::shared_ptr<const Tokenizer> tokenizer() const { return tokenizer_; }
  const MemoryPlan& memory_plan() const { return plan_; }
  const EngineConfig& config() const { return config_; }
  int32_t max_model_len() const { return plan_.max_model_len; }

  // Validates and queues a request (thread-safe). Errors describe what is wrong with it.
  Result<uint64_t> submit(GenerateRequest request, OutputCallback callback);
  // Aborts a request and frees its KV blocks at the next step boundary (thread-safe, idempotent).
  void abort(uint64_t request_id);

  // Background mode: a thread runs steps while there is work.
  void start();
  void stop();  // finishes the current step, aborts nothing, joins the thread
  // Foreground mode (when not started): one step; false when there was nothing to do.
  bool step();
  void run_until_idle();

  void set_observer(EngineObserver* observer);  // before start()
  EngineStats stats() const;                    // thread-safe snapshot
  bool idle() const;

  struct Impl;

 private:
  Engine() = default;
  EngineConfig config_;
  std::shared_ptr<const Model> model_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  MemoryPlan plan_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tmill
