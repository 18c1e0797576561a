#include "kernels/ops.h"

#include <cmath>

namespace tmill {

void rmsnorm_rows(const float* x, int64_t ldx, const float* w, float* out, int64_t ldo, int64_t n_rows, int64_t n,
                  float eps) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * ldx;
    float* o = out + r * ldo;
    float ss = 0.0f;
    for (int64_t j = 0; j < n; ++j) ss += xr[j] * xr[j];
    ss /= static_cast<float>(n);
    ss += eps;
    ss = 1.0f / std::sqrt(ss);
    for (int64_t j = 0; j < n; ++j) o[j] = w[j] * (ss * xr[j]);
  }
}

void silu_mul(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g * (1.0f / (1.0f + std::exp(-g))) * up[i];
  }
}

void add_inplace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

std::vector<float> rope_inv_freq(int64_t n_rot, float theta, const float* freq_factors) {
  std::vector<float> f(static_cast<size_t>(n_rot / 2));
  for (int64_t i = 0; i < n_rot / 2; ++i) {
    float freq = 1.0f / std::pow(theta, static_cast<float>(2 * i) / static_cast<float>(n_rot));
    if (freq_factors) freq /= freq_factors[i];
    f[static_cast<size_t>(i)] = freq;
  }
  return f;
}

void rope_heads(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, float pos, const float* inv_freq,
                bool neox) {
  const int64_t half = n_rot / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float val = pos * inv_freq[i];
    const float c = std::cos(val), s = std::sin(val);
    const int64_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
    for (int64_t h = 0; h < n_heads; ++h) {
      float* v = x + h * head_dim;
      const float v0 = v[a], v1 = v[b];
      v[a] = v0 * c - v1 * s;
      v[b] = v0 * s + v1 * c;
    }
  }
}

}  // namespace tmill
