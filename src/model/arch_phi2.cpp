// Phi-2 (GGUF "phi2": microsoft/phi-2, phi-1.5), as llama.cpp's phi2 graph: LayerNorm with a bias
// (eps attention.layer_norm_epsilon) before each layer and at the end; the parallel block -- attention
// and the FFN both read the layer's normed input and both outputs join the residual --; q/k/v (or one
// attn_qkv) and attn_output biases; NeoX RoPE over rope.dimension_count of each head (32 of 80); an
// ungated FFN, down(gelu(up x + up_b)) + down_b; the untied output with its bias.
#include "model/config.h"

namespace tmill {
ArchSpec arch_phi2() {
  ArchSpec s{"phi2", RopeLayout::NeoX, /*qkv_bias=*/true, /*qk_norm=*/false};
  s.fused_qkv_ffn = true;  // (attn_qkv when the file has it; the FFN is ungated)
  set_gpt_layer(s);
  s.parallel_block = true;
  s.output_bias = true;
  s.output_required = true;
  return s;
}
}  // namespace tmill
