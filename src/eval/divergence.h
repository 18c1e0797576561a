// Per-token quantities of next-token distributions (all in float64, natural log) and the summary
// statistics perplexity / KL-divergence reports are made of.
#pragma once

#include <cstdint>
#include <vector>

namespace tmill::eval {

// log(sum_i exp(logits[i])), stable.
double log_sum_exp(const float* logits, int64_t n);
// Negative log-likelihood of `target` under softmax(logits): lse(logits) - logits[target].
double token_nll(const float* logits, int64_t n, int32_t target);
// Index of the largest logit (lowest index on ties).
int32_t argmax(const float* logits, int64_t n);

// One scored token, reference distribution P = softmax(ref) against Q = softmax(model).
struct TokenComparison {
  double kld = 0;        // KL(P || Q) = sum_i P_i (log P_i - log Q_i), clamped at 0 (rounding)
  double nll_ref = 0;    // -log P(target)
  double nll_model = 0;  // -log Q(target)
  bool same_top1 = false;
};
// Identical rows give kld == 0 and same_top1 exactly.
TokenComparison compare_token(const float* ref, const float* model, int64_t n, int32_t target);

// Mean, its standard error and order statistics of a sample.
struct SampleSummary {
  int64_t n = 0;
  double mean = 0;
  double stderr_mean = 0;  // sqrt(var / (n - 1)), var = mean(x^2) - mean^2 (as llama.cpp); 0 when n < 2
  double min = 0, median = 0, p90 = 0, p95 = 0, p99 = 0, max = 0;
};
// Quantiles interpolate linearly between order statistics (q * (n - 1)).
SampleSummary summarize(std::vector<double> values);
double quantile_sorted(const std::vector<double>& sorted, double q);

// Perplexity from per-token NLLs: exp(mean), with its standard error exp(mean) * stderr(mean).
struct PplStats {
  int64_t tokens = 0;
  double mean_nll = 0;
  double nll_stderr = 0;
  double ppl = 0;
  double ppl_stderr = 0;
};
PplStats ppl_stats(const std::vector<double>& nll);

}  // namespace tmill::eval
