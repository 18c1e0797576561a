// AVX-512 versions of the row operations in ops.h.
#include "kernels/isa_avx512.h"
#include "kernels/kernel_table.h"

namespace tmill::kern {
namespace {

// The gated delta net's step: row j of S read and written once (decay, S_j . k, the update, S_j . q),
// 16 lanes with a masked tail.
void delta_rule(float* S, const float* q, const float* k, const float* v, float decay, float beta, float scale,
                float* o, int64_t d) {
  const __m512 vdecay = _mm512_set1_ps(decay);
  for (int64_t j = 0; j < d; ++j) {
    float* Sj = S + j * d;
    __m512 acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < d; i += 16) {
      const __mmask16 m = d - i >= 16 ? __mmask16(0xFFFF) : tail_mask16(d - i);
      const __m512 s = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, Sj + i), vdecay);
      _mm512_mask_storeu_ps(Sj + i, m, s);
      acc = _mm512_fmadd_ps(s, _mm512_maskz_loadu_ps(m, k + i), acc);
    }
    const __m512 dj = _mm512_set1_ps((v[j] - _mm512_reduce_add_ps(acc)) * beta);
    acc = _mm512_setzero_ps();
    for (int64_t i = 0; i < d; i += 16) {
      const __mmask16 m = d - i >= 16 ? __mmask16(0xFFFF) : tail_mask16(d - i);
      const __m512 s = _mm512_fmadd_ps(dj, _mm512_maskz_loadu_ps(m, k + i), _mm512_maskz_loadu_ps(m, Sj + i));
      _mm512_mask_storeu_ps(Sj + i, m, s);
      acc = _mm512_fmadd_ps(s, _mm512_maskz_loadu_ps(m, q + i), acc);
    }
    o[j] = _mm512_reduce_add_ps(acc) * scale;
  }
}

float ssm_scan_row(float* s, const float* B, const float* C, float dA, float xdt, int64_t n) {
  const __m512 a = _mm512_set1_ps(dA), x = _mm512_set1_ps(xdt);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xFFFF) : tail_mask16(n - i);
    const __m512 v = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, B + i), x, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, s + i), a));
    _mm512_mask_storeu_ps(s + i, m, v);
    acc = _mm512_fmadd_ps(v, _mm512_maskz_loadu_ps(m, C + i), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

float ssm_scan_row_decay(float* s, const float* A, const float* B, const float* C, float dt, float xdt, int64_t n) {
  const __m512 d = _mm512_set1_ps(dt), x = _mm512_set1_ps(xdt);
  __m512 acc = _mm512_setzero_ps();
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xFFFF) : tail_mask16(n - i);
    const __m512 decay = exp512(_mm512_mul_ps(d, _mm512_maskz_loadu_ps(m, A + i)));
    const __m512 v = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, B + i), x, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, s + i), decay));
    _mm512_mask_storeu_ps(s + i, m, v);
    acc = _mm512_fmadd_ps(v, _mm512_maskz_loadu_ps(m, C + i), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

void silu_mul(float* g, const float* u, int64_t n) {
  int64_t i = 0;
  const __m512 one = _mm512_set1_ps(1.0f);
  for (; i + 16 <= n; i += 16) {
    const __m512 x = _mm512_loadu_ps(g + i);
    const __m512 s = _mm512_div_ps(x, _mm512_add_ps(one, exp512(_mm512_sub_ps(_mm512_setzero_ps(), x))));
    _mm512_storeu_ps(g + i, _mm512_mul_ps(s, _mm512_loadu_ps(u + i)));
  }
  if (i < n) {
    const __mmask16 m = tail_mask16(n - i);
    const __m512 x = _mm512_maskz_loadu_ps(m, g + i);
    const __m512 s = _mm512_div_ps(x, _mm512_add_ps(one, exp512(_mm512_sub_ps(_mm512_setzero_ps(), x))));
    _mm512_mask_storeu_ps(g + i, m, _mm512_mul_ps(s, _mm512_maskz_loadu_ps(m, u + i)));
  }
}

// GeGLU: gelu_tanh(x) = x / (1 + exp(-2 sqrt(2/pi) x (1 + 0.044715 x^2))) (0.5 (1 + tanh y) =
// sigmoid(2y)), times up; the vector exp as silu_mul's.
void gelu_mul(float* g, const float* u, int64_t n) {
  const __m512 one = _mm512_set1_ps(1.0f), k = _mm512_set1_ps(-2.0f * 0.79788456080286535587989211986876f),
               a = _mm512_set1_ps(0.044715f);
  auto gelu = [&](__m512 x) {
    const __m512 y = _mm512_mul_ps(_mm512_mul_ps(k, x), _mm512_add_ps(one, _mm512_mul_ps(a, _mm512_mul_ps(x, x))));
    return _mm512_div_ps(x, _mm512_add_ps(one, exp512(y)));
  };
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(g + i, _mm512_mul_ps(gelu(_mm512_loadu_ps(g + i)), _mm512_loadu_ps(u + i)));
  if (i < n) {
    const __mmask16 m = tail_mask16(n - i);
    _mm512_mask_storeu_ps(g + i, m, _mm512_mul_ps(gelu(_mm512_maskz_loadu_ps(m, g + i)), _mm512_maskz_loadu_ps(m, u + i)));
  }
}

void exp_shift_scale(const float* x, float shift, float scale, float* out, int64_t n) {
  const __m512 sh = _mm512_set1_ps(shift), sc = _mm512_set1_ps(scale);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(out + i, exp512(_mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), sh), sc)));
  if (i < n) {
    const __mmask16 m = tail_mask16(n - i);
    _mm512_mask_storeu_ps(out + i, m, exp512(_mm512_mul_ps(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), sh), sc)));
  }
}

int64_t argmax(const float* x, int64_t n) {
  __m512 m0 = _mm512_set1_ps(x[0]), m1 = m0, m2 = m0, m3 = m0;
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    m0 = _mm512_max_ps(m0, _mm512_loadu_ps(x + i));
    m1 = _mm512_max_ps(m1, _mm512_loadu_ps(x + i + 16));
    m2 = _mm512_max_ps(m2, _mm512_loadu_ps(x + i + 32));
    m3 = _mm512_max_ps(m3, _mm512_loadu_ps(x + i + 48));
  }
  for (; i < n; i += 16) {
    const __mmask16 k = tail_mask16(n - i);
    m0 = _mm512_mask_max_ps(m0, k, m0, _mm512_maskz_loadu_ps(k, x + i));
  }
  const float best = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3)));
  const __m512 b = _mm512_set1_ps(best);
  for (i = 0; i < n; i += 16) {
    const __mmask16 k = tail_mask16(n - i);
    const __mmask16 eq = _mm512_mask_cmp_ps_mask(k, _mm512_maskz_loadu_ps(k, x + i), b, _CMP_EQ_OQ);
    if (eq) return i + __builtin_ctz(eq);
  }
  return 0;  // every element NaN
}

void axpy(float* y, const float* x, float a, int64_t n) {  // multiply then add: the scalar bits
  const __m512 va = _mm512_set1_ps(a);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_add_ps(_mm512_loadu_ps(y + i), rounded(_mm512_mul_ps(va, _mm512_loadu_ps(x + i)))));
  if (i < n) {
    const __mmask16 m = tail_mask16(n - i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, y + i), rounded(_mm512_mul_ps(va, _mm512_maskz_loadu_ps(m, x + i)))));
  }
}

void add_inplace(float* y, const float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, _mm512_add_ps(_mm512_loadu_ps(y + i), _mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = tail_mask16(n - i);
    _mm512_mask_storeu_ps(y + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, y + i), _mm512_maskz_loadu_ps(m, x + i)));
  }
}

// The generic rmsnorm_rows (ops.cpp) in one zmm: its 16 lanes of squares (the tail adds 0 to the
// lanes past the end), the same pairwise combination (8, 4, 2, 1 apart) and the same scalar steps,
// so every ISA gives the same bits.
void rmsnorm_row(const float* x, const float* w, float* o, int64_t n, float eps) {
  __m512 lane = _mm512_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m512 v = _mm512_loadu_ps(x + j);
    lane = _mm512_add_ps(lane, rounded(_mm512_mul_ps(v, v)));
  }
  if (j < n) {
    const __m512 v = _mm512_maskz_loadu_ps(tail_mask16(n - j), x + j);
    lane = _mm512_add_ps(lane, rounded(_mm512_mul_ps(v, v)));
  }
  const float ss = rms_inv_scale(fold8(lane), n, eps);
  const __m512 s = _mm512_set1_ps(ss);
  for (j = 0; j + 16 <= n; j += 16)
    _mm512_storeu_ps(o + j, _mm512_mul_ps(_mm512_loadu_ps(w + j), _mm512_mul_ps(s, _mm512_loadu_ps(x + j))));
  if (j < n) {
    const __mmask16 m = tail_mask16(n - j);
    _mm512_mask_storeu_ps(o + j, m,
                          _mm512_mul_ps(_mm512_maskz_loadu_ps(m, w + j), _mm512_mul_ps(s, _mm512_maskz_loadu_ps(m, x + j))));
  }
}

// NeoX RoPE (pairs i and i + half) for n_heads vectors: the generic formulas, 16 pairs at a time.
void rope_neox(float* x, int64_t n_heads, int64_t head_dim, int64_t half, const float* cos_t,
                      const float* sin_t) {
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    for (int64_t i = 0; i < half; i += 16) {
      const __mmask16 m = tail_mask16(half - i);
      const __m512 a = _mm512_maskz_loadu_ps(m, v + i), b = _mm512_maskz_loadu_ps(m, v + i + half);
      const __m512 c = _mm512_maskz_loadu_ps(m, cos_t + i), s = _mm512_maskz_loadu_ps(m, sin_t + i);
      _mm512_mask_storeu_ps(v + i, m, _mm512_sub_ps(rounded(_mm512_mul_ps(a, c)), rounded(_mm512_mul_ps(b, s))));
      _mm512_mask_storeu_ps(v + i + half, m, _mm512_add_ps(rounded(_mm512_mul_ps(a, s)), rounded(_mm512_mul_ps(b, c))));
    }
  }
}

// f32 -> f16, 16 at a time (vcvtps2ph: round to nearest even, NaNs quieted with their top payload bits,
// as fp32_to_fp16), the tail under a mask.
void to_f16(const float* x, uint16_t* y, int64_t n) {
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
  if (i < n) {
    const __mmask16 m = tail_mask16(n - i);
    _mm256_mask_storeu_epi16(y + i, m, _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), _MM_FROUND_TO_NEAREST_INT));
  }
}

}  // namespace

void add_ops_avx512(KernelTable& t) {
  t.ops = RowOps{rmsnorm_row, silu_mul, exp_shift_scale, argmax, add_inplace, rope_neox, axpy, gelu_mul, to_f16,
                 delta_rule, ssm_scan_row, ssm_scan_row_decay};
}

}  // namespace tmill::kern
