// CodeShell (GGUF "codeshell": CodeShell-7B) and Jais 2 (GGUF "jais2"), as llama.cpp's codeshell and
// jais2 graphs: starcoder's layer -- LayerNorms with biases (eps attention.layer_norm_epsilon), one
// attn_qkv (or q/k/v apart) with its bias when the file has one, attn_output's bias, the ungated FFN
// down(act(up x + up_b)) + down_b: GELU (CodeShell), ReLU squared (Jais 2) -- with NeoX RoPE over the
// whole head (llama.cpp requires it) instead of learned positions; CodeShell's untied output llama.cpp
// requires, Jais 2's tied to token_embd when the file has none.
#include "model/config.h"

namespace tmill {
namespace {
ArchSpec codeshell_like(const char* name, FfnActivation act) {
  ArchSpec s{name, RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.fused_qkv_ffn = true;
  set_gpt_layer(s);
  s.ffn_act = act;
  s.read_family = read_whole_head_rope;
  return s;
}
}  // namespace

ArchSpec arch_codeshell() {
  ArchSpec s = codeshell_like("codeshell", FfnActivation::GeluTanh);
  s.output_required = true;
  return s;
}

ArchSpec arch_jais2() { return codeshell_like("jais2", FfnActivation::ReluSqr); }
}  // namespace tmill
