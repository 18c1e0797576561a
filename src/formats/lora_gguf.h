// LoRA adapters in llama.cpp's GGUF format (what convert_lora_to_gguf.py writes and llama.cpp's
// llama_adapter_lora_init reads):
//   general.type = "adapter", adapter.type = "lora", adapter.lora.alpha (f32, optional: 0 = none),
//   general.architecture = the base model's;
//   per adapted base tensor W (GGUF ne = [n_in, n_out]) two tensors:
//     "<W's name>.lora_a": ne = [n_in, rank]   (rank rows of n_in: A as a matrix with y = A x)
//     "<W's name>.lora_b": ne = [rank, n_out]  (n_out rows of rank: B)
//   so W' = W + scale * B A, and y' = W x + scale * B (A x).
//   token_embd.weight is the exception (llama.cpp's llm_build_inp_embd): A and B are flipped,
//     lora_a ne = [rank, n_vocab] and lora_b ne = [rank, n_embd]: embedding row t gets
//     scale * B a_t added (a_t = row t of lora_a).
//   scale = user_scale * alpha / rank when alpha != 0, else user_scale (rank = lora_b's ne[0]).
//   Tensors named "*_norm.weight" are skipped (llama.cpp ignores them too); any other suffix is an error.
// This file parses and validates the pairing and shapes; reading the values (any dequantizable
// type) is the caller's (model/lora.h, convert/lora.h).
#pragma once

#include <string>
#include <vector>

#include "core/result.h"
#include "formats/gguf.h"

namespace tmill {

struct LoraTensorPair {
  std::string base_name;           // "blk.0.attn_q.weight"
  const GgufTensorInfo* a = nullptr;
  const GgufTensorInfo* b = nullptr;
  int64_t rank = 0;                // lora_b's ne[0] (llama.cpp's rank for the scale)
  bool is_embedding() const;       // token_embd.weight: the flipped layout above
};

struct LoraFileInfo {
  std::string architecture;        // general.architecture
  std::string name;                // general.name, or ""
  float alpha = 0.0f;              // adapter.lora.alpha; 0: scale = user scale
  std::vector<LoraTensorPair> pairs;  // in file order of the first tensor of each pair
  // The scale factor of one pair: alpha / rank, or 1 without alpha.
  float factor(const LoraTensorPair& p) const {
    return alpha != 0.0f ? alpha / static_cast<float>(p.rank) : 1.0f;
  }
};

// Metadata and pairs of an adapter file; errors name the key or tensor at fault.
Result<LoraFileInfo> read_lora_gguf(const GgufFile& file);

// Checks an adapter against the base model file: same architecture, every adapted tensor exists
// in the base with matching shapes. Errors name the tensor and both shapes.
Status check_lora_against_base(const LoraFileInfo& lora, const GgufFile& base);

}  // namespace tmill
