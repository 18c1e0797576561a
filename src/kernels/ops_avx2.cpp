// AVX2 versions of the row operations in ops.h.
#include <immintrin.h>

#include <cstdint>

#include "kernels/vec_math_avx2.h"

namespace tmill::kern {

void silu_mul_avx2(float* g, const float* u, int64_t n) {
  int64_t i = 0;
  const __m256 one = _mm256_set1_ps(1.0f);
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(g + i);
    const __m256 s = _mm256_div_ps(x, _mm256_add_ps(one, exp256(_mm256_sub_ps(_mm256_setzero_ps(), x))));
    _mm256_storeu_ps(g + i, _mm256_mul_ps(s, _mm256_loadu_ps(u + i)));
  }
  for (; i < n; ++i) g[i] = g[i] / (1.0f + __builtin_expf(-g[i])) * u[i];
}

void exp_shift_scale_avx2(const float* x, float shift, float scale, float* out, int64_t n) {
  const __m256 sh = _mm256_set1_ps(shift), sc = _mm256_set1_ps(scale);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, exp256(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), sh), sc)));
  for (; i < n; ++i) out[i] = __builtin_expf((x[i] - shift) * scale);
}

int64_t argmax_avx2(const float* x, int64_t n) {
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

}  // namespace tmill::kern
