// EXAONE 4.0 (GGUF "exaone4"): no norm before attention or FFN (as olmo2: each block's output is
// RMSNormed -- post_attention_norm, post_ffw_norm -- before the residual add), RMSNorm over each query
// and key head before NeoX RoPE, SwiGLU, Llama 3 rope scaling from rope_freqs.weight. The 64-layer
// 32B (and only it, as llama.cpp decides by the layer count) has sliding windows: attention.
// sliding_window (default 4096) on three layers of four (or the file's sliding_window_pattern), and
// RoPE on those sliding layers only -- its global layers attend without positions (NoPE).
// EXAONE MoE (GGUF "exaone-moe": K-EXAONE), as llama.cpp's exaone-moe graph: pre-norms (not EXAONE
// 4.0's post-norms), per-head q/k RMSNorms, attention.sliding_window (required) on three layers of four
// (or the file's pattern) with RoPE (rope.freq_base_swa when present) and NoPE global layers; the first
// leading_dense_block_count FFNs dense, the rest experts routed by expert_gating_func (required) with
// exp_probs_b when present, expert_weights_norm / expert_weights_scale as the file says, beside one
// ungated shared expert of expert_shared_feed_forward_length rows (absent: the experts' rows); the
// untied output; NextN layers left out.
#include <fmt/format.h>

#include "model/config.h"

namespace tmill {
namespace {
Status read_exaone4(const GgufFile& f, ModelConfig& c) {
  if (c.n_layer != 64) return {};  // llama.cpp: windows for the 32B only (the key is ignored otherwise)
  TM_ASSIGN_OR_RETURN(const bool swa, read_sliding_window(f, c, 4096, 4));
  if (!swa) return {};
  for (auto& la : c.layer_attn)
    if (la.window == 0) la.rope = -1;  // global layers: no RoPE
  return {};
}
Status read_exaone_moe(const GgufFile& f, ModelConfig& c) {
  const std::string a = c.arch.name + ".";
  if (!f.find(a + "attention.sliding_window")) return Error{fmt::format("missing metadata key '{}attention.sliding_window'", a)};
  TM_ASSIGN_OR_RETURN(const bool swa, read_sliding_window(f, c, 128, 4));
  if (!swa) return Error{fmt::format("{}attention.sliding_window must be positive", a)};
  for (auto& la : c.layer_attn)
    if (la.window == 0) la.rope = -1;  // global layers: no RoPE
  TM_ASSIGN_OR_RETURN(const float theta_swa, read_family_float(f, c, "rope.freq_base_swa", c.rope_theta));
  set_sliding_rope(c, theta_swa, c.ropes[0].freq_scale);
  TM_TRY(read_expert_gating(f, c, /*default_gating=*/0));
  TM_TRY(read_expert_weighting(f, c));
  const int64_t shexp = f.get_int(a + "expert_shared_feed_forward_length").value_or(0);
  if (shexp < 0 || shexp > (1 << 22)) return Error{fmt::format("{}expert_shared_feed_forward_length {} is out of range", a, shexp)};
  c.n_ff_shexp = shexp > 0 ? shexp : c.n_ff_exp;
  return {};
}
}  // namespace

ArchSpec arch_exaone_moe() {
  ArchSpec s{"exaone-moe", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/true};
  set_deepseek_style_moe(s);
  s.output_required = true;
  s.read_family = read_exaone_moe;
  return s;
}

ArchSpec arch_exaone4() {
  ArchSpec s{"exaone4", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/true};
  s.post_norms = true;
  s.pre_norms = false;
  s.read_family = read_exaone4;
  return s;
}
}  // namespace tmill
