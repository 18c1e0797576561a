// GLM-4 dense (GGUF "glm4": GLM-4-9B-0414, GLM-4-32B-0414, GLM-Z1): sandwich norms -- RMSNorm before
// and after attention and before and after the FFN (attn_norm, post_attention_norm, ffn_norm,
// post_ffw_norm) --, q/k/v biases (attn_q/k/v.bias, or one attn_qkv with its bias), RoPE on adjacent
// pairs over half of each head (rope.dimension_count), and gate/up fused into ffn_up (gate rows
// first), as llama.cpp's glm4 graph. GLM-4.1V's text model is the same block with M-RoPE
// (rope.dimension_sections; its q/k rows in NeoX order): NeoX RoPE for text tokens (read_mrope_sections).
// GLM-4.5 / GLM-4.6 / GLM-4.5-Air (GGUF "glm4moe"), as llama.cpp's glm4moe graph: RMSNorm before
// attention and before the FFN (post_attention_norm is the FFN's pre-norm), q/k/v biases, per-head
// q/k norms when the file has them (GLM-4.5, not Air), NeoX RoPE over rope.dimension_count of each
// head (half); the first leading_dense_block_count layers a dense SwiGLU FFN of feed_forward_length
// rows, the others experts of expert_feed_forward_length rows routed as DeepSeek-V3: gate scores
// sigmoid(logit) (expert_gating_func 2, the default; 1 is softmax), the experts chosen by score +
// exp_probs_b.bias, weighted by their scores, renormalized when expert_weights_norm, times
// expert_weights_scale; plus expert_shared_count ungated shared experts (one SwiGLU of
// count x expert_feed_forward_length rows) on every token. The NextN block is left out (config.cpp).
// Grouped routing (expert_group_count > 1) is refused in config.cpp. GLM-4.5V's text model is glm4moe
// with M-RoPE sections, NeoX RoPE for text tokens as GLM-4.1V's.
#include <fmt/format.h>

#include "model/config.h"

namespace tmill {
namespace {
Status read_glm4(const GgufFile& f, ModelConfig& c) {
  // GLM-4V (GLM-4.1V-Thinking): M-RoPE over the rotated half, its q/k rows permuted to NeoX order by
  // the converter, so text tokens rotate as NeoX RoPE
  TM_ASSIGN_OR_RETURN(const bool mrope, read_mrope_sections(f, c, /*interleaved=*/false, /*required=*/false));
  if (mrope) c.arch.rope_layout = RopeLayout::NeoX;
  return {};
}

Status read_glm4moe(const GgufFile& f, ModelConfig& c) {
  TM_TRY(read_glm4(f, c));
  return read_deepseek_moe(f, c, /*default_gating=*/2);  // llama.cpp: absent means sigmoid for GLM-4.5
}
}  // namespace

ArchSpec arch_glm4() {
  ArchSpec s{"glm4", RopeLayout::Adjacent, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.fused_qkv_ffn = true;  // ffn_up holds gate and up (an attn_qkv, when present, q, k and v)
  s.post_norms = true;
  s.read_family = read_glm4;
  return s;
}

ArchSpec arch_glm4moe() {
  ArchSpec s{"glm4moe", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/false};  // both loaded when present
  s.moe = ArchSpec::Moe::Required;
  s.moe_expert_ff_key = true;
  s.moe_shared_ungated = true;
  s.moe_gating_key = true;
  s.moe_selection_bias = true;
  s.ffn_norm_name = "post_attention_norm";
  s.read_family = read_glm4moe;
  return s;
}
}  // namespace tmill
