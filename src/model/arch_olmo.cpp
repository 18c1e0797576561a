// OLMo (GGUF "olmo": OLMo-1B / 7B, OLMo-1.7-7B, the first OLMo), as llama.cpp's olmo graph: the llama
// block -- q/k/v (or one attn_qkv), RoPE on adjacent pairs, SwiGLU -- with LayerNorms that have no
// weights and no biases (eps attention.layer_norm_epsilon) before attention, before the FFN and at
// the end; q, k and v clamped to attention.clamp_kqv when the file sets it; the output tied to
// token_embd when the file has none.
#include "model/config.h"

namespace tmill {
ArchSpec arch_olmo() {
  ArchSpec s{"olmo", RopeLayout::Adjacent, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.fused_qkv_ffn = true;  // (one attn_qkv or q/k/v apart, as llama.cpp's create_tensor_qkv)
  s.layer_norm = true;
  s.norm_weightless = true;
  s.read_family = read_clamp_kqv;
  return s;
}
}  // namespace tmill
