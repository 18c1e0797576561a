// StableLM 2 (GGUF "stablelm": stablelm-2-1_6b, stablelm-zephyr-3b, stablelm-3b-4e1t), as llama.cpp's
// stablelm graph: LayerNorm with biases (eps attention.layer_norm_epsilon) before attention, before
// the FFN and at the end; q/k/v biases when the file has them; NeoX RoPE over rope.dimension_count
// of each head (a quarter); SwiGLU; the untied output. A file without ffn_norm (StableLM 2 12B) runs
// the parallel residual -- the FFN reads the attention's normed input --; the 12B's per-head q/k
// LayerNorms are refused by name.
#include <fmt/format.h>

#include "model/config.h"

namespace tmill {
namespace {
Status read_stablelm(const GgufFile& f, ModelConfig& c) {
  TM_ASSIGN_OR_RETURN(c.rms_eps, read_family_float(f, c, "attention.layer_norm_epsilon", 1e-5f));
  if (!(c.rms_eps > 0)) return Error{fmt::format("{}.attention.layer_norm_epsilon must be positive", c.arch.name)};
  if (c.tied_output) return Error{"stablelm: missing tensor 'output.weight' (its output is untied)"};
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
  s.read_family = read_stablelm;
  return s;
}
}  // namespace tmill
