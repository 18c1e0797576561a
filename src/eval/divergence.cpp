#include "eval/divergence.h"

#include <algorithm>
#include <cmath>

namespace tmill::eval {

double log_sum_exp(const float* x, int64_t n) {
  float mx = x[0];
  for (int64_t i = 1; i < n; ++i) mx = std::max(mx, x[i]);
  double s = 0;
  for (int64_t i = 0; i < n; ++i) s += std::exp(static_cast<double>(x[i]) - mx);
  return mx + std::log(s);
}

double token_nll(const float* logits, int64_t n, int32_t target) { return log_sum_exp(logits, n) - logits[target]; }

int32_t argmax(const float* x, int64_t n) {
  int64_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (x[i] > x[best]) best = i;
  return static_cast<int32_t>(best);
}

TokenComparison compare_token(const float* ref, const float* model, int64_t n, int32_t target) {
  TokenComparison r;
  const double lse_p = log_sum_exp(ref, n), lse_q = log_sum_exp(model, n);
  double kld = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double lp = ref[i] - lse_p, lq = model[i] - lse_q;
    kld += std::exp(lp) * (lp - lq);
  }
  r.kld = std::max(0.0, kld);
  r.nll_ref = lse_p - ref[target];
  r.nll_model = lse_q - model[target];
  r.same_top1 = argmax(ref, n) == argmax(model, n);
  return r;
}

double quantile_sorted(const std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  const double at = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(at));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  const double f = at - static_cast<double>(lo);
  return v[lo] + (v[hi] - v[lo]) * f;
}

SampleSummary summarize(std::vector<double> v) {
  SampleSummary s;
  s.n = static_cast<int64_t>(v.size());
  if (v.empty()) return s;
  double sum = 0, sum2 = 0;
  for (double x : v) {
    sum += x;
    sum2 += x * x;
  }
  const double n = static_cast<double>(v.size());
  s.mean = sum / n;
  if (v.size() > 1) s.stderr_mean = std::sqrt(std::max(0.0, sum2 / n - s.mean * s.mean) / (n - 1));
  std::sort(v.begin(), v.end());
  s.min = v.front();
  s.max = v.back();
  s.median = quantile_sorted(v, 0.5);
  s.p90 = quantile_sorted(v, 0.9);
  s.p95 = quantile_sorted(v, 0.95);
  s.p99 = quantile_sorted(v, 0.99);
  return s;
}

PplStats ppl_stats(const std::vector<double>& nll) {
  PplStats p;
  const SampleSummary s = summarize(nll);
  p.tokens = s.n;
  p.mean_nll = s.mean;
  p.nll_stderr = s.stderr_mean;
  p.ppl = std::exp(s.mean);
  p.ppl_stderr = p.ppl * s.stderr_mean;
  return p;
}

}  // namespace tmill::eval
