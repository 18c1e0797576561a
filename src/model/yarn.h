// YaRN RoPE scaling (rope.scaling.type yarn) as ggml computes it (ggml-cpu rope_yarn): for each
// rotated pair i, theta = pos * freq_i * mix_i with mix_i = s * (1 - r_i) + r_i, where s = 1 / factor
// (interpolation), r_i = ext_factor * ramp_i, and ramp_i goes from 1 (fast dimensions, extrapolated)
// to 0 (slow dimensions, interpolated) between the correction dimensions of beta_fast and beta_slow
// over the original context. cos/sin are scaled by rope_attn_factor * (1 + 0.1 ln factor) (llama.cpp
// cancels its own yarn_attn_factor against ggml's internal magnitude factor, leaving this).
// Shared by the reference forward and the batched forward's tables.
#pragma once

#include <cstdint>

#include "model/config.h"

namespace tmill {

// mix_i for pair i in [0, n_rot/2); 1 when the config does not use YaRN.
float yarn_freq_mix(const ModelConfig& c, int64_t i);
// The factor RoPE's cos/sin are multiplied by: rope_attn_factor, times YaRN's magnitude correction.
float rope_mscale(const ModelConfig& c);

}  // namespace tmill
