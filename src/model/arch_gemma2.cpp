// Gemma 2 (GGUF "gemma2"): token embeddings times sqrt(n_embd); NeoX RoPE; sliding-window attention
// on every other layer (layers 0, 2, 4, ...: llama.cpp's pattern 2, attention.sliding_window, default
// 4096) and global attention on the rest; queries scaled by 1/sqrt(head_dim) (1/sqrt(n_embd/n_head)
// for the 46-layer 27B, as llama.cpp); attention scores soft-capped (attn_logit_softcapping, default
// 50) and the logits too (final_logit_softcapping, default 30); RMSNorm of the attention and FFN
// outputs (attn_post_norm, ffn_post_norm) before each residual add; GeGLU FFN (gelu-tanh gate);
// tied output. The norm weights in the file already carry Gemma's "1 + w" (llama.cpp's converter
// adds the 1), so they are ordinary RMSNorm weights here.
#include <cmath>

#include "model/config.h"

namespace tmill {
namespace {
Status read_gemma2(const GgufFile& f, ModelConfig& c) {
  c.embd_scale = std::sqrt(static_cast<float>(c.n_embd));
  c.tied_output = true;  // llama.cpp's gemma2 takes the output from token_embd (an output.weight is ignored)
  TM_ASSIGN_OR_RETURN(c.attn_softcap, read_family_float(f, c, "attn_logit_softcapping", 50.0f));
  TM_ASSIGN_OR_RETURN(c.final_softcap, read_family_float(f, c, "final_logit_softcapping", 30.0f));
  if (c.n_layer == 46) c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.n_embd / c.n_head));
  TM_ASSIGN_OR_RETURN(const bool swa, read_sliding_window(f, c, 4096, 2));
  // sliding layers: the global RoPE, with rope.freq_base_swa's base when the file has one
  TM_ASSIGN_OR_RETURN(const float theta_swa, read_family_float(f, c, "rope.freq_base_swa", c.rope_theta));
  if (swa) set_sliding_rope(c, theta_swa, c.ropes[0].freq_scale);
  return {};
}
}  // namespace

ArchSpec arch_gemma2() {
  ArchSpec s{"gemma2", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.ffn_act = FfnActivation::GeluTanh;
  s.post_norms = true;
  s.read_family = read_gemma2;
  return s;
}
}  // namespace tmill
