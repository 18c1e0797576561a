// Importance matrix ("imatrix"): for each weight matrix W (y = W x), statistics of its input
// activations x collected over a calibration text. The quantizers weight each column's rounding
// error by the column's mean squared activation.
//
// File format: llama.cpp's GGUF imatrix format, so files are interchangeable with llama-imatrix /
// llama-quantize:
//   metadata  general.type          string   "imatrix"
//             imatrix.datasets      [string] calibration sources
//             imatrix.chunk_count   u32      number of chunks processed
//             imatrix.chunk_size    u32      tokens per chunk
//   tensors   "<weight name>.in_sum2"  F32 ne = [n_cols, n_mat]  sum over tokens of x_j^2 per column
//             "<weight name>.counts"   F32 ne = [1, n_mat]       number of tokens summed
//   (n_mat is the number of experts for a 3-D MoE weight, else 1; other tensors are ignored.)
// The importance of column j of matrix m is in_sum2[m][j] / counts[m] (1 when counts is 0), the
// mean squared activation. load_imatrix also reads llama.cpp's legacy binary ".dat" format.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/result.h"

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

Result<Imatrix> load_imatrix(const std::string& path);
Status save_imatrix(const Imatrix& m, const std::string& path);

}  // namespace tmill
