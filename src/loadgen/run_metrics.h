// Figures of one run, computed from its per-request results the way `vllm bench serve` does:
// throughput over the run's duration, latency summaries over successful requests, goodput.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "loadgen/runner.h"
#include "loadgen/stats.h"

namespace tmill::loadgen {

// One time slice of a run (all values for [t, t + width)).
struct TimelineBucket {
  double t = 0;              // seconds since the run started
  double output_tokens = 0;  // tokens streamed in this slice (chunks weighted by usage tokens/chunk)
  int completed = 0;         // successful requests finishing in this slice
  int errors = 0;            // failed requests finishing in this slice
  double concurrency = 0;    // mean number of requests in flight
};

struct RunMetrics {
  int completed = 0, failed = 0;
  std::map<std::string, int> failures;  // failure_label -> count
  std::string first_error;
  double duration_s = 0;
  double request_throughput = 0, output_throughput = 0, total_token_throughput = 0;
  bool goodput_enabled = false;
  int good = 0;
  double request_goodput = 0;
  int64_t input_tokens = 0, output_tokens = 0;
  int usage_missing = 0;  // successful requests whose token counts are estimates (no usage chunk)
  Summary ttft_ms, tpot_ms, itl_ms, e2el_ms;
  int peak_concurrency = 0;
  double max_output_tokens_per_s = 0;
  std::vector<TimelineBucket> timeline;
};

// TPOT of one request in ms: (E2E - TTFT) / (output tokens - 1); 0 with at most one output token.
double request_tpot_ms(const RequestResult& r);
// Inter-token latencies of one request in ms: the gaps between consecutive content chunks (as vLLM
// measures ITL; a server packing several tokens per chunk shows fewer, longer gaps).
std::vector<double> request_itls_ms(const RequestResult& r);

RunMetrics compute_run_metrics(const RunResult& run, const SloConfig& slo, double bucket_s = 1.0);

}  // namespace tmill::loadgen
