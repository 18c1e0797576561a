// Pure analyses behind the scenario verdicts (unit-tested on synthetic request results).
#pragma once

#include <optional>
#include <vector>

#include "loadgen/runner.h"

namespace tmill::loadgen {

// Concurrency sweep: the first level whose p99 TTFT exceeds the SLO (the "knee"), if any.
// `levels` and `p99_ttft_ms` are parallel, in sweep order.
std::optional<int> find_knee(const std::vector<int>& levels, const std::vector<double>& p99_ttft_ms,
                             double slo_ttft_ms);

// Long generations: per-token gap (ITL) by position in the output, in `buckets` equal slices of
// each request's chunk sequence; early = first slice, late = last slice, averaged over requests
// with at least 2*buckets chunks.
struct DriftAnalysis {
  int requests_used = 0;
  double early_ms = 0, late_ms = 0, drift_pct = 0;
  std::vector<double> by_position_ms;  // mean gap per slice
};
DriftAnalysis analyze_itl_drift(const RunResult& run, int buckets = 10);

// Recovery: baseline = p50 TTFT of successful phase-0 requests; after the overload (phase 1) ends,
// slide a window of `window` consecutive phase-2 requests (by send time) and report the first one
// whose p50 TTFT is within the limit: max(`factor` x baseline, baseline + `slack_ms`). The absolute
// slack keeps a baseline of a millisecond or two (a fast server on loopback) from failing on OS
// scheduling jitter alone; for real models, whose TTFT is tens of milliseconds or more, the factor
// decides. Lost requests are failures without an explicit error response (timeouts, connection
// drops, broken streams).
struct RecoveryAnalysis {
  double baseline_p50_ms = 0;
  double overload_p50_ms = 0;
  double after_p50_ms = 0;
  double limit_ms = 0;  // the rolling p50 TTFT that counts as recovered
  bool recovered = false;
  double recovery_s = 0;  // from the end of the overload to the send time of the first good window
  int window = 0;
  int sent = 0, succeeded = 0, explicit_errors = 0, lost = 0;
  double overload_end_s = 0;  // run-relative
};
inline constexpr double kRecoverySlackMs = 5.0;
RecoveryAnalysis analyze_recovery(const RunResult& run, double factor = 1.5, int window = 0,
                                  double slack_ms = kRecoverySlackMs);

}  // namespace tmill::loadgen
