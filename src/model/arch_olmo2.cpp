// OLMo 2 and OLMo 3 (GGUF "olmo2"): no norm before attention or FFN -- each block reads the
// residual stream as it is and RMSNorms its output (post_attention_norm, post_ffw_norm) before the
// add; RMSNorm over the whole q and the whole k projection (attn_q_norm [n_embd], attn_k_norm
// [kv_dim]) before NeoX RoPE; SwiGLU; untied output. OLMo 3: with attention.sliding_window set,
// three sliding layers to one global (pattern 4, or the file's sliding_window_pattern), the sliding
// ones rotating with the global base and no scaling: no YaRN and attention factor 1, as llama.cpp's
// olmo2 graph (it reads rope.freq_base_swa but its graph rotates with the global base); the global
// layers keep the file's RoPE scaling.
#include "model/config.h"

namespace tmill {
namespace {
Status read_olmo2(const GgufFile& f, ModelConfig& c) {
  TM_ASSIGN_OR_RETURN(const bool swa, read_sliding_window(f, c, 0, 4));
  if (!swa) return {};
  RopeParams plain;
  plain.theta = c.rope_theta;
  plain.n_ctx_orig = c.ropes[0].n_ctx_orig;
  set_sliding_rope(c, plain);
  return {};
}
}  // namespace

ArchSpec arch_olmo2() {
  ArchSpec s{"olmo2", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/true};
  s.qk_norm_full = true;
  s.post_norms = true;
  s.pre_norms = false;
  s.read_family = read_olmo2;
  return s;
}
}  // namespace tmill
