// AFMoE (GGUF "afmoe": Arcee's Trinity Nano / Mini / Large), as llama.cpp's afmoe graph: embeddings times
// sqrt(n_embd), pre- and post-norms around attention and the FFN, per-head q/k RMSNorms, NeoX RoPE on
// three layers of four -- every fourth layer (3, 7, ...) has none, and with attention.sliding_window those
// are also the global layers (the others slide, rotating with rope.freq_base_swa when present) --, the
// attention's output gated by sigmoid(attn_gate x) before attn_output (ArchSpec::attn_gate_proj); the first
// leading_dense_block_count FFNs dense, the rest experts routed by expert_gating_func (absent: sigmoid) with
// a required selection bias exp_probs_b, expert_weights_norm / expert_weights_scale as the file says,
// beside expert_shared_count shared experts (one SwiGLU of that many times the experts' rows).
#include <cmath>

#include <fmt/format.h>

#include "model/config.h"

namespace tmill {
namespace {
Status read_afmoe(const GgufFile& f, ModelConfig& c) {
  c.embd_scale = std::sqrt(static_cast<float>(c.n_embd));
  TM_ASSIGN_OR_RETURN(const bool swa, read_sliding_window(f, c, 0, 4));
  if (swa) {
    TM_ASSIGN_OR_RETURN(const float theta_swa, read_family_float(f, c, "rope.freq_base_swa", c.rope_theta));
    set_sliding_rope(c, theta_swa, c.ropes[0].freq_scale);
  }
  // llama.cpp's n_no_rope_layer_step, 4 for afmoe (not read from the file): layer l rotates unless (l + 1) % 4 == 0
  for (int64_t l = 3; l < c.n_layer; l += 4) c.layer_attn[static_cast<size_t>(l)].rope = -1;
  return read_deepseek_moe(f, c, /*default_gating=*/2);
}
}  // namespace

ArchSpec arch_afmoe() {
  ArchSpec s{"afmoe", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/true};
  set_deepseek_style_moe(s);
  s.moe_selection_bias_required = true;
  s.post_norms = true;
  s.attn_gate_proj = true;
  s.read_family = read_afmoe;
  return s;
}
}  // namespace tmill
