// LoRA adapter files (llama.cpp's GGUF format, formats/lora_gguf.h): random adapters for tests
// and benchmarks (`tokenmill lora dummy`), and merging adapters into a base model's weights
// (`tokenmill lora merge`, like llama.cpp's llama-export-lora).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"

namespace tmill {

struct DummyLoraOptions {
  std::string base_path;             // the base model GGUF: architecture and tensor shapes
  int64_t rank = 8;
  float alpha = 16.0f;               // adapter.lora.alpha (scale = alpha / rank); 0: no alpha key
  // Which base tensors get a pair, by the part of the name after "blk.N." without ".weight"
  // ("attn_q", "attn_qkv", "ffn_down", ...) or a whole name ("output.weight", "token_embd.weight").
  // "all": every layer matrix. Default: every attention and feed-forward matrix of every layer.
  std::vector<std::string> targets;
  DType dtype = DType::F32;          // F32, F16, BF16 or Q8_0 (convert_lora_to_gguf.py's --outtype)
  float spread = 0.1f;               // values uniform in +-spread (A and B both non-zero)
  uint64_t seed = 42;
};

// Writes an adapter llama.cpp and tokenmill load. Same options => identical bytes.
Status write_dummy_lora(const DummyLoraOptions& opts, const std::string& out_path);

struct LoraMergeInput {
  std::string path;
  float scale = 1.0f;                // the user scale (--lora-scaled), times alpha / rank
};

// Writes base + sum of scale * factor * B A of every adapter: adapted tensors as F32 (their base
// values dequantized first), every other tensor and all metadata copied unchanged. A tied model
// whose token_embd.weight is adapted gets the unmerged embedding as output.weight (the adapter
// changes the lookup only, as PEFT's embed_tokens LoRA does).
Status merge_lora(const std::string& base_path, const std::vector<LoraMergeInput>& adapters,
                  const std::string& out_path);

}  // namespace tmill
