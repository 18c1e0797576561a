// Importance-matrix collection (llama.cpp `llama-imatrix`): run a calibration text through the
// model and add up, for every weight matrix W of the transformer blocks (y = W x), the squares of
// each input column x_j over all tokens. Saved with save_imatrix (convert/imatrix_file.h) and consumed by
// `tokenmill quantize --imatrix`.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/result.h"
#include "eval/logit_stream.h"
#include "model/forward.h"
#include "quant/imatrix.h"

namespace tmill::eval {

// Adds every observed product input of a "blk.*" weight (and of the output matrix when
// include_output) to an Imatrix.
class ImatrixCollector : public ActivationObserver {
 public:
  explicit ImatrixCollector(Imatrix* out, bool include_output = false) : out_(out), include_output_(include_output) {}
  void on_matmul_input(const std::string& weight_name, const float* x, int64_t n_rows, int64_t n_cols) override;
  // MoE experts: one sum and count per expert, as llama-imatrix keeps them for 3-D weights
  void on_expert_matmul_input(const std::string& weight_name, int64_t expert, int64_t n_expert, const float* x,
                              int64_t n_rows, int64_t n_cols) override;

 private:
  Imatrix* out_;
  bool include_output_;
};

struct ImatrixOptions {
  bool include_output = false;  // also collect the output projection (llama-imatrix --process-output)
  std::string dataset;          // recorded in imatrix.datasets
};

// Runs every chunk (all positions, BOS-prefixed chunks from make_chunks) through the stream with
// the collector attached. chunk_count / chunk_size are set from the chunks.
Result<Imatrix> collect_imatrix(LogitStream& stream, const std::vector<std::vector<int32_t>>& chunks,
                                const ImatrixOptions& opt, const std::function<void(int64_t, int64_t)>& progress = {});

}  // namespace tmill::eval
