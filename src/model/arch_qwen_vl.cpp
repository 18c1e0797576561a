// The language models of Qwen's vision-language releases, served on text: llama.cpp's qwen2vl (Qwen2-VL,
// Qwen2.5-VL: the qwen2 block, q/k/v biases), qwen3vl (Qwen3-VL dense: the qwen3 block, per-head q/k
// norms) and qwen3vlmoe (Qwen3-VL-30B-A3B, 235B-A22B: the qwen3moe block). Each rotates with M-RoPE
// over rope.dimension_sections -- sectioned for qwen2vl, interleaved for qwen3vl -- which is NeoX RoPE
// for text tokens (read_mrope_sections). Qwen3-VL's deepstack layers (n_deepstack_layers) add slices of
// an image's embedding to the first layers' outputs; a text token's slices are zero in llama.cpp, so
// nothing is added. Images need the vision tower (the separate mmproj file), which is not served here.
#include "model/config.h"

namespace tmill {
namespace {
Status read_sectioned(const GgufFile& f, ModelConfig& c) {
  TM_TRY(read_mrope_sections(f, c, /*interleaved=*/false, /*required=*/true));
  return {};
}
Status read_interleaved(const GgufFile& f, ModelConfig& c) {
  TM_TRY(read_mrope_sections(f, c, /*interleaved=*/true, /*required=*/true));
  return {};
}
}  // namespace

ArchSpec arch_qwen3moe();

ArchSpec arch_qwen2vl() {
  ArchSpec s{"qwen2vl", RopeLayout::NeoX, /*qkv_bias=*/true, /*qk_norm=*/false};
  s.read_family = read_sectioned;
  return s;
}

ArchSpec arch_qwen3vl() {
  ArchSpec s{"qwen3vl", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/true};
  s.read_family = read_interleaved;
  return s;
}

ArchSpec arch_qwen3vlmoe() {
  ArchSpec s = arch_qwen3moe();
  s.name = "qwen3vlmoe";
  s.read_family = read_interleaved;
  return s;
}
}  // namespace tmill
