#include "loadgen/scenario_analysis.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "loadgen/stats.h"

namespace tmill::loadgen {

std::optional<int> find_knee(const std::vector<int>& levels, const std::vector<double>& p99,
                             double slo) {
  for (size_t i = 0; i < levels.size() && i < p99.size(); ++i)
    if (p99[i] > slo) return levels[i];
  return std::nullopt;
}

DriftAnalysis analyze_itl_drift(const RunResult& run, int buckets) {
  DriftAnalysis d;
  buckets = std::max(buckets, 2);
  std::vector<double> sum(static_cast<size_t>(buckets), 0.0);
  std::vector<int> cnt(static_cast<size_t>(buckets), 0);
  for (const auto& r : run.requests) {
    if (!r.success || r.chunk_s.size() < static_cast<size_t>(2 * buckets) + 1) continue;
    ++d.requests_used;
    const size_t gaps = r.chunk_s.size() - 1;
    // Tokens per chunk, to report per-token gaps when a server sends several tokens per chunk.
    double per = 1.0;
    if (r.usage_reported && r.output_tokens > static_cast<int>(r.chunk_s.size()))
      per = static_cast<double>(r.output_tokens) / static_cast<double>(r.chunk_s.size());
    for (size_t i = 0; i < gaps; ++i) {
      size_t b = i * static_cast<size_t>(buckets) / gaps;
      sum[b] += (r.chunk_s[i + 1] - r.chunk_s[i]) * 1000.0 / per;
      ++cnt[b];
    }
  }
  if (d.requests_used == 0) return d;
  d.by_position_ms.resize(static_cast<size_t>(buckets));
  for (size_t b = 0; b < sum.size(); ++b) d.by_position_ms[b] = cnt[b] ? sum[b] / cnt[b] : 0.0;
  d.early_ms = d.by_position_ms.front();
  d.late_ms = d.by_position_ms.back();
  d.drift_pct = d.early_ms > 0 ? (d.late_ms / d.early_ms - 1.0) * 100.0 : 0.0;
  return d;
}

static double p50(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return percentile_sorted(v, 50);
}

RecoveryAnalysis analyze_recovery(const RunResult& run, double factor, int window, double slack_ms) {
  RecoveryAnalysis a;
  std::vector<double> base, over;
  std::vector<const RequestResult*> after;
  for (const auto& r : run.requests) {
    ++a.sent;
    if (r.success) ++a.succeeded;
    else if (is_explicit_failure(r.failure)) ++a.explicit_errors;
    else ++a.lost;
    if (!r.success) continue;
    if (r.phase == 0) base.push_back(r.ttft_s * 1000.0);
    else if (r.phase == 1) over.push_back(r.ttft_s * 1000.0);
    else after.push_back(&r);
  }
  a.overload_end_s = run.phase_starts_s.size() > 2 ? run.phase_starts_s[2] : run.duration_s;
  a.baseline_p50_ms = p50(base);
  a.overload_p50_ms = p50(over);
  std::vector<double> after_ttft;
  for (auto* r : after) after_ttft.push_back(r->ttft_s * 1000.0);
  a.after_p50_ms = p50(after_ttft);
  a.limit_ms = std::max(factor * a.baseline_p50_ms, a.baseline_p50_ms + slack_ms);
  if (base.empty() || after.empty()) return a;
  std::sort(after.begin(), after.end(), [](auto* x, auto* y) { return x->send_s < y->send_s; });
  a.window = window > 0 ? window : std::clamp(static_cast<int>(after.size()) / 5, 3, 10);
  a.window = std::min<int>(a.window, static_cast<int>(after.size()));
  for (size_t i = 0; i + static_cast<size_t>(a.window) <= after.size(); ++i) {
    std::vector<double> w;
    for (size_t k = i; k < i + static_cast<size_t>(a.window); ++k) w.push_back(after[k]->ttft_s * 1000.0);
    if (p50(w) <= a.limit_ms) {
      a.recovered = true;
      a.recovery_s = std::max(0.0, after[i]->send_s - a.overload_end_s);
      break;
    }
  }
  return a;
}

RestartAnalysis analyze_restart(const RunResult& run, double command_start_s) {
  RestartAnalysis a;
  double last_fail_send = -1;
  a.outage_first_s = std::numeric_limits<double>::infinity();
  std::vector<double> before;
  for (const auto& r : run.requests) {
    ++a.sent;
    if (r.success) {
      ++a.succeeded;
      if (r.send_s + r.ttft_s < command_start_s) before.push_back(r.ttft_s * 1000.0);
      continue;
    }
    if (is_explicit_failure(r.failure)) ++a.explicit_errors;
    else if (r.connect_failed) ++a.refused;
    else {
      ++a.lost;
      ++a.lost_by_kind[failure_label(r.failure, r.http_status)];
    }
    const double end = r.send_s + r.e2el_s;
    if (end >= command_start_s) {
      a.outage_seen = true;
      a.outage_first_s = std::min(a.outage_first_s, end);
      last_fail_send = std::max(last_fail_send, r.send_s);
    }
  }
  if (!a.outage_seen) a.outage_first_s = 0;
  a.before_p50_ms = p50(before);
  if (!a.outage_seen) return a;
  double first = std::numeric_limits<double>::infinity();
  for (const auto& r : run.requests)
    if (r.success && r.send_s > last_fail_send) first = std::min(first, r.send_s + r.ttft_s);
  if (std::isinf(first)) return a;
  a.served_again = true;
  a.time_to_serve_s = std::max(0.0, first - command_start_s);
  std::vector<double> after;
  for (const auto& r : run.requests)
    if (r.success && r.send_s >= first) after.push_back(r.ttft_s * 1000.0);
  a.after_p50_ms = p50(after);
  return a;
}

}  // namespace tmill::loadgen
