// gpt-oss (gpt-oss-20b / gpt-oss-120b; GGUF "gpt-oss", llama.cpp's LLM_ARCH_OPENAI_MOE): pre-norm
// blocks with NeoX RoPE under YaRN (rope.scaling.type yarn, factor 32 over 4096 positions), q/k/v and
// attention-output biases, per-head learned attention sinks (attn_sinks: one extra logit per query
// head in the softmax denominator), sliding-window attention (attention.sliding_window, 128) on the
// even layers and full attention on the odd ones (llama.cpp's swa pattern 2), and a mixture of experts
// in every layer: router ffn_gate_inp with a bias, the top expert_used_count experts by raw logit
// weighted by a softmax over those logits, experts of expert_feed_forward_length rows with biases and
// the clamped SwiGLU (min(gate, 7) * sigmoid(1.702 * min(gate, 7)) * (clamp(up, -7, 7) + 1)). The
// FFN's pre-norm is the tensor post_attention_norm. Expert weights usually come as MXFP4.
#include <fmt/format.h>

#include "model/config.h"

namespace tmill {
namespace {
// llama.cpp requires gpt-oss.attention.sliding_window and slides every other layer, the first one first
Status read_gptoss(const GgufFile& f, ModelConfig& c) {
  if (!f.find("gpt-oss.attention.sliding_window")) return Error{"missing metadata key 'gpt-oss.attention.sliding_window'"};
  TM_ASSIGN_OR_RETURN(bool windowed, read_sliding_window(f, c, 0, 2));
  (void)windowed;
  return {};
}
}  // namespace

ArchSpec arch_gptoss() {
  ArchSpec s{"gpt-oss", RopeLayout::NeoX, /*qkv_bias=*/true, /*qk_norm=*/false};
  s.moe = ArchSpec::Moe::Required;
  s.moe_expert_ff_key = true;
  s.moe_softmax_topk = true;
  s.moe_biases = true;
  s.moe_swiglu_oai = true;
  s.attn_out_bias = true;
  s.attn_sinks = true;
  s.ffn_norm_name = "post_attention_norm";
  s.read_family = read_gptoss;
  return s;
}
}  // namespace tmill
