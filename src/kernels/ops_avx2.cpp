// AVX2 versions of the row operations in ops.h.
#include <cmath>

#include "core/fp16.h"
#include "kernels/isa_avx2.h"
#include "kernels/kernel_table.h"

namespace tmill::kern {
namespace {

// The gated delta net's step and a Mamba-2 scan row (ops.h), 8 lanes; a tail of fewer goes scalar.
void delta_rule(float* S, const float* q, const float* k, const float* v, float decay, float beta, float scale,
                float* o, int64_t d) {
  const __m256 vdecay = _mm256_set1_ps(decay);
  const int64_t d8 = d / 8 * 8;
  for (int64_t j = 0; j < d; ++j) {
    float* Sj = S + j * d;
    __m256 acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < d8; i += 8) {
      const __m256 s = _mm256_mul_ps(_mm256_loadu_ps(Sj + i), vdecay);
      _mm256_storeu_ps(Sj + i, s);
      acc = _mm256_fmadd_ps(s, _mm256_loadu_ps(k + i), acc);
    }
    float sk = hsum8(acc);
    for (int64_t i = d8; i < d; ++i) sk += (Sj[i] *= decay) * k[i];
    const float djs = (v[j] - sk) * beta;
    const __m256 dj = _mm256_set1_ps(djs);
    acc = _mm256_setzero_ps();
    for (int64_t i = 0; i < d8; i += 8) {
      const __m256 s = _mm256_fmadd_ps(dj, _mm256_loadu_ps(k + i), _mm256_loadu_ps(Sj + i));
      _mm256_storeu_ps(Sj + i, s);
      acc = _mm256_fmadd_ps(s, _mm256_loadu_ps(q + i), acc);
    }
    float sq = hsum8(acc);
    for (int64_t i = d8; i < d; ++i) sq += (Sj[i] += djs * k[i]) * q[i];
    o[j] = sq * scale;
  }
}

float ssm_scan_row(float* s, const float* B, const float* C, float dA, float xdt, int64_t n) {
  const __m256 a = _mm256_set1_ps(dA), x = _mm256_set1_ps(xdt);
  const int64_t n8 = n / 8 * 8;
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n8; i += 8) {
    const __m256 v = _mm256_fmadd_ps(_mm256_loadu_ps(B + i), x, _mm256_mul_ps(_mm256_loadu_ps(s + i), a));
    _mm256_storeu_ps(s + i, v);
    acc = _mm256_fmadd_ps(v, _mm256_loadu_ps(C + i), acc);
  }
  float sum = hsum8(acc);
  for (int64_t i = n8; i < n; ++i) sum += (s[i] = s[i] * dA + B[i] * xdt) * C[i];
  return sum;
}

float ssm_scan_row_decay(float* s, const float* A, const float* B, const float* C, float dt, float xdt, int64_t n) {
  const __m256 d = _mm256_set1_ps(dt), x = _mm256_set1_ps(xdt);
  const int64_t n8 = n / 8 * 8;
  __m256 acc = _mm256_setzero_ps();
  for (int64_t i = 0; i < n8; i += 8) {
    const __m256 decay = exp256(_mm256_mul_ps(d, _mm256_loadu_ps(A + i)));
    const __m256 v = _mm256_fmadd_ps(_mm256_loadu_ps(B + i), x, _mm256_mul_ps(_mm256_loadu_ps(s + i), decay));
    _mm256_storeu_ps(s + i, v);
    acc = _mm256_fmadd_ps(v, _mm256_loadu_ps(C + i), acc);
  }
  float sum = hsum8(acc);
  for (int64_t i = n8; i < n; ++i) sum += (s[i] = s[i] * std::exp(dt * A[i]) + B[i] * xdt) * C[i];
  return sum;
}

void silu_mul(float* g, const float* u, int64_t n) {
  int64_t i = 0;
  const __m256 one = _mm256_set1_ps(1.0f);
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(g + i);
    const __m256 s = _mm256_div_ps(x, _mm256_add_ps(one, exp256(_mm256_sub_ps(_mm256_setzero_ps(), x))));
    _mm256_storeu_ps(g + i, _mm256_mul_ps(s, _mm256_loadu_ps(u + i)));
  }
  for (; i < n; ++i) g[i] = g[i] / (1.0f + __builtin_expf(-g[i])) * u[i];
}

// GeGLU: gelu_tanh(x) = x / (1 + exp(-2 sqrt(2/pi) x (1 + 0.044715 x^2))) (0.5 (1 + tanh y) =
// sigmoid(2y)), times up; the vector exp as silu_mul's, the tail by the scalar formula.
void gelu_mul(float* g, const float* u, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f), k = _mm256_set1_ps(-2.0f * 0.79788456080286535587989211986876f),
               a = _mm256_set1_ps(0.044715f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(g + i);
    const __m256 y = _mm256_mul_ps(_mm256_mul_ps(k, x), _mm256_add_ps(one, _mm256_mul_ps(a, _mm256_mul_ps(x, x))));
    _mm256_storeu_ps(g + i, _mm256_mul_ps(_mm256_div_ps(x, _mm256_add_ps(one, exp256(y))), _mm256_loadu_ps(u + i)));
  }
  if (i < n) gelu_mul_scalar(g + i, u + i, n - i);
}

void exp_shift_scale(const float* x, float shift, float scale, float* out, int64_t n) {
  const __m256 sh = _mm256_set1_ps(shift), sc = _mm256_set1_ps(scale);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, exp256(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), sh), sc)));
  for (; i < n; ++i) out[i] = __builtin_expf((x[i] - shift) * scale);
}

int64_t argmax(const float* x, int64_t n) {
  __m256 m0 = _mm256_set1_ps(x[0]), m1 = m0, m2 = m0, m3 = m0;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    m0 = _mm256_max_ps(m0, _mm256_loadu_ps(x + i));
    m1 = _mm256_max_ps(m1, _mm256_loadu_ps(x + i + 8));
    m2 = _mm256_max_ps(m2, _mm256_loadu_ps(x + i + 16));
    m3 = _mm256_max_ps(m3, _mm256_loadu_ps(x + i + 24));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3)));
  float best = lanes[0];
  for (int j = 1; j < 8; ++j) best = lanes[j] > best ? lanes[j] : best;
  for (; i < n; ++i) best = x[i] > best ? x[i] : best;
  const __m256 b = _mm256_set1_ps(best);
  for (i = 0; i + 8 <= n; i += 8) {
    const int eq = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), b, _CMP_EQ_OQ));
    if (eq) return i + __builtin_ctz(static_cast<unsigned>(eq));
  }
  for (; i < n; ++i)
    if (x[i] == best) return i;
  return 0;  // every element NaN
}

void axpy(float* y, const float* x, float a, int64_t n) {  // multiply then add: the scalar bits
  const __m256 va = _mm256_set1_ps(a);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), rounded(_mm256_mul_ps(va, _mm256_loadu_ps(x + i)))));
  for (; i < n; ++i) y[i] += rounded(a * x[i]);
}

void add_inplace(float* y, const float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
  for (; i < n; ++i) y[i] += x[i];
}

// The generic rmsnorm_rows (ops.cpp) in two ymm (lanes 0-7 and 8-15): same lanes, same pairwise
// combination, same scalar steps, so every ISA gives the same bits.
void rmsnorm_row(const float* x, const float* w, float* o, int64_t n, float eps) {
  __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m256 a = _mm256_loadu_ps(x + j), b = _mm256_loadu_ps(x + j + 8);
    lo = _mm256_add_ps(lo, rounded(_mm256_mul_ps(a, a)));
    hi = _mm256_add_ps(hi, rounded(_mm256_mul_ps(b, b)));
  }
  if (j < n) {
    const __m256 a = _mm256_maskload_ps(x + j, tail_mask8(n - j));
    const __m256 b = _mm256_maskload_ps(x + j + 8, tail_mask8(n - j - 8));
    lo = _mm256_add_ps(lo, rounded(_mm256_mul_ps(a, a)));
    hi = _mm256_add_ps(hi, rounded(_mm256_mul_ps(b, b)));
  }
  const float ss = rms_inv_scale(_mm256_add_ps(lo, hi), n, eps);
  const __m256 s = _mm256_set1_ps(ss);
  for (j = 0; j + 8 <= n; j += 8)
    _mm256_storeu_ps(o + j, _mm256_mul_ps(_mm256_loadu_ps(w + j), _mm256_mul_ps(s, _mm256_loadu_ps(x + j))));
  for (; j < n; ++j) o[j] = w[j] * (ss * x[j]);
}

void rope_neox(float* x, int64_t n_heads, int64_t head_dim, int64_t half, const float* cos_t,
                    const float* sin_t) {
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    int64_t i = 0;
    for (; i + 8 <= half; i += 8) {
      const __m256 a = _mm256_loadu_ps(v + i), b = _mm256_loadu_ps(v + i + half);
      const __m256 c = _mm256_loadu_ps(cos_t + i), s = _mm256_loadu_ps(sin_t + i);
      _mm256_storeu_ps(v + i, _mm256_sub_ps(rounded(_mm256_mul_ps(a, c)), rounded(_mm256_mul_ps(b, s))));
      _mm256_storeu_ps(v + i + half, _mm256_add_ps(rounded(_mm256_mul_ps(a, s)), rounded(_mm256_mul_ps(b, c))));
    }
    for (; i < half; ++i) {
      const float v0 = v[i], v1 = v[i + half];
      v[i] = rounded(v0 * cos_t[i]) - rounded(v1 * sin_t[i]);
      v[i + half] = rounded(v0 * sin_t[i]) + rounded(v1 * cos_t[i]);
    }
  }
}

// f32 -> f16 with F16C, 8 at a time (vcvtps2ph rounds to nearest even, quiets NaNs and keeps their top
// payload bits: fp32_to_fp16's results); the tail through fp32_to_fp16.
void to_f16(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  for (; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}

}  // namespace

void add_ops_avx2(KernelTable& t) {
  t.ops = RowOps{rmsnorm_row, silu_mul, exp_shift_scale, argmax, add_inplace, rope_neox, axpy, gelu_mul, to_f16,
                 delta_rule, ssm_scan_row, ssm_scan_row_decay};
}

}  // namespace tmill::kern
