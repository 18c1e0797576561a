#include "model/rope.h"

#include <algorithm>
#include <cmath>

#include "kernels/ops.h"

namespace tmill {

void yarn_corr_dims(int64_t n_rot, int64_t n_ctx_orig, float theta, float beta_fast, float beta_slow, float dims[2]) {
  // ggml_rope_yarn_corr_dim: the dimension whose wavelength fits n_rot_beta turns into the context
  auto corr_dim = [&](float n_turns) {
    return static_cast<float>(n_rot) * std::log(static_cast<float>(n_ctx_orig) / (n_turns * 2 * static_cast<float>(M_PI))) /
           (2 * std::log(theta));
  };
  const float start = std::floor(corr_dim(beta_fast)), end = std::ceil(corr_dim(beta_slow));
  dims[0] = std::max(0.0f, start);
  dims[1] = std::min(static_cast<float>(n_rot - 1), end);
}

float yarn_extrapolation_mix(const float dims[2], int64_t i) {
  // ggml's rope_yarn_ramp at i0 = 2i
  const float y = (static_cast<float>(i) - dims[0]) / std::max(0.001f, dims[1] - dims[0]);
  return 1.0f - std::min(1.0f, std::max(0.0f, y));
}

float rope_mscale(const RopeParams& p) {
  return p.yarn ? p.attn_factor * (1.0f + 0.1f * std::log(1.0f / p.freq_scale)) : p.attn_factor;
}

std::vector<RopeTable> rope_tables(const ModelConfig& c, const float* freq_factors) {
  std::vector<RopeTable> out;
  for (const RopeParams& r : c.ropes) out.push_back(rope_table(r, r.n_rot > 0 ? r.n_rot : c.n_rot, r.freq_factors ? freq_factors : nullptr));
  return out;
}

void rope_cos_sin_at(const RopeTable& rt, int64_t pos, int64_t half, float* cos_t, float* sin_t) {
  rope_cos_sin(static_cast<float>(pos) * rt.pos_scale, rt.inv_freq.data(), half, cos_t, sin_t);
  if (rt.mscale != 1.0f)
    for (int64_t i = 0; i < half; ++i) {
      cos_t[i] *= rt.mscale;
      sin_t[i] *= rt.mscale;
    }
}

RopeTable rope_table(const RopeParams& p, int64_t n_rot, const float* freq_factors) {
  RopeTable t;
  t.inv_freq = rope_inv_freq(n_rot, p.theta, freq_factors);
  t.mscale = rope_mscale(p);
  if (!p.yarn) {
    t.pos_scale = p.freq_scale;
  } else {
    // theta = theta_interp (1 - mix) + theta_extrap mix, theta_interp = freq_scale theta_extrap
    float dims[2];
    yarn_corr_dims(n_rot, p.n_ctx_orig, p.theta, p.beta_fast, p.beta_slow, dims);
    for (int64_t i = 0; i < n_rot / 2; ++i) {
      const float mix = yarn_extrapolation_mix(dims, i);
      t.inv_freq[static_cast<size_t>(i)] *= p.freq_scale * (1 - mix) + mix;
    }
  }
  for (int64_t i = 0; i < n_rot / 2; ++i)
    if (p.still_pair(i)) t.inv_freq[static_cast<size_t>(i)] = 0.0f;
  return t;
}

}  // namespace tmill
