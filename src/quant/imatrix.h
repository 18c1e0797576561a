// Importance matrix ("imatrix"): for each weight matrix W (y = W x), statistics of its input
// activations x collected over a calibration text. The quantizers weight each column's rounding
// error by the column's mean squared activation (Imatrix::importance gives the vector quantize_row
// takes). This is the in-memory form only; its files are convert/imatrix_file.h's.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tmill {

struct ImatrixEntry {
  std::vector<float> sums;    // n_mat * n_cols, matrix-major
  std::vector<float> counts;  // n_mat
  int64_t n_cols() const { return counts.empty() ? 0 : static_cast<int64_t>(sums.size() / counts.size()); }
};

struct Imatrix {
  std::vector<std::string> datasets;
  int64_t chunk_count = 0;
  int64_t chunk_size = 0;
  std::map<std::string, ImatrixEntry> entries;  // keyed by weight tensor name ("blk.0.attn_q.weight")

  // Adds one batch of activations for `weight_name`: x is n_tokens rows of n_cols (matrix `mat`).
  void accumulate(const std::string& weight_name, const float* x, int64_t n_tokens, int64_t n_cols,
                  int64_t mat = 0, int64_t n_mat = 1);
  // Per-column importance (mean squared activation), n_mat * n_cols values; nullopt if absent.
  std::optional<std::vector<float>> importance(const std::string& weight_name) const;
};

}  // namespace tmill
