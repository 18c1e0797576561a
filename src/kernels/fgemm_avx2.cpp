// AVX2 + FMA products for float weight types on their row-major layout (dot form, as the AVX-512
// version: a tile of 4 rows x T <= 2 tokens of 8-lane accumulators; 16 ymm registers allow no more).
// Columns beyond the last multiple of 8 are finished in scalar code.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "core/fp16.h"
#include "kernels/kernel_abi.h"

// Full unrolling of the short fixed-count loops keeps tile accumulators in registers (GCC at -O2
// would otherwise keep the arrays in memory).
#define TM_UNROLL _Pragma("GCC unroll 16")

namespace tmill::kern {
namespace {

inline __m128 hsum4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
  return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

template <int Type>
inline __m256 load_w(const uint8_t* row, int64_t c) {
  if constexpr (Type == 0) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + c);
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * c));
    if constexpr (Type == 1) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

template <int Type>
inline float load_w1(const uint8_t* row, int64_t c) {
  if constexpr (Type == 0) {
    float f;
    std::memcpy(&f, row + 4 * c, 4);
    return f;
  } else {
    uint16_t h;
    std::memcpy(&h, row + 2 * c, 2);
    return Type == 1 ? fp16_to_fp32(h) : bf16_to_fp32(h);
  }
}

template <int Type, int R, int T>
void ftile(const uint8_t* w, size_t rb, int64_t cols, const float* x, int64_t ldx, float* y, int64_t ldy, int64_t r) {
  __m256 acc[R][T];
  TM_UNROLL
  for (int i = 0; i < R; ++i)
    TM_UNROLL
    for (int t = 0; t < T; ++t) acc[i][t] = _mm256_setzero_ps();
  const uint8_t* rows[R];
  TM_UNROLL
  for (int i = 0; i < R; ++i) rows[i] = w + static_cast<size_t>(r + i) * rb;
  int64_t c = 0;
  for (; c + 8 <= cols; c += 8) {
    __m256 wv[R];
    TM_UNROLL
    for (int i = 0; i < R; ++i) wv[i] = load_w<Type>(rows[i], c);
    TM_UNROLL
    for (int t = 0; t < T; ++t) {
      const __m256 xv = _mm256_loadu_ps(x + t * ldx + c);
      TM_UNROLL
      for (int i = 0; i < R; ++i) acc[i][t] = _mm256_fmadd_ps(wv[i], xv, acc[i][t]);
    }
  }
  TM_UNROLL
  for (int t = 0; t < T; ++t) {
    float out[R];
    if constexpr (R == 4) {
      _mm_storeu_ps(out, hsum4(acc[0][t], acc[1][t], acc[2][t], acc[3][t]));
    } else {
      TM_UNROLL
      for (int i = 0; i < R; ++i) {
        const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(acc[i][t]), _mm256_extractf128_ps(acc[i][t], 1));
        const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
        out[i] = _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
      }
    }
    TM_UNROLL
    for (int i = 0; i < R; ++i) {
      float tail = 0;
      for (int64_t k = c; k < cols; ++k) tail += load_w1<Type>(rows[i], k) * x[t * ldx + k];
      y[t * ldy + r + i] = out[i] + tail;
    }
  }
}

template <int Type, int T>
void rows_tile(const uint8_t* w, size_t rb, int64_t cols, const float* x, int64_t ldx, float* y, int64_t ldy,
               int64_t r0, int64_t r1) {
  int64_t r = r0;
  for (; r + 4 <= r1; r += 4) ftile<Type, 4, T>(w, rb, cols, x, ldx, y, ldy, r);
  for (; r < r1; ++r) ftile<Type, 1, T>(w, rb, cols, x, ldx, y, ldy, r);
}

// One token: rows one after the other (one sequential stream for the hardware prefetcher), 4 partial
// sums per row.
template <int Type>
void gemv(const uint8_t* w, size_t rb, int64_t cols, const float* x, float* y, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w + static_cast<size_t>(r) * rb;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    int64_t c = 0;
    for (; c + 32 <= cols; c += 32) {
      a0 = _mm256_fmadd_ps(load_w<Type>(row, c), _mm256_loadu_ps(x + c), a0);
      a1 = _mm256_fmadd_ps(load_w<Type>(row, c + 8), _mm256_loadu_ps(x + c + 8), a1);
      a2 = _mm256_fmadd_ps(load_w<Type>(row, c + 16), _mm256_loadu_ps(x + c + 16), a2);
      a3 = _mm256_fmadd_ps(load_w<Type>(row, c + 24), _mm256_loadu_ps(x + c + 24), a3);
    }
    for (; c + 8 <= cols; c += 8) a0 = _mm256_fmadd_ps(load_w<Type>(row, c), _mm256_loadu_ps(x + c), a0);
    const __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    float acc = _mm_cvtss_f32(_mm_add_ss(q, _mm_shuffle_ps(q, q, 1)));
    for (; c < cols; ++c) acc += load_w1<Type>(row, c) * x[c];
    y[r] = acc;
  }
}

template <int Type>
void fgemm(const void* w, size_t rb, int64_t cols, const float* x, int64_t ldx, float* y, int64_t ldy, int64_t r0,
           int64_t r1, int64_t T) {
  const auto* wp = static_cast<const uint8_t*>(w);
  if (T == 1) return gemv<Type>(wp, rb, cols, x, y, r0, r1);
  int64_t t = 0;
  for (; t + 2 <= T; t += 2) rows_tile<Type, 2>(wp, rb, cols, x + t * ldx, ldx, y + t * ldy, ldy, r0, r1);
  if (t < T) rows_tile<Type, 1>(wp, rb, cols, x + t * ldx, ldx, y + t * ldy, ldy, r0, r1);
}

}  // namespace

FGemmFn fgemm_avx2(int type) {
  switch (type) {
    case 0: return fgemm<0>;
    case 1: return fgemm<1>;
    case 2: return fgemm<2>;
    default: return nullptr;
  }
}

}  // namespace tmill::kern
