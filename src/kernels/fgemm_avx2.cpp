// AVX2 + FMA products for float weight types on their row-major layout (dot form, as the AVX-512
// version: a tile of 4 rows x T <= 2 tokens of 8-lane accumulators; 16 ymm registers allow no more).
// Columns beyond the last multiple of 8 are finished in scalar code.
#include "kernels/isa_avx2.h"
#include "core/fp16.h"
#include "kernels/kernel_table.h"

namespace tmill::kern {
namespace {

// 8 weights of row `row` from column c, as f32.
template <int Type>
inline __m256 load_w(const uint8_t* row, int64_t c) {
  return load8<Type>(row + elem_bytes<Type>() * c);
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
  zero_tile(acc);
  const uint8_t* rows[R];
  row_pointers(rows, w, rb, r);
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
      for (int i = 0; i < R; ++i) out[i] = hsum8(acc[i][t]);
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
    float acc = hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; c < cols; ++c) acc += load_w1<Type>(row, c) * x[c];
    y[r] = acc;
  }
}

template <int Type>
void fgemm(const void* w, size_t rb, int64_t cols, const float* x, int64_t ldx, float* y, int64_t ldy, int64_t r0,
           int64_t r1, int64_t T) {
  const auto* wp = static_cast<const uint8_t*>(w);
  if (T == 1) return gemv<Type>(wp, rb, cols, x, y, r0, r1);
  for_each_tile<2>(T, [&](auto tt, int64_t t) {
    rows_tile<Type, decltype(tt)::value>(wp, rb, cols, x + t * ldx, ldx, y + t * ldy, ldy, r0, r1);
  });
}

}  // namespace

void add_fgemm_avx2(KernelTable& t) {
  for_each_kind<kFloatF32, kFloatF16, kFloatBF16>([&](auto k) { t.fgemm[k.value] = fgemm<decltype(k)::value>; });
}

}  // namespace tmill::kern
