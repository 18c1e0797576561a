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

}  // namespace tmill::kern
