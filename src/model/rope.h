// RoPE angles as llama.cpp's ggml_rope_ext computes them from a layer's RopeParams (model/config.h):
// linear scaling, YaRN (rope.scaling.type yarn) and the attention factor. The batched forward builds
// one table per distinct RopeParams (gemma3's sliding layers have their own base); the reference
// (ref::rope) computes each angle from the same definitions without the folding done here.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"

namespace tmill {

// angle_i(pos) = pos * pos_scale * inv_freq[i]; cos and sin times mscale.
struct RopeTable {
  std::vector<float> inv_freq;  // (n_rot/2) theta^(-2i/n_rot) / freq_factor_i, YaRN's blend folded in
  float pos_scale = 1.0f;       // linear scaling: freq_scale
  float mscale = 1.0f;          // attn_factor, times YaRN's 1 + 0.1 ln(1 / freq_scale)
};
RopeTable rope_table(const RopeParams& p, int64_t n_rot, const float* freq_factors);
// One table per distinct RoPE of the model (ModelConfig::ropes), with the frequency divisors in use.
std::vector<RopeTable> rope_tables(const ModelConfig& c, const float* freq_factors);
// The `half` cos / sin values RoPE multiplies by at position pos: the angles of rt, times its mscale.
void rope_cos_sin_at(const RopeTable& rt, int64_t pos, int64_t half, float* cos_t, float* sin_t);

// YaRN (ggml's rope_yarn with ext_factor 1): the correction dims [low, high] of beta_fast and
// beta_slow over the original context, and the weight of the extrapolated (unscaled) angle for
// rotation pair i: 1 below low, 0 above high, linear between.
void yarn_corr_dims(int64_t n_rot, int64_t n_ctx_orig, float theta, float beta_fast, float beta_slow, float dims[2]);
float yarn_extrapolation_mix(const float dims[2], int64_t i);
// The cos/sin gain of a YaRN layer: attn_factor * (1 + 0.1 ln(1 / freq_scale)); attn_factor otherwise.
float rope_mscale(const RopeParams& p);

}  // namespace tmill
