// Qwen3.5 (GGUF "qwen35": Qwen3.5 0.8B .. 27B; "qwen35moe": 35B-A3B .. 397B-A17B), as llama.cpp's
// qwen35 graphs: three layers of four (or attention.recurrent_layers' choice) are gated delta nets
// (model/gated_delta_net.h), the rest gated attention -- a q projection of queries and gates per head,
// per-head q/k RMSNorms, RoPE on the first rope.dimension_count dimensions of each head, the output
// times sigmoid(gate) into attn_output --; each layer's FFN reads post_attention_norm's output: a
// SwiGLU (qwen35) or softmax experts, renormalized, beside a sigmoid-gated shared expert (qwen35moe).
// The RoPE is llama.cpp's interleaved M-RoPE over rope.dimension_sections; text positions are the same
// in its sections, so it is NeoX RoPE whenever the sections cover every rotated pair with a text
// position (the released files; others are refused). Multi-token-prediction blocks (nextn) are left out.
// Qwen3-Next (GGUF "qwen3next": Qwen3-Next-80B-A3B), their forerunner, as llama.cpp's qwen3next graph:
// qwen35moe's layers with plain NeoX RoPE (no sections), the value heads grouped by key head where
// Qwen3.5's converter tiles them, beta and alpha from one ssm_ba, and q/k/v/z from one ssm_in
// in files converted before llama.cpp split it (ArchSpec::gdn_grouped_heads; model.cpp regroups both).
#include "model/config.h"

namespace tmill {
namespace {
Status read_qwen35(const GgufFile& f, ModelConfig& c) {
  TM_TRY(read_mrope_sections(f, c, /*interleaved=*/true, /*required=*/true));
  return {};
}
}  // namespace

ArchSpec arch_qwen35() {
  ArchSpec s{"qwen35", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/true};
  s.ssm = true;
  s.gated_delta_net = true;
  s.attn_output_gate = true;
  s.ffn_norm_name = "post_attention_norm";
  s.read_family = read_qwen35;
  return s;
}

ArchSpec arch_qwen35moe() {
  ArchSpec s = arch_qwen35();
  s.name = "qwen35moe";
  s.moe = ArchSpec::Moe::Required;
  s.moe_norm_topk = true;
  s.moe_expert_ff_key = true;
  s.moe_shared_expert = true;
  return s;
}

ArchSpec arch_qwen3next() {
  ArchSpec s = arch_qwen35moe();
  s.name = "qwen3next";
  s.gdn_grouped_heads = true;
  s.read_family = nullptr;
  return s;
}
}  // namespace tmill
