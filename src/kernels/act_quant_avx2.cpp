// AVX2 activation quantizers: f32 rows -> Q8 / Q8K records (kernels/kernel_abi.h), rounding to
// nearest even like the scalar and AVX-512 versions.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/kernel_abi.h"

// Full unrolling of the short fixed-count loops keeps tile accumulators in registers (GCC at -O2
// would otherwise keep the arrays in memory).
#define TM_UNROLL _Pragma("GCC unroll 16")

namespace tmill::kern {
namespace {

inline float hmax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

inline int32_t hsum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

// 32 floats scaled by id -> 32 int8 at dst (in order); returns the int32 lanes' sum.
inline int32_t quant32(const float* xs, __m256 id, uint8_t* dst) {
  const __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xs), id));
  const __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xs + 8), id));
  const __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xs + 16), id));
  const __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(xs + 24), id));
  // packs work per 128-bit lane: bytes come out as i0lo i1lo i2lo i3lo | i0hi i1hi i2hi i3hi.
  const __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
  const __m256i q = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), q);
  return hsum(_mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3)));
}

inline float amax_of(const float* xs, int n) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(xs + i)));
  return hmax(m);
}

}  // namespace

void quant_act_q8_avx2(const float* x, int64_t ldx, int T, int64_t cols, int offset, uint8_t* rec) {
  const int64_t nb = cols / 32;
  for (int64_t b = 0; b < nb; ++b, rec += T * kQ8RecordBytes) {
    for (int t = 0; t < T; ++t) {
      const float* xs = x + t * ldx + 32 * b;
      const float amax = amax_of(xs, 32);
      const __m256 id = _mm256_set1_ps(amax > 0 ? 127.0f / amax : 0.0f);
      const int32_t bias = -offset * quant32(xs, id, rec + 32 * t);
      const float d = amax / 127.0f;
      std::memcpy(rec + T * 32 + 4 * t, &d, 4);
      std::memcpy(rec + T * 36 + 4 * t, &bias, 4);
    }
  }
}

void quant_act_q8k_avx2(const float* x, int64_t ldx, int T, int64_t cols, uint8_t* rec) {
  const int64_t nb = cols / 256;
  for (int64_t b = 0; b < nb; ++b, rec += T * kQ8KRecordBytes) {
    for (int t = 0; t < T; ++t) {
      const float* xs = x + t * ldx + 256 * b;
      const float amax = amax_of(xs, 256);
      const __m256 id = _mm256_set1_ps(amax > 0 ? 127.0f / amax : 0.0f);
      uint8_t* q = rec + 256 * t;
      TM_UNROLL
      for (int j = 0; j < 8; ++j) {
        const int32_t s = quant32(xs + 32 * j, id, q + 32 * j);
        const int16_t s32 = static_cast<int16_t>(s);
        std::memcpy(rec + T * 260 + 2 * (8 * t + j), &s32, 2);
        int32_t lo = 0;
        TM_UNROLL
        for (int i = 0; i < 16; ++i) lo += static_cast<int8_t>(q[32 * j + i]);
        const int32_t b0 = -32 * lo, b1 = -32 * (s - lo);
        std::memcpy(rec + T * 276 + 4 * (16 * t + 2 * j), &b0, 4);
        std::memcpy(rec + T * 276 + 4 * (16 * t + 2 * j + 1), &b1, 4);
      }
      const float d = amax / 127.0f;
      std::memcpy(rec + T * 256 + 4 * t, &d, 4);
    }
  }
}

}  // namespace tmill::kern
