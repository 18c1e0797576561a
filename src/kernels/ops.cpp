#include "kernels/ops.h"

#include <cmath>

#include "core/cpu.h"

namespace tmill {
namespace kern {
void silu_mul_avx512(float* g, const float* u, int64_t n);
void silu_mul_avx2(float* g, const float* u, int64_t n);
void exp_shift_scale_avx512(const float* x, float shift, float scale, float* out, int64_t n);
void exp_shift_scale_avx2(const float* x, float shift, float scale, float* out, int64_t n);
int64_t argmax_avx512(const float* x, int64_t n);
int64_t argmax_avx2(const float* x, int64_t n);
void add_inplace_avx512(float* y, const float* x, int64_t n);
void add_inplace_avx2(float* y, const float* x, int64_t n);
void rmsnorm_row_avx512(const float* x, const float* w, float* o, int64_t n, float eps);
void rmsnorm_row_avx2(const float* x, const float* w, float* o, int64_t n, float eps);
void rope_neox_avx512(float* x, int64_t n_heads, int64_t head_dim, int64_t half, const float* cos_t,
                      const float* sin_t);
void rope_neox_avx2(float* x, int64_t n_heads, int64_t head_dim, int64_t half, const float* cos_t,
                    const float* sin_t);
}  // namespace kern

void rmsnorm_rows(const float* x, int64_t ldx, const float* w, float* out, int64_t ldo, int64_t n_rows, int64_t n,
                  float eps) {
  // The sum of squares in 16 independent lanes, combined pairwise: the vectorizer can do that without
  // reassociating (a single running sum is one ~4-cycle add chain per element), and the order, hence
  // the result, is the same on every ISA: the AVX2 and AVX-512 versions keep these 16 lanes and this
  // combination order (the generic loop below vectorizes only the sum of squares).
  const Isa isa = active_isa();
  if (isa >= Isa::Avx2) {
    for (int64_t r = 0; r < n_rows; ++r) {
      if (isa == Isa::Avx512) kern::rmsnorm_row_avx512(x + r * ldx, w, out + r * ldo, n, eps);
      else kern::rmsnorm_row_avx2(x + r * ldx, w, out + r * ldo, n, eps);
    }
    return;
  }
  constexpr int kLanes = 16;
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * ldx;
    float* o = out + r * ldo;
    float lane[kLanes] = {};
    int64_t j = 0;
    for (; j + kLanes <= n; j += kLanes)
#pragma GCC unroll 16
      for (int k = 0; k < kLanes; ++k) lane[k] += xr[j + k] * xr[j + k];
    for (int k = 0; j + k < n; ++k) lane[k] += xr[j + k] * xr[j + k];
    for (int width = kLanes / 2; width > 0; width /= 2)
      for (int k = 0; k < width; ++k) lane[k] += lane[k + width];
    float ss = lane[0] / static_cast<float>(n);
    ss += eps;
    ss = 1.0f / std::sqrt(ss);
    for (j = 0; j < n; ++j) o[j] = w[j] * (ss * xr[j]);
  }
}

void silu_mul(float* gate, const float* up, int64_t n) {
  const Isa isa = active_isa();
  if (isa == Isa::Avx512) return kern::silu_mul_avx512(gate, up, n);
  if (isa == Isa::Avx2) return kern::silu_mul_avx2(gate, up, n);
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g * (1.0f / (1.0f + std::exp(-g))) * up[i];
  }
}

void exp_shift_scale(const float* x, float shift, float scale, float* out, int64_t n) {
  const Isa isa = active_isa();
  if (isa == Isa::Avx512) return kern::exp_shift_scale_avx512(x, shift, scale, out, n);
  if (isa == Isa::Avx2) return kern::exp_shift_scale_avx2(x, shift, scale, out, n);
  for (int64_t i = 0; i < n; ++i) out[i] = std::exp((x[i] - shift) * scale);
}

int64_t argmax(const float* x, int64_t n) {
  const Isa isa = active_isa();
  if (isa == Isa::Avx512) return kern::argmax_avx512(x, n);
  if (isa == Isa::Avx2) return kern::argmax_avx2(x, n);
  float m[8] = {x[0], x[0], x[0], x[0], x[0], x[0], x[0], x[0]};  // 8 independent max chains
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int j = 0; j < 8; ++j) m[j] = x[i + j] > m[j] ? x[i + j] : m[j];
  for (; i < n; ++i) m[0] = x[i] > m[0] ? x[i] : m[0];
  float best = m[0];
  for (int j = 1; j < 8; ++j) best = m[j] > best ? m[j] : best;
  for (i = 0; i < n; ++i)
    if (x[i] == best) return i;
  return 0;  // only when every element is NaN (std::max_element also answers 0)
}

void add_inplace(float* y, const float* x, int64_t n) {
  const Isa isa = active_isa();
  if (isa == Isa::Avx512) return kern::add_inplace_avx512(y, x, n);
  if (isa == Isa::Avx2) return kern::add_inplace_avx2(y, x, n);
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

void rope_cos_sin(float pos, const float* inv_freq, int64_t half, float* cos_t, float* sin_t) {
  for (int64_t i = 0; i < half; ++i) {
    const float val = pos * inv_freq[i];
    cos_t[i] = std::cos(val);
    sin_t[i] = std::sin(val);
  }
}

void rope_heads_cs(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float* cos_t,
                   const float* sin_t, bool neox) {
  const int64_t half = n_rot / 2;
  const Isa isa = active_isa();
  if (neox && isa == Isa::Avx512) return kern::rope_neox_avx512(x, n_heads, head_dim, half, cos_t, sin_t);
  if (neox && isa == Isa::Avx2) return kern::rope_neox_avx2(x, n_heads, head_dim, half, cos_t, sin_t);
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      const int64_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
      const float v0 = v[a], v1 = v[b];
      v[a] = v0 * cos_t[i] - v1 * sin_t[i];
      v[b] = v0 * sin_t[i] + v1 * cos_t[i];
    }
  }
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
