// NVIDIA Nemotron-H (GGUF "nemotron_h": Nemotron-H 4B / 8B / 47B / 56B, Nemotron Nano 2 9B / 12B), as
// llama.cpp's nemotron_h graph: every layer is one block behind its attn_norm, added to the residual
// stream -- a Mamba-2 mixer (model/mamba2.h: head_count_kv and feed_forward_length entries 0),
// attention without RoPE (feed_forward_length 0) or an ungated ReLU-squared MLP (head_count_kv 0)
// -- (ArchSpec::single_block_layers). The q.k scale is attention.scale when the file has one.
// Nemotron 3 (GGUF "nemotron_h_moe": Nemotron 3 Nano 30B-A3B): the FFN layers are experts without a
// gate -- ReLU squared (ArchSpec::moe_ungated) -- routed by sigmoid scores chosen with exp_probs_b,
// renormalized when expert_weights_norm says so and scaled by expert_weights_scale, beside an ungated
// shared expert of expert_shared_feed_forward_length rows. The latent experts of Nemotron 3 Super
// (ffn_latent_down / up) are not computed (the loader refuses those tensors).
#include <fmt/format.h>

#include "model/config.h"

namespace tmill {
namespace {
Status read_nemotron_h(const GgufFile& f, ModelConfig& c) {
  for (LayerAttention& la : c.layer_attn) la.rope = -1;  // (llama.cpp's graph rotates nothing)
  TM_ASSIGN_OR_RETURN(const float scale, read_family_float(f, c, "attention.scale", 0.0f));
  if (scale != 0.0f) c.attn_scale = scale;
  return {};
}
Status read_nemotron_h_moe(const GgufFile& f, ModelConfig& c) {
  TM_TRY(read_nemotron_h(f, c));
  c.moe_sigmoid = true;  // (llama.cpp's graph: sigmoid whatever the file says)
  TM_TRY(read_expert_weighting(f, c));
  const std::string key = c.arch.name + ".expert_shared_feed_forward_length";
  const auto sh = f.get_int(key);
  if (!sh || *sh < 1 || *sh > (1 << 22)) return Error{fmt::format("metadata key '{}' is missing or out of range", key)};
  c.n_ff_shexp = *sh;
  return {};
}
}  // namespace

ArchSpec arch_nemotron_h() {
  ArchSpec s{"nemotron_h", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/false};
  s.ssm = true;
  s.single_block_layers = true;
  s.ffn_ungated = true;
  s.ffn_act = FfnActivation::ReluSqr;
  s.read_family = read_nemotron_h;
  return s;
}

ArchSpec arch_nemotron_h_moe() {
  ArchSpec s = arch_nemotron_h();
  s.name = "nemotron_h_moe";
  s.moe = ArchSpec::Moe::Required;
  s.moe_expert_ff_key = true;
  s.moe_ungated = true;
  s.moe_shared_ungated = true;
  s.moe_selection_bias = true;
  s.moe_gating_key = true;  // (expert_gating_func: the graph's sigmoid whatever it says)
  s.read_family = read_nemotron_h_moe;
  return s;
}
}  // namespace tmill
