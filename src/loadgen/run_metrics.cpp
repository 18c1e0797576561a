#include "loadgen/run_metrics.h"

#include <algorithm>
#include <cmath>

namespace tmill::loadgen {

double request_tpot_ms(const RequestResult& r) {
  if (r.output_tokens <= 1) return 0.0;
  return (r.e2el_s - r.ttft_s) * 1000.0 / static_cast<double>(r.output_tokens - 1);
}

std::vector<double> request_itls_ms(const RequestResult& r) {
  std::vector<double> out;
  for (size_t i = 1; i < r.chunk_s.size(); ++i) out.push_back((r.chunk_s[i] - r.chunk_s[i - 1]) * 1000.0);
  return out;
}

RunMetrics compute_run_metrics(const RunResult& run, const SloConfig& slo, double bucket_s) {
  RunMetrics m;
  m.duration_s = run.duration_s;
  m.peak_concurrency = run.peak_concurrency;
  m.goodput_enabled = slo.any();
  std::vector<double> ttft, tpot, itl, e2el;
  std::vector<LatencySample> lat;
  for (const auto& r : run.requests) {
    if (!r.success) {
      ++m.failed;
      ++m.failures[failure_label(r.failure, r.http_status)];
      if (m.first_error.empty()) m.first_error = r.error;
      continue;
    }
    ++m.completed;
    m.input_tokens += r.prompt_tokens;
    m.output_tokens += r.output_tokens;
    if (!r.usage_reported) ++m.usage_missing;
    const double tp = request_tpot_ms(r);
    if (r.output_tokens > 1) tpot.push_back(tp);
    ttft.push_back(r.ttft_s * 1000.0);
    e2el.push_back(r.e2el_s * 1000.0);
    auto gaps = request_itls_ms(r);
    itl.insert(itl.end(), gaps.begin(), gaps.end());
    lat.push_back({r.ttft_s * 1000.0, tp, r.e2el_s * 1000.0});
  }
  if (m.duration_s > 0) {
    m.request_throughput = m.completed / m.duration_s;
    m.output_throughput = static_cast<double>(m.output_tokens) / m.duration_s;
    m.total_token_throughput = static_cast<double>(m.input_tokens + m.output_tokens) / m.duration_s;
  }
  if (m.goodput_enabled) {
    m.good = static_cast<int>(count_good(lat, slo));
    m.request_goodput = m.duration_s > 0 ? m.good / m.duration_s : 0;
  }
  m.ttft_ms = summarize(std::move(ttft));
  m.tpot_ms = summarize(std::move(tpot));
  m.itl_ms = summarize(std::move(itl));
  m.e2el_ms = summarize(std::move(e2el));

  // Timeline in fixed slices over the whole run.
  if (bucket_s > 0 && run.duration_s > 0) {
    const size_t n = static_cast<size_t>(std::ceil(run.duration_s / bucket_s)) + 1;
    m.timeline.resize(n);
    for (size_t i = 0; i < n; ++i) m.timeline[i].t = static_cast<double>(i) * bucket_s;
    auto slot = [&](double t) { return std::min(n - 1, static_cast<size_t>(std::max(0.0, t) / bucket_s)); };
    for (const auto& r : run.requests) {
      const double end = r.send_s + r.e2el_s;
      if (r.success) ++m.timeline[slot(end)].completed;
      else ++m.timeline[slot(end)].errors;
      if (!r.chunk_s.empty()) {
        double per = 1.0;
        if (r.success && r.usage_reported) per = static_cast<double>(r.output_tokens) / r.chunk_s.size();
        for (double c : r.chunk_s) m.timeline[slot(r.send_s + c)].output_tokens += per;
      }
      // Time in flight, spread over the slices it overlaps.
      for (size_t b = slot(r.send_s); b <= slot(end); ++b) {
        const double lo = std::max(r.send_s, b * bucket_s), hi = std::min(end, (b + 1) * bucket_s);
        if (hi > lo) m.timeline[b].concurrency += (hi - lo) / bucket_s;
      }
    }
    for (const auto& b : m.timeline) m.max_output_tokens_per_s = std::max(m.max_output_tokens_per_s, b.output_tokens / bucket_s);
  }
  return m;
}

}  // namespace tmill::loadgen
