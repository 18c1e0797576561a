// The load engine: an arrival scheduler (the calling thread) hands requests to a pool of worker
// threads, each owning one kept-alive HTTP client; a counting gate enforces the concurrency limit.
//
//   count-driven run: one request per prompt, sent at Poisson/gamma arrival times (or all at
//                     once), at most `max_concurrency` in flight.
//   time-driven run:  a list of phases (duration, concurrency, rate), prompts cycled; used by the
//                     recovery scenario (normal -> overload -> normal).
#pragma once

#include <chrono>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "loadgen/client.h"
#include "loadgen/datasets.h"
#include "loadgen/options.h"

namespace tmill::loadgen {

class MetricsScraper;

// Shared state of one benchmark invocation.
struct BenchContext {
  BenchOptions opts;
  ServerUrl url;
  std::string api_key;
  std::string model;
  int max_model_len = 0;  // from /v1/models, 0 if unknown
  std::chrono::steady_clock::time_point t0 = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> deadline;  // --time-budget
  MetricsScraper* scraper = nullptr;
  std::vector<Prompt> file_prompts;  // --dataset jsonl, loaded once up front

  double now_s() const;  // seconds since t0
  bool out_of_time() const { return deadline && std::chrono::steady_clock::now() >= *deadline; }
  double time_left_s() const;  // +inf without a budget
};

struct Phase {
  std::string name;
  double duration_s = 0;
  int concurrency = 0;  // 0: as many as workers allow
  double rate = std::numeric_limits<double>::infinity();
  double burstiness = 1.0;
};

struct RunPlan {
  std::string label;
  std::vector<Prompt> prompts;
  int max_concurrency = 0;  // 0: unlimited (bounded by opts.max_workers)
  double rate = std::numeric_limits<double>::infinity();
  double burstiness = 1.0;
  uint64_t seed = 0;
  int warmups = 0;
  std::vector<Phase> phases;  // non-empty: time-driven run
  // Time-driven: called (on the arrival thread) as each phase starts, with its index and start time
  // (seconds since the run started); it must not block.
  std::function<void(size_t phase, double start_s)> on_phase_start;
  // After a request that could not connect, its worker waits this long before taking the next one
  // (a server that is down is not hammered in a tight loop; 0: no wait).
  double connect_failure_backoff_s = 0;
  nlohmann::json params = nlohmann::json::object();  // echoed in the report
};

struct RunResult {
  std::string label;
  nlohmann::json params;
  std::vector<RequestResult> requests;  // in send order
  double start_s = 0;     // run start, seconds since the benchmark started (aligns with metrics)
  double duration_s = 0;  // first send -> last completion
  int peak_concurrency = 0;
  bool truncated = false;  // stopped early by the time budget
  std::vector<double> phase_starts_s;  // time-driven: phase start offsets from the run start
  std::vector<std::string> phase_names;
};

RunResult execute_run(const BenchContext& ctx, const RunPlan& plan);

}  // namespace tmill::loadgen
