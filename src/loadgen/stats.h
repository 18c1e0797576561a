// Statistics over per-request measurements: numpy-compatible percentiles, summaries, goodput.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"

namespace tmill::loadgen {

// Percentile of an ascending-sorted sample with linear interpolation between closest ranks
// (numpy.percentile's default "linear" method): rank = p/100 * (n-1). Empty input gives 0.
double percentile_sorted(const std::vector<double>& sorted, double p);

// Summary of a sample (population std, ddof=0, like numpy.std). All zero when empty.
struct Summary {
  size_t count = 0;
  double mean = 0, std = 0, p50 = 0, p90 = 0, p95 = 0, p99 = 0, max = 0, min = 0;
};
Summary summarize(std::vector<double> values);

// Service-level objectives for goodput (milliseconds); unset ones are not checked.
struct SloConfig {
  std::optional<double> ttft_ms, tpot_ms, e2el_ms;
  bool any() const { return ttft_ms || tpot_ms || e2el_ms; }
};
// Parses "ttft:500 tpot:50 e2el:3000" items (one per vector entry, or space-separated).
Result<SloConfig> parse_slo(const std::vector<std::string>& items);

// One successful request as goodput sees it (milliseconds). tpot_ms is 0 for requests with at
// most one output token, as vLLM counts them.
struct LatencySample {
  double ttft_ms = 0, tpot_ms = 0, e2el_ms = 0;
};
// Requests meeting every configured SLO (value <= SLO), as DistServe/vLLM define goodput;
// goodput in req/s is this count divided by the run's duration.
size_t count_good(const std::vector<LatencySample>& samples, const SloConfig& slo);

}  // namespace tmill::loadgen
