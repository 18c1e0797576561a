#include "model/yarn.h"

#include <algorithm>
#include <cmath>

namespace tmill {
namespace {
// ggml_rope_yarn_corr_dim: the dimension whose wavelength fits n_rot_turns turns in the original context
float corr_dim(int64_t n_dims, int64_t n_ctx_orig, float n_rot_turns, float base) {
  return static_cast<float>(n_dims) *
         std::log(static_cast<float>(n_ctx_orig) / (n_rot_turns * 2 * static_cast<float>(M_PI))) / (2 * std::log(base));
}
}  // namespace

float yarn_freq_mix(const ModelConfig& c, int64_t i) {
  if (c.rope_scaling != RopeScaling::Yarn) return 1.0f;
  const float freq_scale = 1.0f / c.rope_scale_factor;
  if (c.yarn_ext_factor == 0.0f) return freq_scale;
  const float low = std::max(0.0f, std::floor(corr_dim(c.n_rot, c.n_ctx_orig, c.yarn_beta_fast, c.rope_theta)));
  const float high = std::min(static_cast<float>(c.n_rot - 1), std::ceil(corr_dim(c.n_rot, c.n_ctx_orig, c.yarn_beta_slow, c.rope_theta)));
  const float y = (static_cast<float>(i) - low) / std::max(0.001f, high - low);
  const float ramp = (1 - std::min(1.0f, std::max(0.0f, y))) * c.yarn_ext_factor;
  return freq_scale * (1 - ramp) + ramp;
}

float rope_mscale(const ModelConfig& c) {
  float m = c.rope_attn_factor;
  if (c.rope_scaling == RopeScaling::Yarn && c.yarn_ext_factor != 0.0f && c.rope_scale_factor > 1.0f)
    m *= 1.0f + 0.1f * std::log(c.rope_scale_factor);
  return m;
}

}  // namespace tmill
