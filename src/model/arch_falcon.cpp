// Falcon (GGUF "falcon": Falcon-7B / 40B / 180B and their instruct models, Falcon-RW), as llama.cpp's
// falcon graph: LayerNorms with biases (eps attention.layer_norm_epsilon); the parallel block --
// attention and the FFN both read the layer's input normed and both outputs join the residual --,
// attention reading attn_norm_2 when the file has it (40B / 180B: two norms) and the FFN attn_norm;
// one attn_qkv without a bias (q, k, v rows; one or a few K/V heads); NeoX RoPE over the whole head
// (llama.cpp refuses another rope.dimension_count); no attn_output bias; the ungated FFN
// down(gelu(up x)) without biases; the output tied to token_embd when the file has none.
#include "model/config.h"

namespace tmill {
ArchSpec arch_falcon() {
  ArchSpec s{"falcon", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.fused_qkv_ffn = true;
  s.layer_norm = true;
  s.norm_bias = true;
  s.parallel_block = true;
  s.attn_norm_alt = "attn_norm_2";
  s.ffn_ungated = true;
  s.ffn_act = FfnActivation::GeluTanh;
  s.read_family = read_whole_head_rope;
  return s;
}
}  // namespace tmill
