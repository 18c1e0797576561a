// CodeShell (GGUF "codeshell": CodeShell-7B), as llama.cpp's codeshell graph: starcoder's layer --
// LayerNorms with biases (eps attention.layer_norm_epsilon), one attn_qkv (or q/k/v apart) with its bias
// when the file has one, attn_output's bias, the ungated FFN down(gelu(up x + up_b)) + down_b -- with
// NeoX RoPE over the whole head (llama.cpp requires it) instead of learned positions, and the untied
// output llama.cpp requires.
#include <fmt/format.h>

#include "model/config.h"

namespace tmill {
namespace {
Status read_codeshell(const GgufFile&, ModelConfig& c) {
  if (c.n_rot != c.head_dim)
    return Error{fmt::format("codeshell.rope.dimension_count {} must be the head dimension {} (as llama.cpp requires)",
                             c.n_rot, c.head_dim)};
  return {};
}
}  // namespace

ArchSpec arch_codeshell() {
  ArchSpec s{"codeshell", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.fused_qkv_ffn = true;
  s.layer_norm = true;
  s.norm_bias = true;
  s.ffn_ungated = true;
  s.ffn_bias = true;
  s.ffn_act = FfnActivation::GeluTanh;
  s.attn_out_bias = true;
  s.output_required = true;
  s.read_family = read_codeshell;
  return s;
}
}  // namespace tmill
