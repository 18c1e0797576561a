// AVX2 activation quantizers: f32 rows -> Q8 / Q8K records (kernels/kernel_abi.h), rounding to
// nearest even like the scalar and AVX-512 versions.
#include "kernels/isa_avx2.h"
#include "kernels/kernel_table.h"

namespace tmill::kern {
namespace {

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
  return hsum8_epi32(_mm256_add_epi32(_mm256_add_epi32(i0, i1), _mm256_add_epi32(i2, i3)));
}

inline float amax_of(const float* xs, int n) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 8) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(xs + i)));
  return hmax8(m);
}

void quant_act_q8(const float* x, int64_t ldx, int T, int64_t cols, int offset, uint8_t* records) {
  for_each_record(x, ldx, T, cols, 32, kQ8RecordBytes, records, [&](const float* xs, int t, uint8_t* rec) {
    const float amax = amax_of(xs, 32);
    const __m256 id = _mm256_set1_ps(amax > 0 ? 127.0f / amax : 0.0f);
    const int32_t bias = -offset * quant32(xs, id, rec + 32 * t);
    const float d = amax / 127.0f;
    std::memcpy(rec + T * 32 + 4 * t, &d, 4);
    std::memcpy(rec + T * 36 + 4 * t, &bias, 4);
  });
}

void quant_act_q8k(const float* x, int64_t ldx, int T, int64_t cols, uint8_t* records) {
  for_each_record(x, ldx, T, cols, 256, kQ8KRecordBytes, records, [&](const float* xs, int t, uint8_t* rec) {
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
  });
}

}  // namespace

void add_act_quant_avx2(KernelTable& t) {
  t.quant_act_q8 = quant_act_q8;
  t.quant_act_q8k = quant_act_q8k;
}

}  // namespace tmill::kern
