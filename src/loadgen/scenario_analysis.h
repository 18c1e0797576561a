// Pure analyses behind the scenario verdicts (unit-tested on synthetic request results).
#pragma once

#include <map>
#include <optional>
#include <string>
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

// Recovery with --restart-command: the command (started at `command_start_s`, run-relative) kills
// and restarts the server under load. The outage is every request that failed and ended after the
// command started; the server serves again at the first token of the first successful request sent
// after the last of those failures. Failures split into explicit errors (an HTTP error status or an
// error event: e.g. 503 while the new server loads), refused (no connection could be made: nothing
// listened, the request never reached a server) and lost (sent, then no complete answer: connection
// dropped, stream cut, timeout) - the requests a restart loses.
struct RestartAnalysis {
  int sent = 0, succeeded = 0, explicit_errors = 0, refused = 0, lost = 0;
  std::map<std::string, int> lost_by_kind;  // failure_label -> count, for the lost ones
  bool outage_seen = false;   // some request failed after the command started
  bool served_again = false;  // a request succeeded after the outage
  double outage_first_s = 0;  // run-relative end of the first failure after the command started
  double time_to_serve_s = 0; // command start -> first token of the first success after the outage
  double before_p50_ms = 0;   // TTFT p50 of the successes before the command started
  double after_p50_ms = 0;    // TTFT p50 of the successes sent once the server served again
};
RestartAnalysis analyze_restart(const RunResult& run, double command_start_s);

}  // namespace tmill::loadgen
