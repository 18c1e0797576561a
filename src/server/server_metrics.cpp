#include "server/server_metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <set>

namespace tmill::server {

namespace {

const std::vector<double> kTtftBuckets = {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1,  0.25, 0.5,   0.75,
                                          1.0,   2.5,   5.0,  7.5,  10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kTokenLatencyBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                                  0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
const std::vector<double> kRequestLatencyBuckets = {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,  15.0, 20.0,
                                                    30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
const std::vector<double> kIterationTokenBuckets = {1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384};
const std::vector<double> kBatchBuckets = {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024};

const char* kFailureReasons[] = {"invalid_request", "context_length_exceeded", "unauthorized", "not_found",
                                 "method_not_allowed", "payload_too_large", "queue_full", "queue_timeout",
                                 "request_timeout", "unavailable", "engine_error", "rate_limited", "memory_full"};

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

}  // namespace

uint64_t process_resident_bytes() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  unsigned long long size = 0, resident = 0;
  const int n = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  if (n != 2) return 0;
  return static_cast<uint64_t>(resident) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

double process_cpu_seconds() {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) return 0;
  auto tv = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
  return tv(u.ru_utime) + tv(u.ru_stime);
}

ServerMetrics::ServerMetrics(std::string model_name, MetricsRegistry* shared)
    : model_name_(std::move(model_name)),
      own_reg_(shared ? nullptr : std::make_unique<MetricsRegistry>()),
      reg_(shared ? *shared : *own_reg_),
      start_wall_(std::chrono::system_clock::now()),
      start_mono_(std::chrono::steady_clock::now()) {
  const Labels m = model();
  auto& r = reg_;
  // Gauges and totals refreshed at scrape time (collect()) are registered here so they appear in order.
  r.gauge("vllm:num_requests_running", "Number of requests in model execution batches.", m);
  r.gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", m);
  r.gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", m);
  prompt_tokens_ = &r.counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", m);
  r.counter("vllm:generation_tokens_total", "Number of generation tokens processed.", m);
  r.counter("vllm:num_preemptions_total", "Cumulative number of preemptions from the engine.", m);
  r.counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.", m);
  r.counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.", m);
  const char* success_help = "Count of successfully processed requests.";
  success_stop_ = &r.counter("vllm:request_success_total", success_help, model_and("finished_reason", "stop"));
  success_length_ = &r.counter("vllm:request_success_total", success_help, model_and("finished_reason", "length"));
  success_abort_ = &r.counter("vllm:request_success_total", success_help, model_and("finished_reason", "abort"));
  ttft_ = &r.histogram("vllm:time_to_first_token_seconds",
                       "Histogram of time to first token in seconds (from HTTP request arrival).", kTtftBuckets, m);
  itl_ = &r.histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                      kTokenLatencyBuckets, m);
  tpot_ = &r.histogram("vllm:request_time_per_output_token_seconds",
                       "Histogram of time_per_output_token_seconds per request.", kTokenLatencyBuckets, m);
  e2e_ = &r.histogram("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
                      kRequestLatencyBuckets, m);
  queue_ = &r.histogram("vllm:request_queue_time_seconds",
                        "Histogram of time spent in WAITING phase for request.", kRequestLatencyBuckets, m);
  inference_ = &r.histogram("vllm:request_inference_time_seconds",
                            "Histogram of time spent in RUNNING phase for request.", kRequestLatencyBuckets, m);
  prefill_ = &r.histogram("vllm:request_prefill_time_seconds",
                          "Histogram of time spent in PREFILL phase for request.", kRequestLatencyBuckets, m);
  decode_ = &r.histogram("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.",
                         kRequestLatencyBuckets, m);
  iter_tokens_ = &r.histogram("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.",
                              kIterationTokenBuckets, m);

  batch_size_ = &r.histogram("tokenmill:batch_size", "Histogram of sequences per engine step.", kBatchBuckets, m);
  for (const char* reason : kFailureReasons)
    r.counter("tokenmill:request_failures_total", "Requests that failed, by reason.", model_and("reason", reason));
  timeouts_ = &r.counter("tokenmill:request_timeouts_total",
                         "Requests that waited in the queue longer than --request-timeout.", m);
  rejected_ = &r.counter("tokenmill:requests_rejected_total",
                         "Requests rejected because the admission queue was full (429).", m);
  client_aborts_ = &r.counter("tokenmill:requests_aborted_by_client_total",
                              "Requests aborted because the client disconnected.", m);
  const char* kv_help = "Out-of-KV-cache events: preemptions, and requests whose prompt could not fit the context.";
  r.counter("tokenmill:out_of_kv_events_total", kv_help, model_and("kind", "preemption"));
  r.counter("tokenmill:out_of_kv_events_total", kv_help, model_and("kind", "prompt_too_long"));
  r.gauge("tokenmill:admission_queue_requests", "Requests submitted to the engine and not yet scheduled.", m);
  r.counter("tokenmill:structured_requests_total",
            "Engine requests with an output constraint (JSON schema or object, regex, choice, grammar).", m);
  r.counter("tokenmill:grammar_compile_failures_total",
            "Output constraints refused because they do not compile (400 naming the field).", m);
  r.counter("tokenmill:grammar_mask_seconds_total",
            "Time spent computing and applying structured-output token masks, summed over threads.", m);
  r.gauge("tokenmill:model_load_seconds", "Time taken to load the model and plan memory, in seconds.", m);
  r.gauge("tokenmill:model_loaded", "1 once the model is loaded and requests are served, 0 while loading.", m);
  r.gauge("tokenmill:process_resident_memory_bytes", "Resident memory of the server process in bytes.", m);
  r.counter("tokenmill:process_cpu_seconds_total", "User and system CPU time of the server process in seconds.", m);
  r.gauge("tokenmill:server_start_time_seconds",
          "Start time of the server process since the unix epoch in seconds (restarts: changes() of this).", m);
  r.gauge("tokenmill:uptime_seconds", "Seconds since the server process started.", m);
  r.add_collector([this] { collect(); });
}

void ServerMetrics::attach_engine(const Engine* engine, double load_seconds) {
  load_seconds_ = load_seconds;
  const double max_len = std::max(1, engine->max_model_len());
  prompt_hist_ = &reg_.histogram("vllm:request_prompt_tokens", "Number of prefill tokens processed.",
                                 buckets_1_2_5(max_len), model());
  gen_hist_ = &reg_.histogram("vllm:request_generation_tokens", "Number of generation tokens processed.",
                              buckets_1_2_5(max_len), model());
  // vLLM's info gauge of the KV cache's shape (value 1): the inference gateway's prefix-cache scorer
  // reads block_size and num_gpu_blocks from it (docs/deploy.md, "What the endpoint picker reads").
  const EngineConfig& cfg = engine->config();
  reg_.gauge_replacing("vllm:cache_config_info", "Information of the LLMEngine CacheConfig.",
                       {{"model_name", model_name_},
                        {"block_size", std::to_string(cfg.block_size)},
                        {"cache_dtype", engine->memory_plan().kv_dtype},
                        {"enable_prefix_caching", cfg.enable_prefix_caching ? "True" : "False"},
                        {"num_gpu_blocks", std::to_string(engine->memory_plan().num_blocks)}},
                       "model_name", model_name_)
      .set(1);
  // Where the model's memory went (the engine's memory plan), and on a GPU the device's figures:
  // its memory and --gpu-memory-utilization's budget here, utilization and memory in use per scrape.
  const MemoryPlan& plan = engine->memory_plan();
  reg_.gauge("tokenmill:weight_memory_bytes",
             "Bytes of the model's weights as the engine holds them, by device (cpu: host memory, cuda: GPU memory).",
             model_and("device", plan.device))
      .set(static_cast<double>(plan.weight_bytes));
  reg_.gauge("tokenmill:kv_cache_memory_bytes", "Bytes of the paged KV cache, by device.", model_and("device", plan.device))
      .set(static_cast<double>(plan.kv_bytes));
  if (plan.device == "cuda" || plan.device == "cuda-emu") {  // (cuda-emu: the emulated device's, for tests)
    reg_.gauge("tokenmill:gpu_memory_total_bytes", "The GPU's memory.", model()).set(static_cast<double>(plan.device_total_bytes));
    reg_.gauge("tokenmill:gpu_memory_budget_bytes",
               "--gpu-memory-utilization times the GPU's memory: weights, activations and KV cache.", model())
        .set(static_cast<double>(plan.device_budget_bytes));
  }
  if (plan.device == "cuda") {  // NVML's, from the driver (the emulator has none: no series rather than zeros)
    reg_.gauge("tokenmill:gpu_utilization_ratio", "Share of the last sample period a kernel ran on the GPU (NVML).", model());
    reg_.gauge("tokenmill:gpu_memory_used_bytes", "GPU memory in use by every process (NVML).", model());
  }
  if (engine->config().speculative.enabled()) {  // vLLM registers these only with a speculative config
    const Labels m = model();
    reg_.counter("vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts.", m);
    reg_.counter("vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.", m);
    reg_.counter("vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.", m);
    for (int32_t p = 0; p < engine->config().speculative.num_speculative_tokens; ++p)
      reg_.counter("vllm:spec_decode_num_accepted_tokens_per_pos_total", "Accepted tokens per draft position.",
                   model_and("position", std::to_string(p)));
  }
  std::lock_guard<std::mutex> lock(engine_mu_);
  engine_.store(engine);
}

void ServerMetrics::detach_engine() {
  std::lock_guard<std::mutex> lock(engine_mu_);
  engine_.store(nullptr);
}

void ServerMetrics::collect() {
  const Labels m = model();
  auto& r = reg_;
  std::lock_guard<std::mutex> lock(engine_mu_);
  if (const Engine* e = engine_.load()) {
    const EngineStats st = e->stats();
    r.gauge("vllm:num_requests_running", "", m).set(st.num_running);
    r.gauge("vllm:num_requests_waiting", "", m).set(st.num_waiting);
    r.gauge("vllm:kv_cache_usage_perc", "", m).set(st.kv.usage);
    r.counter("vllm:generation_tokens_total", "", m).set(static_cast<double>(st.generation_tokens_total));
    r.counter("vllm:num_preemptions_total", "", m).set(static_cast<double>(st.num_preemptions));
    r.counter("tokenmill:out_of_kv_events_total", "", model_and("kind", "preemption"))
        .set(static_cast<double>(st.num_preemptions));
    r.counter("vllm:prefix_cache_queries_total", "", m).set(static_cast<double>(st.kv.prefix_query_tokens));
    r.counter("vllm:prefix_cache_hits_total", "", m).set(static_cast<double>(st.kv.prefix_hit_tokens));
    r.counter("tokenmill:structured_requests_total", "", m).set(static_cast<double>(st.structured_requests_total));
    r.counter("tokenmill:grammar_compile_failures_total", "", m)
        .set(static_cast<double>(st.grammar_compile_failures_total));
    r.counter("tokenmill:grammar_mask_seconds_total", "", m).set(st.grammar_mask_seconds_total);
    if (e->config().speculative.enabled()) {
      r.counter("vllm:spec_decode_num_drafts_total", "", m).set(static_cast<double>(st.spec_num_drafts));
      r.counter("vllm:spec_decode_num_draft_tokens_total", "", m).set(static_cast<double>(st.spec_num_draft_tokens));
      r.counter("vllm:spec_decode_num_accepted_tokens_total", "", m)
          .set(static_cast<double>(st.spec_num_accepted_tokens));
      for (size_t p = 0; p < st.spec_accepted_per_pos.size(); ++p)
        r.counter("vllm:spec_decode_num_accepted_tokens_per_pos_total", "", model_and("position", std::to_string(p)))
            .set(static_cast<double>(st.spec_accepted_per_pos[p]));
    }
    r.gauge("tokenmill:model_load_seconds", "", m).set(load_seconds_);
    if (e->memory_plan().device == "cuda") {
      if (auto u = e->device_usage(); u.ok()) {
        r.gauge("tokenmill:gpu_utilization_ratio", "", m).set(u->utilization);
        r.gauge("tokenmill:gpu_memory_used_bytes", "", m).set(static_cast<double>(u->memory_used_bytes));
      }
    }
    r.gauge("tokenmill:model_loaded", "", m).set(1);
    if (lora_enabled_.load()) {
      // vLLM's info gauge: the adapters of running and of waiting requests (comma-separated, sorted),
      // max_lora; the value is the time of the scrape.
      std::set<std::string> running, waiting;
      {
        std::lock_guard<std::mutex> l(lora_mu_);
        for (const auto& [id, q] : lora_reqs_) (q.running ? running : waiting).insert(q.adapter);
      }
      auto join = [](const std::set<std::string>& s) {
        std::string out;
        for (const auto& x : s) out += (out.empty() ? "" : ",") + x;
        return out;
      };
      r.gauge_replacing("vllm:lora_requests_info", "Running stats on lora requests.",
                        {{"model_name", model_name_},
                         {"running_lora_adapters", join(running)},
                         {"waiting_lora_adapters", join(waiting)},
                         {"max_lora", std::to_string(e->config().max_loras)}},
                        "model_name", model_name_)
          .set(std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
    }
  } else {
    r.gauge("tokenmill:model_loaded", "", m).set(0);
  }
  r.gauge("tokenmill:admission_queue_requests", "", m).set(static_cast<double>(queued_.load()));
  r.gauge("tokenmill:process_resident_memory_bytes", "", m).set(static_cast<double>(process_resident_bytes()));
  r.counter("tokenmill:process_cpu_seconds_total", "", m).set(process_cpu_seconds());
  r.gauge("tokenmill:server_start_time_seconds", "", m)
      .set(std::chrono::duration<double>(start_wall_.time_since_epoch()).count());
  r.gauge("tokenmill:uptime_seconds", "", m)
      .set(std::chrono::duration<double>(std::chrono::steady_clock::now() - start_mono_).count());
}

void ServerMetrics::on_first_token(double ttft_s, int32_t prompt_tokens) {
  ttft_->observe(ttft_s);
  prompt_tokens_->inc(prompt_tokens);
}

void ServerMetrics::on_request_end(double e2e_s) { e2e_->observe(e2e_s); }

void ServerMetrics::on_failure(const std::string& reason) {
  reg_.counter("tokenmill:request_failures_total", "Requests that failed, by reason.", model_and("reason", reason)).inc();
  if (reason == "queue_full") rejected_->inc();
  if (reason == "queue_timeout" || reason == "request_timeout") timeouts_->inc();
  if (reason == "context_length_exceeded")
    reg_.counter("tokenmill:out_of_kv_events_total", "", model_and("kind", "prompt_too_long")).inc();
}

void ServerMetrics::on_client_abort() { client_aborts_->inc(); }

bool ServerMetrics::try_admit(int64_t k, int64_t limit) {
  int64_t cur = queued_.load();
  do {
    if (limit > 0 && cur + k > limit) return false;
  } while (!queued_.compare_exchange_weak(cur, cur + k));
  return true;
}

void ServerMetrics::cancel_admission(int64_t k) { queued_.fetch_sub(k); }

void ServerMetrics::on_step(const StepStats& s) {
  iter_tokens_->observe(s.num_tokens);
  batch_size_->observe(s.num_seqs);
}

void ServerMetrics::on_request_scheduled(const RequestTimings& t) {
  queued_.fetch_sub(1);
  lora_event(t.request_id, false);
}

void ServerMetrics::track_lora(const std::vector<uint64_t>& ids, const std::string& adapter) {
  std::lock_guard<std::mutex> lock(lora_mu_);
  for (uint64_t id : ids) {
    LoraReq r{adapter, false};
    bool done = false;
    for (auto it = lora_early_.begin(); it != lora_early_.end();)
      if (it->first == id) {
        r.running = true;
        done |= it->second;
        it = lora_early_.erase(it);
      } else {
        ++it;
      }
    if (!done) lora_reqs_[id] = std::move(r);
  }
}

void ServerMetrics::lora_event(uint64_t id, bool done) {
  if (!lora_enabled_.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(lora_mu_);
  if (auto it = lora_reqs_.find(id); it != lora_reqs_.end()) {
    if (done) lora_reqs_.erase(it);
    else it->second.running = true;
    return;
  }
  for (auto& e : lora_early_)
    if (e.first == id) {
      e.second |= done;
      return;
    }
  lora_early_.emplace_back(id, done);
  if (lora_early_.size() > 4096) lora_early_.pop_front();
}

void ServerMetrics::on_request_done(const RequestTimings& t) {
  lora_event(t.request_id, true);
  if (!t.scheduled) queued_.fetch_sub(1);  // left the queue without being scheduled (abort, timeout)
  switch (t.finish_reason) {
    case FinishReason::Stop: success_stop_->inc(); break;
    case FinishReason::Length: success_length_->inc(); break;
    case FinishReason::Abort: success_abort_->inc(); break;
    default: break;
  }
  if (t.finish_reason == FinishReason::Error) return;
  if (t.scheduled) {
    queue_->observe(seconds(t.arrival, t.first_scheduled));
    inference_->observe(seconds(t.first_scheduled, t.finished));
    if (t.produced_token) prefill_->observe(seconds(t.first_scheduled, t.first_token));
  }
  if (t.produced_token) {
    decode_->observe(seconds(t.first_token, t.last_token));
    for (double gap : t.itl_s) itl_->observe(gap);
    if (!t.itl_s.empty()) {
      double sum = 0;
      for (double gap : t.itl_s) sum += gap;
      tpot_->observe(sum / static_cast<double>(t.itl_s.size()));
    }
  }
  if (prompt_hist_) prompt_hist_->observe(t.prompt_tokens);
  if (gen_hist_) gen_hist_->observe(t.completion_tokens);
}

}  // namespace tmill::server
