// StarCoder2 (GGUF "starcoder2": StarCoder2 3B / 7B / 15B, and Granite's 20B / 34B code models), as
// llama.cpp's starcoder2 graph: LayerNorm with biases (eps attention.layer_norm_epsilon) before
// attention, before the FFN and at the end; q/k/v and output biases; NeoX RoPE; an ungated FFN,
// down(gelu(up x + up_b)) + down_b (GELU's tanh form); the output tied to token_embd when the file has
// no output.weight. llama.cpp applies no sliding window to it, and neither does this.
#include "model/config.h"

namespace tmill {
ArchSpec arch_starcoder2() {
  ArchSpec s{"starcoder2", RopeLayout::NeoX, /*qkv_bias=*/true, /*qk_norm=*/false};
  set_gpt_layer(s);
  return s;
}
}  // namespace tmill
