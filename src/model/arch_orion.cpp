// Orion (GGUF "orion": Orion-14B), as llama.cpp's orion graph: the llama block with LayerNorms with
// biases (eps attention.layer_norm_epsilon) before attention, before the FFN and at the end, NeoX RoPE,
// SwiGLU, and the untied output llama.cpp requires.
#include "model/config.h"

namespace tmill {
ArchSpec arch_orion() {
  ArchSpec s{"orion", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.layer_norm = true;
  s.norm_bias = true;
  s.output_required = true;
  return s;
}
}  // namespace tmill
