// A LoRA adapter loaded against a base model (file format: formats/lora_gguf.h). Values are kept
// in float32 (any dequantizable type in the file), laid out per weight the forward passes multiply
// with: for each of a layer's q/k/v/o/gate/up/down matrices (row views of phi3's fused attn_qkv and
// ffn_up get the matching row range of B) and the output matrix, y += scale * B (A x); for the
// token embedding, row t += scale * B a_t. Immutable after load: shared by every request using it.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "kernels/matmul.h"
#include "model/model.h"

namespace tmill {

// The base matrices an adapter can touch, per layer.
enum class LoraSlot : uint8_t { Q, K, V, O, Gate, Up, Down };
inline constexpr int kLoraSlots = 7;

// One base matrix's low-rank update: W' = W + user_scale * factor * B A.
struct LoraWeight {
  Matrix a;       // (rank rows, cols) float32; token embedding: (n_vocab rows, rank)
  Matrix b;       // (rows, rank) float32; the rows of this view for a fused tensor's view (the oracle's)
  PreparedMatrix pa;
  std::vector<float> bt;  // (rank, rows): B transposed, so B's product is added as rank axpys per row
  float factor = 1.0f;  // alpha / rank, or 1 without alpha
  int64_t rank() const { return b.cols; }
};

class LoraAdapter {
 public:
  // Reads and checks the adapter against `base` (architecture, tensor names and shapes).
  static Result<std::shared_ptr<const LoraAdapter>> load(const std::string& path, const Model& base);

  // Null when the adapter does not touch that matrix.
  const LoraWeight* layer(int64_t l, LoraSlot s) const { return layers_[static_cast<size_t>(l)][static_cast<size_t>(s)].get(); }
  const LoraWeight* output() const { return output_.get(); }
  const LoraWeight* embedding() const { return embedding_.get(); }
  // True when some layer's down projection is adapted (the forward then unfuses SwiGLU there).
  bool touches(int64_t l, LoraSlot s) const { return layer(l, s) != nullptr; }

  const std::string& path() const { return path_; }
  const std::string& name() const { return name_; }  // general.name, or ""
  float alpha() const { return alpha_; }
  int64_t max_rank() const { return max_rank_; }
  int64_t n_tensors() const { return n_tensors_; }    // adapted base tensors
  uint64_t bytes() const { return bytes_; }           // float32 values held
  // Unique in the process (1, 2, ...): an adapter's identity for caches of its values (a GPU's copy),
  // where an address could be reused by a later adapter.
  uint64_t serial() const { return serial_; }

 private:
  LoraAdapter() = default;
  std::string path_, name_;
  float alpha_ = 0.0f;
  int64_t max_rank_ = 0, n_tensors_ = 0;
  uint64_t bytes_ = 0;
  uint64_t serial_ = 0;
  std::vector<std::vector<float>> storage_;  // the float32 A and B of every pair (views point in)
  std::vector<std::array<std::unique_ptr<LoraWeight>, kLoraSlots>> layers_;
  std::unique_ptr<LoraWeight> output_, embedding_;
};

}  // namespace tmill
