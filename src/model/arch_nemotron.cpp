// Nemotron (GGUF "nemotron": Nemotron-4 / Minitron / Nemotron-Mini-4B), as llama.cpp's nemotron graph:
// LayerNorms with biases (eps attention.layer_norm_epsilon; the converter folds LayerNorm1p's +1 into
// the weights), q/k/v apart (or one attn_qkv) and attn_output with their biases when the file has them,
// NeoX RoPE over rope.dimension_count of each head (half, on the released models), the ungated FFN
// down(relu(up x + up_b)^2) + down_b (biases when present), an untied output.
#include "model/config.h"

namespace tmill {
ArchSpec arch_nemotron() {
  ArchSpec s{"nemotron", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/false};
  set_gpt_layer(s);
  s.ffn_act = FfnActivation::ReluSqr;
  s.attn_out_bias = false;     // (loaded when present)
  s.optional_biases = true;    // the FFN's biases when present
  s.fused_qkv_ffn = true;      // (an attn_qkv when the file has one)
  s.output_required = true;
  return s;
}
}  // namespace tmill
