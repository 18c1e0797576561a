// The server's Prometheus metrics: vLLM's names (vllm:*) where vLLM has the figure, tokenmill:* for
// the rest. Fed from three places:
//  - the engine thread, through EngineObserver (steps, scheduling, request timings);
//  - per-request output callbacks (TTFT from HTTP arrival, end-to-end latency);
//  - the HTTP handlers (rejections, failures, client aborts);
// plus a collector that copies engine and process figures in at scrape time.
// Also keeps the admission count: requests submitted to the engine and not yet scheduled.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "server/metrics_registry.h"

namespace tmill::server {

class ServerMetrics : public EngineObserver {
 public:
  // Series go to `shared` (several models, one /metrics) or, when null, to a registry of its own.
  explicit ServerMetrics(std::string model_name, MetricsRegistry* shared = nullptr);

  // Once the engine is loaded: scrape-time gauges read its stats; histograms sized to its context.
  void attach_engine(const Engine* engine, double load_seconds);
  // Before the engine is freed (the model is unloaded): its gauges stop being read.
  void detach_engine();

  // HTTP side.
  void on_first_token(double ttft_s, int32_t prompt_tokens);
  void on_request_end(double e2e_s);
  // Failure reasons: invalid_request, context_length_exceeded, unauthorized, not_found,
  // method_not_allowed, payload_too_large, queue_full, queue_timeout, unavailable, engine_error,
  // rate_limited (an API key's limits).
  void on_failure(const std::string& reason);
  void on_client_abort();

  // Admission (see class comment). try_admit adds k if the count stays within `limit`.
  bool try_admit(int64_t k, int64_t limit);
  void cancel_admission(int64_t k);  // submit failed
  int64_t queued() const { return queued_.load(); }

  // LoRA: vLLM's vllm:lora_requests_info (running / waiting adapters, max_lora), from the engine
  // request ids of adapter requests (track_lora, after submit) and the observer's events.
  void enable_lora() { lora_enabled_.store(true); }
  void track_lora(const std::vector<uint64_t>& ids, const std::string& adapter);

  // EngineObserver (engine thread).
  void on_step(const StepStats& s) override;
  void on_request_scheduled(const RequestTimings& t) override;
  void on_request_done(const RequestTimings& t) override;

  std::string render() { return reg_.render(); }
  MetricsRegistry& registry() { return reg_; }
  const std::string& model_name() const { return model_name_; }

 private:
  Labels model() const { return {{"model_name", model_name_}}; }
  Labels model_and(const std::string& k, const std::string& v) const { return {{"model_name", model_name_}, {k, v}}; }
  void collect();

  std::string model_name_;
  std::unique_ptr<MetricsRegistry> own_reg_;
  MetricsRegistry& reg_;
  std::mutex engine_mu_;  // collect() reads the engine's stats; detach_engine() waits for it
  // Series updated on hot paths (created in the constructor / attach_engine, never removed).
  Histogram *ttft_, *e2e_, *itl_, *tpot_, *queue_, *prefill_, *decode_, *inference_, *iter_tokens_, *batch_size_;
  Histogram *prompt_hist_ = nullptr, *gen_hist_ = nullptr;
  Counter *prompt_tokens_, *client_aborts_, *timeouts_, *rejected_, *success_stop_, *success_length_, *success_abort_;
  std::atomic<const Engine*> engine_{nullptr};
  // LoRA request states; events that arrive before track_lora (the engine may schedule a request
  // before submit returns its id) wait in a bounded list of recent ids.
  struct LoraReq {
    std::string adapter;
    bool running = false;
  };
  std::atomic<bool> lora_enabled_{false};
  std::mutex lora_mu_;
  std::map<uint64_t, LoraReq> lora_reqs_;
  std::deque<std::pair<uint64_t, bool>> lora_early_;  // (id, done) of untracked ids, newest last
  void lora_event(uint64_t id, bool done);
  std::atomic<int64_t> queued_{0};
  std::atomic<int32_t> max_model_len_{0};
  double load_seconds_ = 0;
  std::chrono::system_clock::time_point start_wall_;
  std::chrono::steady_clock::time_point start_mono_;
};

// Process figures from /proc and getrusage (0 when unknown).
uint64_t process_resident_bytes();
double process_cpu_seconds();

}  // namespace tmill::server
