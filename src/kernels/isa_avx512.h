// What the AVX-512 kernel files (*_avx512.cpp) share: the warning prologue, exp512, reductions,
// loads, masks and the x16 layouts' unpacking, plus everything in isa_avx2.h (the 256-bit helpers,
// TM_UNROLL, TM_ISA_INLINE). Include it first (the pragmas must come before <immintrin.h>), and only
// from those files. Same ODR rule as isa_avx2.h: everything `static`, nothing with external linkage.
#pragma once

// GCC 12 reports false "uninitialized" warnings from inside its AVX-512 intrinsics
// (the _mm512_undefined_* self-initialisation idiom) once they are inlined into the kernels.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/isa_avx2.h"

namespace tmill::kern {

// ---- vector math

// exp(x), relative error ~2 ulp for x in [-87, 88]; below -87 it flushes toward 0 smoothly.
// Cephes-style: n = round(x log2 e), r = x - n ln 2 (two-part ln 2), degree-6 polynomial, * 2^n.
static inline __m512 exp512(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), _mm512_set1_ps(88.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500E-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507E-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073E-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894E-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459E-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201E-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(p, n);
}

// Soft-capping cap * tanh(x / cap), with tanh(y) = 1 - 2 / (exp(2y) + 1) (absolute error ~1e-7 * cap).
static inline __m512 softcap512(__m512 x, float cap) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 e = exp512(_mm512_mul_ps(x, _mm512_set1_ps(2.0f / cap)));
  const __m512 t = _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, one)));
  return _mm512_mul_ps(t, _mm512_set1_ps(cap));
}

// ---- reductions

// Lanes 0-7 + lanes 8-15.
static inline __m256 fold8(__m512 v) { return _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)); }

// fold8, then hsum8's order.
static inline float hsum16(__m512 v) { return hsum8(fold8(v)); }

// The sums of four vectors, as one vector (a's sum in lane 0).
static inline __m128 hsum4(__m512 a, __m512 b, __m512 c, __m512 d) {
  return hsum4(fold8(a), fold8(b), fold8(c), fold8(d));
}

// ---- loads, broadcasts, masks

// The lanes below `left` (all 16 from 16 up; left >= 0).
static inline __mmask16 tail_mask16(int64_t left) {
  return left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
}

// The 4 bytes at p in every 32-bit lane.
static inline __m512i bcast32x16(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// 16 f16 values at p as floats.
// MXFP4's half scales of 16 E8M0 bytes (as e8m0_half_x8).
static inline __m512 e8m0_half_x16(const uint8_t* p) {
  const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
  const __m512i sub = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
  const __mmask16 small = _mm512_cmplt_epi32_mask(e, _mm512_set1_epi32(2));
  return _mm512_castsi512_ps(_mm512_mask_blend_epi32(small, normal, sub));
}

static inline __m512 load_f16x16(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// 16 consecutive elements of type Type (FloatType or KvType) at p, as floats.
template <int Type>
static inline __m512 load16(const uint8_t* p) {
  if constexpr (Type == kKvF32) return _mm512_loadu_ps(reinterpret_cast<const float*>(p));
  if constexpr (Type == kKvF16) return load_f16x16(p);
  if constexpr (Type == kKvBF16)
    return _mm512_castsi512_ps(
        _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16));
  if constexpr (Type == kKvF8E4M3 || Type == kKvF8E5M2)
    return _mm512_cvtph_ps(fp8_f16_bits<Type>(_mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))));
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}

// The same for the lanes of m only (masked loads: nothing is read past them; other lanes are 0).
template <int Type>
static inline __m512 load16(const uint8_t* p, __mmask16 m) {
  if constexpr (Type == kKvF32) return _mm512_maskz_loadu_ps(m, p);
  if constexpr (Type == kKvF16) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
  if constexpr (Type == kKvBF16)
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, p)), 16));
  if constexpr (Type == kKvF8E4M3 || Type == kKvF8E5M2)
    return _mm512_cvtph_ps(fp8_f16_bits<Type>(_mm256_cvtepi8_epi16(_mm_maskz_loadu_epi8(m, p))));
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, p)));
}

// ---- x16 weight layouts (kernel_abi.h): one 64-byte chunk vector holds a chunk of all 16 rows

// Nibble chunks of one 32-column block (4 chunk vectors, 64 bytes apart, at n) -> its 8 level
// vectors in element order (as the AVX2 unpack_nibbles).
TM_ISA_INLINE void unpack_nibbles(const uint8_t* n, __m512i q[8]) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  TM_UNROLL
  for (int c = 0; c < 4; ++c) {
    const __m512i v = _mm512_loadu_si512(n + 64 * c);
    q[c] = _mm512_and_si512(v, m4);
    q[c + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
  }
}

// ORs the fifth bits h (Q5 order) into bit 4 of the 8 level vectors (as the AVX2 add_fifth_bits).
TM_ISA_INLINE void add_fifth_bits(__m512i h, __m512i q[8]) {
  const __m512i b4 = _mm512_set1_epi8(0x10);
  q[0] = _mm512_or_si512(q[0], _mm512_and_si512(_mm512_slli_epi16(h, 4), b4));
  q[1] = _mm512_or_si512(q[1], _mm512_and_si512(_mm512_slli_epi16(h, 3), b4));
  q[2] = _mm512_or_si512(q[2], _mm512_and_si512(_mm512_slli_epi16(h, 2), b4));
  q[3] = _mm512_or_si512(q[3], _mm512_and_si512(_mm512_slli_epi16(h, 1), b4));
  q[4] = _mm512_or_si512(q[4], _mm512_and_si512(h, b4));
  q[5] = _mm512_or_si512(q[5], _mm512_and_si512(_mm512_srli_epi16(h, 1), b4));
  q[6] = _mm512_or_si512(q[6], _mm512_and_si512(_mm512_srli_epi16(h, 2), b4));
  q[7] = _mm512_or_si512(q[7], _mm512_and_si512(_mm512_srli_epi16(h, 3), b4));
}

// Unsigned levels of one group-block of a 32-element block type (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1): q[c]
// holds elements 4c..4c+3 of all 16 rows (lane r: row r), the vpdpbusd operand and the rows of an AMX
// B tile alike.
template <int Kind>
TM_ISA_INLINE void unpack_legacy(const uint8_t* gb, __m512i q[8]) {
  constexpr LegacyLayout L = kLegacyLayout[Kind];
  if constexpr (Kind == kPackQ8_0) {
    TM_UNROLL
    for (int c = 0; c < 8; ++c) q[c] = _mm512_loadu_si512(gb + L.q + 64 * c);
  } else {
    unpack_nibbles(gb + L.q, q);
    if constexpr (L.h != 0) add_fifth_bits(_mm512_loadu_si512(gb + L.h), q);
  }
}

// One token's product with one group-block of those types, added to its accumulator: dot is the
// exact integer dot product of the 16 rows (the record's bias included for the types without a min),
// dx the token's scale, bx its bias (for the types with a min: the sum of its levels), dw / mw the
// rows' scales and mins. The AVX-512 and AMX kernels both finish each token and block here, so
// their results agree to the bit.
template <bool kMin>
TM_ISA_INLINE void add_legacy_block(__m512& acc, __m512i dot, float dx, int32_t bx, __m512 dw, __m512 mw) {
  const __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(dot), _mm512_set1_ps(dx));
  acc = _mm512_fmadd_ps(f, dw, acc);
  if constexpr (kMin) acc = _mm512_fmadd_ps(mw, _mm512_set1_ps(dx * static_cast<float>(bx)), acc);
}

// The real rows of 16-row group g (rows below `rows`) as a store mask.
static inline __mmask16 group_mask(int64_t g, int64_t rows) { return tail_mask16(rows - g * kRows); }

}  // namespace tmill::kern
