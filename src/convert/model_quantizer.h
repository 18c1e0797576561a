// Whole-model quantization: GGUF in, GGUF out (same metadata and tensor order, per-tensor types from
// a recipe), with a per-tensor report. The engine of `tokenmill quantize`.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"
#include "convert/quant_recipe.h"

namespace tmill {

struct QuantTensorReport {
  std::string name;
  std::vector<int64_t> ne;
  DType from = DType::F32;
  DType to = DType::F32;
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  bool converted = false;   // false: bytes copied unchanged
  double rel_rms = 0;       // RMS(dequant(out) - in) / RMS(in), 0 for copies
  bool used_imatrix = false;
  std::string note;         // fallback explanation, missing imatrix entry, ...
};

struct QuantizeReport {
  std::vector<QuantTensorReport> tensors;
  uint64_t bytes_in = 0, bytes_out = 0;  // tensor data only
  uint64_t file_bytes_out = 0;           // the written file
  int64_t n_elements = 0;
  double seconds = 0;
  QuantModelShape shape;
  int64_t context_length = 0;  // {arch}.context_length, 0 if absent
  int64_t head_dim = 0;        // {arch}.attention.key_length, else n_embd / n_head
  int n_fallback = 0;
  // The layers with K/V and their KV heads: every layer and head_count_kv, or -- a per-layer
  // head_count_kv (lfm2: 0 for a convolution layer) -- the layers with heads and their count
  int64_t kv_layers = 0, kv_heads = 0;
  // Recurrent layers (Mamba-2 mixers, gated delta nets: the {arch}.ssm.* keys) and what one sequence's
  // state takes in them, in float32: (conv_kernel - 1) x conv channels + inner_size x state_size each.
  int64_t state_layers = 0;
  uint64_t state_bytes_per_seq = 0;

  // f16 K and V for every attention layer: 2 * kv_layers * kv_heads * head_dim * 2 bytes.
  uint64_t kv_bytes_per_token() const;
};

struct QuantizeModelOptions {
  std::string input;
  std::string output;
  // When set, the file is written here (an in-memory file, a pipe) instead of to `output`.
  std::function<Status(const void*, size_t)> output_sink;
  QuantRecipe recipe;
  QuantPlanOptions plan;          // has_imatrix is set from imatrix_path
  std::string imatrix_path;  // optional
  int threads = 0;           // 0: default_thread_count()
  // After each tensor: (tensors done, tensor count, elements done, total elements, name).
  std::function<void(size_t, size_t, int64_t, int64_t, const std::string&)> progress;
};

Result<QuantizeReport> quantize_model(const QuantizeModelOptions& opt);

}  // namespace tmill
