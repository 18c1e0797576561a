// Gemma 4 text (GGUF "gemma4": Gemma-4-E2B / E4B / 31B, as llama.cpp's gemma4 graph): the gemma3 block
// (embeddings times sqrt(n_embd), NeoX RoPE, per-head q/k RMSNorm, post-attention and post-FFN RMSNorm,
// GeGLU, tied output, final soft-capping when the file has it) with
// - two kinds of layer (attention.sliding_window_pattern, one bool per layer): the sliding ones with
//   head size attention.key_length_swa, rope.dimension_count_swa dimensions rotated with base
//   rope.freq_base_swa (default 10000) and no frequency factors; the full ones with head size
//   attention.key_length and "proportional" RoPE (rope.freq_base, rope_freqs.weight's factors of 1e30
//   stopping the unrotated pairs); attention.head_count_kv and feed_forward_length may hold a value per
//   layer (ModelConfig::layer_shape);
// - q.k unscaled (attention scale 1), each V head RMS-normalized without a weight, attn_v.weight absent on
//   the K = V layers (V is then the K projection);
// - attention.shared_kv_layers: the last layers compute no K/V and read the cache of the last sliding
//   (or full) layer before them (ModelConfig::kv_shared_from);
// - per-layer embeddings (embedding_length_per_layer_input, E2B / E4B): after each layer's FFN
//   residual, + post_norm(proj(gelu(inp_gate x) * input_l)), input_l from per_layer_token_embd's row
//   of the token and per_layer_model_proj of the scaled embedding; then x times layer_output_scale when
//   the file has it.
// - 26B-A4B's experts (the layers with ffn_gate_inp): beside the dense FFN (its output normed by
//   post_ffw_norm_1), expert_used_count of expert_count GeGLU experts on pre_ffw_norm_2's norm of the
//   same input, routed by softmax over ffn_gate_inp of the input RMS-normed without a weight, times
//   1/sqrt(n_embd) and ffn_gate_inp.scale, the chosen weights renormalized, each expert's output times
//   its ffn_down_exps.scale; the experts' sum normed by post_ffw_norm_2 and added to the dense output,
//   then post_ffw_norm over both.
#include <cmath>

#include <fmt/format.h>

#include "model/config.h"

namespace tmill {
namespace {
Status read_gemma4(const GgufFile& f, ModelConfig& c) {
  const std::string a = c.arch.name + ".";
  c.embd_scale = std::sqrt(static_cast<float>(c.n_embd));
  c.attn_scale = 1.0f;
  TM_ASSIGN_OR_RETURN(c.final_softcap, read_family_float(f, c, "final_logit_softcapping", 0.0f));
  if (!(c.final_softcap >= 0)) return Error{fmt::format("{}final_logit_softcapping must not be negative", a)};
  const GgufValue* pattern = f.find(a + "attention.sliding_window_pattern");
  if (!pattern || pattern->type != GgufType::ARRAY)
    return Error{fmt::format("{}attention.sliding_window_pattern must hold one bool per layer", a)};
  TM_ASSIGN_OR_RETURN(const int64_t window, read_family_int(f, c, "attention.sliding_window", std::nullopt, 1, 1ll << 32));
  (void)window;
  TM_ASSIGN_OR_RETURN(const bool slides, read_sliding_window(f, c, 0, 0));
  (void)slides;
  TM_ASSIGN_OR_RETURN(const int64_t hd_swa, read_family_int(f, c, "attention.key_length_swa", std::nullopt, 2, 4096));
  TM_ASSIGN_OR_RETURN(const int64_t vd_swa, read_family_int(f, c, "attention.value_length_swa", hd_swa, 2, 4096));
  if (vd_swa != hd_swa) return Error{fmt::format("{}attention.value_length_swa must equal key_length_swa", a)};
  const int64_t hd_full = c.head_dim, rot_full = c.n_rot;
  TM_ASSIGN_OR_RETURN(const int64_t rot_swa, read_family_int(f, c, "rope.dimension_count_swa", rot_full, 2, 4096));
  if (rot_swa % 2 != 0) return Error{fmt::format("{}rope.dimension_count_swa must be even", a)};
  TM_ASSIGN_OR_RETURN(const float theta_swa, read_family_float(f, c, "rope.freq_base_swa", 10000.0f));
  if (!(theta_swa > 0)) return Error{fmt::format("{}rope.freq_base_swa must be positive", a)};
  TM_ASSIGN_OR_RETURN(c.n_embd_per_layer,
                      read_family_int(f, c, "embedding_length_per_layer_input", std::nullopt, 0, 1 << 16));
  TM_ASSIGN_OR_RETURN(const int64_t shared, read_family_int(f, c, "attention.shared_kv_layers", 0, 0, c.n_layer));
  if (c.n_expert > 0) {  // 26B-A4B: the layers with a router have experts beside their dense FFN
    c.moe_layer.assign(static_cast<size_t>(c.n_layer), 0);
    for (int64_t l = 0; l < c.n_layer; ++l)
      c.moe_layer[static_cast<size_t>(l)] = f.find_tensor(fmt::format("blk.{}.ffn_gate_inp.weight", l)) != nullptr;
  }

  // each layer's geometry by its kind
  c.layer_shape.resize(static_cast<size_t>(c.n_layer), ModelConfig::LayerShape{0, 0, 0, 0});
  for (int64_t l = 0; l < c.n_layer; ++l) {
    ModelConfig::LayerShape& g = c.layer_shape[static_cast<size_t>(l)];
    const bool swa = c.layer_attn[static_cast<size_t>(l)].window > 0;
    g.head_dim = swa ? hd_swa : hd_full;
    g.n_rot = swa ? rot_swa : rot_full;
    if (g.n_head_kv == 0) g.n_head_kv = c.n_head_kv;
    if (g.n_ff == 0) g.n_ff = c.n_ff;
  }
  c.head_dim = std::max(hd_full, hd_swa);
  // the full layers' RoPE (ropes[0]) takes the frequency factors; the sliding layers' its own
  c.ropes[0].n_rot = rot_full;
  RopeParams r = c.ropes[0];
  r.theta = theta_swa;
  r.freq_scale = 1.0f;
  r.n_rot = rot_swa;
  r.freq_factors = false;
  set_sliding_rope(c, r);

  if (shared > 0) {  // llama.cpp: the last sliding layer before them (kv_from - 2) or the last full one (kv_from - 1)
    const int64_t from = c.n_layer - shared;
    if (from < 2) return Error{fmt::format("{}attention.shared_kv_layers {} leaves fewer than 2 layers with K/V", a, shared)};
    auto kind = [&](int64_t l) { return c.layer_attn[static_cast<size_t>(l)].window > 0; };
    if (!kind(from - 2) || kind(from - 1))
      return Error{fmt::format("{}attention.shared_kv_layers {}: layers {} and {} must be a sliding and a full one (the "
                               "caches the shared layers read)", a, shared, from - 2, from - 1)};
    for (int64_t l = from; l < c.n_layer; ++l) {
      const int64_t src = from - (kind(l) ? 2 : 1);
      const auto& gs = c.layer_shape[static_cast<size_t>(src)];
      const auto& gl = c.layer_shape[static_cast<size_t>(l)];
      if (gs.head_dim != gl.head_dim || gs.n_head_kv != gl.n_head_kv)
        return Error{fmt::format("gemma4: layer {} reads layer {}'s K/V but their heads differ", l, src)};
      c.cache_slot[static_cast<size_t>(l)] = c.cache_slot[static_cast<size_t>(src)];
    }
    c.kv_shared_from = from;
  }
  return {};
}
}  // namespace

ArchSpec arch_gemma4() {
  ArchSpec s{"gemma4", RopeLayout::NeoX, /*qkv_bias=*/false, /*qk_norm=*/true};
  s.ffn_act = FfnActivation::GeluTanh;
  s.post_norms = true;
  s.layer_geometry = true;
  s.v_norm = true;
  s.v_optional = true;
  s.moe = ArchSpec::Moe::Optional;
  s.moe_expert_ff_key = true;
  s.moe_norm_topk = true;
  s.moe_beside_dense = true;
  s.read_family = read_gemma4;
  return s;
}
}  // namespace tmill
