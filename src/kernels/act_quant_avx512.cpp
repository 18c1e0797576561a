// AVX-512 activation converters: f32 rows -> Q8 / Q8K records (kernels/kernel_abi.h) and -> bf16.
// Rounding is to nearest even (the MXCSR default), as in the scalar version (lrintf).
// GCC 12 reports false "uninitialized" warnings from inside its AVX-512 intrinsics
// (the _mm512_undefined_* self-initialisation idiom) once they are inlined here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/kernel_abi.h"

// Full unrolling of the short fixed-count loops keeps tile accumulators in registers (GCC at -O2
// would otherwise keep the arrays in memory).
#define TM_UNROLL _Pragma("GCC unroll 16")

namespace tmill::kern {

void quant_act_q8_avx512(const float* x, int64_t ldx, int T, int64_t cols, int offset, uint8_t* rec) {
  const int64_t nb = cols / 32;
  const __m512 sign = _mm512_set1_ps(-0.0f);
  for (int64_t b = 0; b < nb; ++b, rec += T * kQ8RecordBytes) {
    for (int t = 0; t < T; ++t) {
      const float* xs = x + t * ldx + 32 * b;
      const __m512 v0 = _mm512_loadu_ps(xs), v1 = _mm512_loadu_ps(xs + 16);
      const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_andnot_ps(sign, v0), _mm512_andnot_ps(sign, v1)));
      const __m512 id = _mm512_set1_ps(amax > 0 ? 127.0f / amax : 0.0f);
      const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, id));
      const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, id));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(rec + 32 * t), _mm512_cvtsepi32_epi8(q0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(rec + 32 * t + 16), _mm512_cvtsepi32_epi8(q1));
      const float d = amax / 127.0f;
      const int32_t bias = -offset * _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
      std::memcpy(rec + T * 32 + 4 * t, &d, 4);
      std::memcpy(rec + T * 36 + 4 * t, &bias, 4);
    }
  }
}

void quant_act_q8k_avx512(const float* x, int64_t ldx, int T, int64_t cols, uint8_t* rec) {
  const int64_t nb = cols / 256;
  const __m512 sign = _mm512_set1_ps(-0.0f);
  for (int64_t b = 0; b < nb; ++b, rec += T * kQ8KRecordBytes) {
    for (int t = 0; t < T; ++t) {
      const float* xs = x + t * ldx + 256 * b;
      __m512 m = _mm512_setzero_ps();
      TM_UNROLL
      for (int i = 0; i < 16; ++i) m = _mm512_max_ps(m, _mm512_andnot_ps(sign, _mm512_loadu_ps(xs + 16 * i)));
      const float amax = _mm512_reduce_max_ps(m);
      const __m512 id = _mm512_set1_ps(amax > 0 ? 127.0f / amax : 0.0f);
      int32_t s16[16];
      TM_UNROLL
      for (int i = 0; i < 16; ++i) {
        const __m512i q = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(xs + 16 * i), id));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(rec + 256 * t + 16 * i), _mm512_cvtsepi32_epi8(q));
        s16[i] = _mm512_reduce_add_epi32(q);
      }
      const float d = amax / 127.0f;
      std::memcpy(rec + T * 256 + 4 * t, &d, 4);
      TM_UNROLL
      for (int j = 0; j < 8; ++j) {
        const int16_t s32 = static_cast<int16_t>(s16[2 * j] + s16[2 * j + 1]);
        std::memcpy(rec + T * 260 + 2 * (8 * t + j), &s32, 2);
      }
      TM_UNROLL
      for (int j = 0; j < 16; ++j) {
        const int32_t bias = -32 * s16[j];
        std::memcpy(rec + T * 276 + 4 * (16 * t + j), &bias, 4);
      }
    }
  }
}

void to_bf16_avx512(const float* x, int64_t ldx, int64_t T, int64_t cols, uint16_t* xb, int64_t ldxb) {
  for (int64_t t = 0; t < T; ++t) {
    const float* xs = x + t * ldx;
    uint16_t* d = xb + t * ldxb;
    int64_t c = 0;
    for (; c + 16 <= cols; c += 16)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + c), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(xs + c)));
    if (c < cols) {
      const __mmask16 m = static_cast<__mmask16>((1u << (cols - c)) - 1);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + c),
                          (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, xs + c)));
      c += 16;
    }
    for (; c < ldxb; ++c) d[c] = 0;
  }
}

}  // namespace tmill::kern
