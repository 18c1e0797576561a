// StableLM 2 (GGUF "stablelm": stablelm-2-1_6b, stablelm-zephyr-3b, stablelm-3b-4e1t), as llama.cpp's
// stablelm graph: LayerNorm with biases (eps attention.layer_norm_epsilon) before attention, before
// the FFN and at the end; q/k/v biases when the file has them; NeoX RoPE over rope.dimension_count
// of each head (a quarter); SwiGLU; the untied output. A file without ffn_norm (StableLM 2 12B) runs
// the parallel residual -- the FFN reads the attention's normed input --; the 12B's per-head q/k
// LayerNorms are refused by name.
#include "model/config.h"

namespace tmill {
namespace {
Status read_stablelm(const GgufFile& f, ModelConfig& c) {  // (LayerNorm's epsilon: config.cpp)
  if (f.find_tensor("blk.0.attn_q_norm.weight"))
    return Error{"stablelm: StableLM 2 12B's per-head q/k LayerNorms (attn_q_norm) are not supported"};
  c.arch.parallel_block = f.find_tensor("blk.0.ffn_norm.weight") == nullptr;  // (the 12B's parallel residual)
  return {};
}
}  // namespace

ArchSpec arch_stablelm() {
  ArchSpec s{"stablelm", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/false};  // biases loaded when present
  s.layer_norm = true;
  s.norm_bias = true;
  s.output_required = true;
  s.read_family = read_stablelm;
  return s;
}
}  // namespace tmill
