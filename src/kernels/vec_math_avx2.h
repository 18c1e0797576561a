// Vector math shared by the AVX2 kernel files (see vec_math_avx512.h for the rules).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace tmill::kern {

// exp(x) as exp512 in vec_math_avx512.h, with 2^n built in the exponent field.
static inline __m256 exp256(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500E-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507E-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073E-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894E-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459E-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201E-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

// The value v, opaque to the compiler, for a product that must stay rounded: GCC contracts a
// separate multiply and add into one FMA (C++ mode defaults to -ffp-contract=fast), which rounds
// once instead of twice and so would not give the generic loops' bits. Any float or vector type
// (__m256, and __m512 in the AVX-512 files that include this header).
template <class V>
static inline V rounded(V v) {
  asm("" : "+v"(v));
  return v;
}

// 32-bit lanes below `left` set (any left; <= 0 gives none), for masked loads of a row's tail.
static inline __m256i tail_mask8(int64_t left) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(left < 8 ? left : 8)),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// RMSNorm's scale 1 / sqrt(sum / n + eps) from 8 lanes of partial sums of squares, combined as
// the generic rmsnorm_rows does (4, 2, 1 apart) so every ISA gives the same bits. Also used by the
// AVX-512 file (which has every AVX2 instruction).
static inline float rms_inv_scale(__m256 l8, int64_t n, float eps) {
  const __m128 l4 = _mm_add_ps(_mm256_castps256_ps128(l8), _mm256_extractf128_ps(l8, 1));
  const __m128 l2 = _mm_add_ps(l4, _mm_movehl_ps(l4, l4));
  const __m128 l1 = _mm_add_ss(l2, _mm_movehdup_ps(l2));
  float ss = _mm_cvtss_f32(l1) / static_cast<float>(n);
  ss += eps;
  return 1.0f / __builtin_sqrtf(ss);
}

}  // namespace tmill::kern
