// AVX-512 activation converters: f32 rows -> Q8 / Q8K records (kernels/kernel_abi.h) and -> bf16.
// Rounding is to nearest even (the MXCSR default), as in the scalar version (lrintf).
#include "kernels/isa_avx512.h"
#include "kernels/kernel_table.h"

namespace tmill::kern {
namespace {

void quant_act_q8(const float* x, int64_t ldx, int T, int64_t cols, int offset, uint8_t* records) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  for_each_record(x, ldx, T, cols, 32, kQ8RecordBytes, records, [&](const float* xs, int t, uint8_t* rec) {
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
  });
}

void quant_act_q8k(const float* x, int64_t ldx, int T, int64_t cols, uint8_t* records) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  for_each_record(x, ldx, T, cols, 256, kQ8KRecordBytes, records, [&](const float* xs, int t, uint8_t* rec) {
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
  });
}

void to_bf16(const float* x, int64_t ldx, int64_t T, int64_t cols, uint16_t* xb, int64_t ldxb) {
  for (int64_t t = 0; t < T; ++t) {
    const float* xs = x + t * ldx;
    uint16_t* d = xb + t * ldxb;
    int64_t c = 0;
    for (; c + 16 <= cols; c += 16)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + c), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(xs + c)));
    if (c < cols) {
      const __mmask16 m = tail_mask16(cols - c);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + c),
                          (__m256i)_mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, xs + c)));
      c += 16;
    }
    for (; c < ldxb; ++c) d[c] = 0;
  }
}

}  // namespace

void add_act_quant_avx512(KernelTable& t) {
  t.quant_act_q8 = quant_act_q8;
  t.quant_act_q8k = quant_act_q8k;
  t.to_bf16 = to_bf16;
}

}  // namespace tmill::kern
