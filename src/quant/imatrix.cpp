#include "quant/imatrix.h"

namespace tmill {

void Imatrix::accumulate(const std::string& weight_name, const float* x, int64_t n_tokens, int64_t n_cols,
                         int64_t mat, int64_t n_mat) {
  ImatrixEntry& e = entries[weight_name];
  if (e.counts.empty()) {
    e.counts.assign(static_cast<size_t>(n_mat), 0.0f);
    e.sums.assign(static_cast<size_t>(n_mat * n_cols), 0.0f);
  }
  float* s = e.sums.data() + mat * n_cols;
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t j = 0; j < n_cols; ++j) s[j] += x[t * n_cols + j] * x[t * n_cols + j];
  e.counts[static_cast<size_t>(mat)] += static_cast<float>(n_tokens);
}

std::optional<std::vector<float>> Imatrix::importance(const std::string& weight_name) const {
  auto it = entries.find(weight_name);
  if (it == entries.end() || it->second.counts.empty()) return std::nullopt;
  const ImatrixEntry& e = it->second;
  const int64_t n_cols = e.n_cols();
  std::vector<float> out(e.sums.size());
  for (size_t m = 0; m < e.counts.size(); ++m) {
    const float c = e.counts[m];
    for (int64_t j = 0; j < n_cols; ++j) {
      const size_t k = m * static_cast<size_t>(n_cols) + static_cast<size_t>(j);
      out[k] = c > 0.0f ? e.sums[k] / c : 1.0f;
    }
  }
  return out;
}

}  // namespace tmill
