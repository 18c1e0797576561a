// The portable row operations (kernels/ops.h): every table's fallback and the reference the AVX2 and
// AVX-512 versions (ops_avx2.cpp, ops_avx512.cpp) follow. rmsnorm_row and the rotation give the same
// bits as those (same operation order); silu_mul and exp_shift_scale use std::exp.
#include <cmath>

#include "core/fp16.h"
#include "kernels/kernel_table.h"

namespace tmill::kern {
namespace {

// The sum of squares in 16 independent lanes, combined pairwise: the vectorizer can do that without
// reassociating (a single running sum is one ~4-cycle add chain per element), and the order, hence
// the result, is the same on every ISA: the AVX2 and AVX-512 versions keep these 16 lanes and this
// combination order (this loop vectorizes only the sum of squares).
void rmsnorm_row(const float* xr, const float* w, float* o, int64_t n, float eps) {
  constexpr int kLanes = 16;
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

void silu_mul(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g * (1.0f / (1.0f + std::exp(-g))) * up[i];
  }
}

void exp_shift_scale(const float* x, float shift, float scale, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = std::exp((x[i] - shift) * scale);
}

int64_t argmax(const float* x, int64_t n) {
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

void axpy(float* y, const float* x, float a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void add_inplace(float* y, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += x[i];
}

void delta_rule(float* S, const float* q, const float* k, const float* v, float decay, float beta, float scale,
                float* o, int64_t d) {
  for (int64_t j = 0; j < d; ++j) {
    float* Sj = S + j * d;
    float sk = 0.0f;
    for (int64_t i = 0; i < d; ++i) sk += (Sj[i] *= decay) * k[i];
    const float dj = (v[j] - sk) * beta;
    float sq = 0.0f;
    for (int64_t i = 0; i < d; ++i) sq += (Sj[i] += dj * k[i]) * q[i];
    o[j] = sq * scale;
  }
}

float ssm_scan_row(float* s, const float* B, const float* C, float dA, float xdt, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += (s[i] = s[i] * dA + B[i] * xdt) * C[i];
  return sum;
}

float ssm_scan_row_decay(float* s, const float* A, const float* B, const float* C, float dt, float xdt, int64_t n) {
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) sum += (s[i] = s[i] * std::exp(dt * A[i]) + B[i] * xdt) * C[i];
  return sum;
}

void rope_neox(float* x, int64_t n_heads, int64_t head_dim, int64_t half, const float* cos_t, const float* sin_t) {
  rope_pairs_scalar(x, n_heads, head_dim, half, cos_t, sin_t, true);
}

}  // namespace

void rope_pairs_scalar(float* x, int64_t n_heads, int64_t head_dim, int64_t half, const float* cos_t,
                       const float* sin_t, bool neox) {
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

void gelu_mul_scalar(float* gate, const float* up, int64_t n) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f, kCoefA = 0.044715f;
  for (int64_t i = 0; i < n; ++i) {
    const float x = gate[i];
    gate[i] = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoefA * x * x))) * up[i];
  }
}

void to_f16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}

void add_ops_scalar(KernelTable& t) {
  t.ops = RowOps{rmsnorm_row, silu_mul, exp_shift_scale, argmax, add_inplace, rope_neox, axpy, gelu_mul_scalar, to_f16,
                 delta_rule, ssm_scan_row, ssm_scan_row_decay};
}

}  // namespace tmill::kern
