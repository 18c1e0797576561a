#include "kernels/ops.h"

#include <cmath>

#include "kernels/dispatch.h"

namespace tmill {

// Each operation reads the active kernel table once (kernels/dispatch.h); the portable loops are in
// ops_scalar.cpp, the SIMD ones in ops_avx2.cpp and ops_avx512.cpp.

void rmsnorm_rows(const float* x, int64_t ldx, const float* w, float* out, int64_t ldo, int64_t n_rows, int64_t n,
                  float eps) {
  const kern::RmsnormRowFn row = kern::kernels().ops.rmsnorm_row;
  for (int64_t r = 0; r < n_rows; ++r) row(x + r * ldx, w, out + r * ldo, n, eps);
}

void layernorm_rows(const float* x, int64_t ldx, const float* w, const float* b, float* out, int64_t ldo, int64_t n_rows,
                    int64_t n, float eps) {
  for (int64_t r = 0; r < n_rows; ++r) {
    const float* xr = x + r * ldx;
    float* o = out + r * ldo;
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += xr[i];
    const float mean = static_cast<float>(sum / static_cast<double>(n));
    double var = 0;
    for (int64_t i = 0; i < n; ++i) var += double(xr[i] - mean) * double(xr[i] - mean);
    const float scale = 1.0f / std::sqrt(static_cast<float>(var / static_cast<double>(n)) + eps);
    for (int64_t i = 0; i < n; ++i) o[i] = (xr[i] - mean) * scale * w[i] + (b ? b[i] : 0.0f);
  }
}

void silu_mul(float* gate, const float* up, int64_t n) { kern::kernels().ops.silu_mul(gate, up, n); }
void delta_rule_step(float* S, const float* q, const float* k, const float* v, float decay, float beta, float scale,
                     float* o, int64_t d) {
  kern::kernels().ops.delta_rule(S, q, k, v, decay, beta, scale, o, d);
}
float ssm_scan_row(float* s, const float* B, const float* C, float dA, float xdt, int64_t n) {
  return kern::kernels().ops.ssm_scan_row(s, B, C, dA, xdt, n);
}
float ssm_scan_row_decay(float* s, const float* A, const float* B, const float* C, float dt, float xdt, int64_t n) {
  return kern::kernels().ops.ssm_scan_row_decay(s, A, B, C, dt, xdt, n);
}

void gelu_mul(float* gate, const float* up, int64_t n) { kern::kernels().ops.gelu_mul(gate, up, n); }

void softcap_inplace(float* x, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

void exp_shift_scale(const float* x, float shift, float scale, float* out, int64_t n) {
  kern::kernels().ops.exp_shift_scale(x, shift, scale, out, n);
}

int64_t argmax(const float* x, int64_t n) { return kern::kernels().ops.argmax(x, n); }

void add_inplace(float* y, const float* x, int64_t n) { kern::kernels().ops.add_inplace(y, x, n); }
void f32_to_f16(const float* x, uint16_t* y, int64_t n) { kern::kernels().ops.to_f16(x, y, n); }
void axpy(float* y, const float* x, float a, int64_t n) { kern::kernels().ops.axpy(y, x, a, n); }

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
  if (neox) return kern::kernels().ops.rope_neox(x, n_heads, head_dim, half, cos_t, sin_t);
  kern::rope_pairs_scalar(x, n_heads, head_dim, half, cos_t, sin_t, false);
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
