// AVX-512 products for float weight types on their row-major file layout ("dot form"):
// a tile of R = 4 rows x T tokens keeps R*T vector accumulators; each step loads one vector of every
// row and every token and does R*T FMAs (f32: 16 columns per step; bf16: vdpbf16ps, 32 columns).
// The 4 row sums of one token are reduced together and stored as one 128-bit vector.
//   fgemm_*   : f32 FMA, weights converted to f32 on load (F32 / F16 via vcvtph2ps / BF16 by shift);
//               used for GEMV (exact products) and as the GEMM on machines without the bf16 path.
//   gemm_bf16 : activations pre-converted to bf16, weights bf16 (BF16 files or the packed copy of F16).
// Token tiles are outermost within a call so a tile's activations stay in L1 while the call's row
// range (sized by the dispatcher to fit L2) streams past.
// GCC 12 reports false "uninitialized" warnings from inside its AVX-512 intrinsics
// (the _mm512_undefined_* self-initialisation idiom) once they are inlined here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstdint>

#include "kernels/kernel_abi.h"

// Full unrolling of the short fixed-count loops keeps tile accumulators in registers (GCC at -O2
// would otherwise keep the arrays in memory).
#define TM_UNROLL _Pragma("GCC unroll 16")

namespace tmill::kern {
namespace {

inline __m128 hsum4(__m512 a, __m512 b, __m512 c, __m512 d) {
  const __m256 a2 = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
  const __m256 b2 = _mm256_add_ps(_mm512_castps512_ps256(b), _mm512_extractf32x8_ps(b, 1));
  const __m256 c2 = _mm256_add_ps(_mm512_castps512_ps256(c), _mm512_extractf32x8_ps(c, 1));
  const __m256 d2 = _mm256_add_ps(_mm512_castps512_ps256(d), _mm512_extractf32x8_ps(d, 1));
  const __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(a2, b2), _mm256_hadd_ps(c2, d2));
  return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

// 16 weights at column c as f32; `m` masks a partial tail.
template <int Type>
inline __m512 load_w(const uint8_t* row, int64_t c, __mmask16 m) {
  if constexpr (Type == 0) {
    return _mm512_maskz_loadu_ps(m, row + 4 * c);
  } else {
    const __m256i h = _mm256_maskz_loadu_epi16(m, row + 2 * c);
    if constexpr (Type == 1) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

// PF: prefetch the next R rows while this tile runs (first token tile of a call: the weights come from
// DRAM, and R interleaved short row streams defeat the hardware prefetcher).
template <int Type, int R, int T, bool PF>
void ftile(const uint8_t* w, size_t rb, int64_t cols, const float* x, int64_t ldx, float* y, int64_t ldy, int64_t r) {
  __m512 acc[R][T];
  TM_UNROLL
  for (int i = 0; i < R; ++i)
    TM_UNROLL
    for (int t = 0; t < T; ++t) acc[i][t] = _mm512_setzero_ps();
  const uint8_t* rows[R];
  TM_UNROLL
  for (int i = 0; i < R; ++i) rows[i] = w + static_cast<size_t>(r + i) * rb;
  int64_t c = 0;
  auto step = [&](__mmask16 m) {
    __m512 wv[R];
    TM_UNROLL
    for (int i = 0; i < R; ++i) wv[i] = load_w<Type>(rows[i], c, m);
    if constexpr (PF) {
      TM_UNROLL
      for (int i = 0; i < R; ++i)
        _mm_prefetch(reinterpret_cast<const char*>(rows[i] + R * rb + c * (Type == 0 ? 4 : 2)), _MM_HINT_T0);
    }
    TM_UNROLL
    for (int t = 0; t < T; ++t) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, x + t * ldx + c);
      TM_UNROLL
      for (int i = 0; i < R; ++i) acc[i][t] = _mm512_fmadd_ps(wv[i], xv, acc[i][t]);
    }
  };
  for (; c + 16 <= cols; c += 16) step(static_cast<__mmask16>(0xFFFF));
  if (c < cols) step(static_cast<__mmask16>((1u << (cols - c)) - 1));
  TM_UNROLL
  for (int t = 0; t < T; ++t) {
    if constexpr (R == 4) {
      _mm_storeu_ps(y + t * ldy + r, hsum4(acc[0][t], acc[1][t], acc[2][t], acc[3][t]));
    } else {
      TM_UNROLL
      for (int i = 0; i < R; ++i) y[t * ldy + r + i] = _mm512_reduce_add_ps(acc[i][t]);
    }
  }
}

template <int Type, int T>
void rows_tile(const uint8_t* w, size_t rb, int64_t cols, const float* x, int64_t ldx, float* y, int64_t ldy,
               int64_t r0, int64_t r1, bool first, int64_t r_end) {
  int64_t r = r0;
  for (; r + 4 <= r1 && r + 8 <= r_end && first; r += 4) ftile<Type, 4, T, true>(w, rb, cols, x, ldx, y, ldy, r);
  for (; r + 4 <= r1; r += 4) ftile<Type, 4, T, false>(w, rb, cols, x, ldx, y, ldy, r);
  for (; r < r1; ++r) ftile<Type, 1, T, false>(w, rb, cols, x, ldx, y, ldy, r);
}

// One token: rows one after the other (a single sequential stream the hardware prefetcher follows;
// 4-row tiles would interleave 4 short streams per row length and halve the bandwidth), 4 partial
// sums per row.
template <int Type>
void gemv(const uint8_t* w, size_t rb, int64_t cols, const float* x, float* y, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* row = w + static_cast<size_t>(r) * rb;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
    const __mmask16 all = static_cast<__mmask16>(0xFFFF);
    int64_t c = 0;
    for (; c + 64 <= cols; c += 64) {
      a0 = _mm512_fmadd_ps(load_w<Type>(row, c, all), _mm512_loadu_ps(x + c), a0);
      a1 = _mm512_fmadd_ps(load_w<Type>(row, c + 16, all), _mm512_loadu_ps(x + c + 16), a1);
      a2 = _mm512_fmadd_ps(load_w<Type>(row, c + 32, all), _mm512_loadu_ps(x + c + 32), a2);
      a3 = _mm512_fmadd_ps(load_w<Type>(row, c + 48, all), _mm512_loadu_ps(x + c + 48), a3);
    }
    for (; c < cols; c += 16) {
      const __mmask16 m = cols - c >= 16 ? all : static_cast<__mmask16>((1u << (cols - c)) - 1);
      a0 = _mm512_fmadd_ps(load_w<Type>(row, c, m), _mm512_maskz_loadu_ps(m, x + c), a0);
    }
    const __m512 s = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(s), _mm512_extractf32x8_ps(s, 1));
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    y[r] = _mm_cvtss_f32(_mm_add_ss(q, _mm_shuffle_ps(q, q, 1)));
  }
}

template <int Type>
void fgemm_rows(const uint8_t* wp, size_t rb, int64_t cols, const float* x, int64_t ldx, float* y, int64_t ldy,
                int64_t r0, int64_t r1, int64_t T, int64_t r_end) {
  int64_t t = 0;
  for (; t + 6 <= T; t += 6) rows_tile<Type, 6>(wp, rb, cols, x + t * ldx, ldx, y + t * ldy, ldy, r0, r1, t == 0, r_end);
  switch (T - t) {
    case 5: rows_tile<Type, 5>(wp, rb, cols, x + t * ldx, ldx, y + t * ldy, ldy, r0, r1, t == 0, r_end); break;
    case 4: rows_tile<Type, 4>(wp, rb, cols, x + t * ldx, ldx, y + t * ldy, ldy, r0, r1, t == 0, r_end); break;
    case 3: rows_tile<Type, 3>(wp, rb, cols, x + t * ldx, ldx, y + t * ldy, ldy, r0, r1, t == 0, r_end); break;
    case 2: rows_tile<Type, 2>(wp, rb, cols, x + t * ldx, ldx, y + t * ldy, ldy, r0, r1, t == 0, r_end); break;
    case 1: rows_tile<Type, 1>(wp, rb, cols, x + t * ldx, ldx, y + t * ldy, ldy, r0, r1, t == 0, r_end); break;
    default: break;
  }
}

template <int Type>
void fgemm(const void* w, size_t rb, int64_t cols, const float* x, int64_t ldx, float* y, int64_t ldy, int64_t r0,
           int64_t r1, int64_t T) {
  const auto* wp = static_cast<const uint8_t*>(w);
  if (T == 1) return gemv<Type>(wp, rb, cols, x, y, r0, r1);
  fgemm_rows<Type>(wp, rb, cols, x, ldx, y, ldy, r0, r1, T, r1);
}

// ---- bf16 x bf16 -> f32 (vdpbf16ps: each f32 lane accumulates a pair of products)
template <int R, int T, bool PF>
void btile(const uint16_t* w, size_t rb, int64_t cols, const uint16_t* xb, int64_t ldxb, float* y, int64_t ldy,
           int64_t r) {
  __m512 acc[R][T];
  TM_UNROLL
  for (int i = 0; i < R; ++i)
    TM_UNROLL
    for (int t = 0; t < T; ++t) acc[i][t] = _mm512_setzero_ps();
  const uint8_t* rows[R];
  TM_UNROLL
  for (int i = 0; i < R; ++i) rows[i] = reinterpret_cast<const uint8_t*>(w) + static_cast<size_t>(r + i) * rb;
  int64_t c = 0;
  auto step = [&](__mmask32 m) {
    __m512bh wv[R];
    TM_UNROLL
    for (int i = 0; i < R; ++i) wv[i] = (__m512bh)_mm512_maskz_loadu_epi16(m, rows[i] + 2 * c);
    if constexpr (PF) {
      TM_UNROLL
      for (int i = 0; i < R; ++i) _mm_prefetch(reinterpret_cast<const char*>(rows[i] + R * rb + 2 * c), _MM_HINT_T0);
    }
    TM_UNROLL
    for (int t = 0; t < T; ++t) {
      const __m512bh xv = (__m512bh)_mm512_loadu_si512(xb + t * ldxb + c);  // zero-padded to 32
      TM_UNROLL
      for (int i = 0; i < R; ++i) acc[i][t] = _mm512_dpbf16_ps(acc[i][t], wv[i], xv);
    }
  };
  for (; c + 32 <= cols; c += 32) step(~static_cast<__mmask32>(0));
  if (c < cols) step(static_cast<__mmask32>((1u << (cols - c)) - 1));
  TM_UNROLL
  for (int t = 0; t < T; ++t) {
    if constexpr (R == 4) {
      _mm_storeu_ps(y + t * ldy + r, hsum4(acc[0][t], acc[1][t], acc[2][t], acc[3][t]));
    } else {
      TM_UNROLL
      for (int i = 0; i < R; ++i) y[t * ldy + r + i] = _mm512_reduce_add_ps(acc[i][t]);
    }
  }
}

template <int T>
void brows(const uint16_t* w, size_t rb, int64_t cols, const uint16_t* xb, int64_t ldxb, float* y, int64_t ldy,
           int64_t r0, int64_t r1, bool first, int64_t r_end) {
  int64_t r = r0;
  for (; r + 4 <= r1 && r + 8 <= r_end && first; r += 4) btile<4, T, true>(w, rb, cols, xb, ldxb, y, ldy, r);
  for (; r + 4 <= r1; r += 4) btile<4, T, false>(w, rb, cols, xb, ldxb, y, ldy, r);
  for (; r < r1; ++r) btile<1, T, false>(w, rb, cols, xb, ldxb, y, ldy, r);
}

}  // namespace

namespace {
void bgemm_rows(const uint16_t* w, size_t rb, int64_t cols, const uint16_t* xb, int64_t ldxb, float* y, int64_t ldy,
                int64_t r0, int64_t r1, int64_t T, int64_t r_end) {
  int64_t t = 0;
  for (; t + 6 <= T; t += 6) brows<6>(w, rb, cols, xb + t * ldxb, ldxb, y + t * ldy, ldy, r0, r1, t == 0, r_end);
  switch (T - t) {
    case 5: brows<5>(w, rb, cols, xb + t * ldxb, ldxb, y + t * ldy, ldy, r0, r1, t == 0, r_end); break;
    case 4: brows<4>(w, rb, cols, xb + t * ldxb, ldxb, y + t * ldy, ldy, r0, r1, t == 0, r_end); break;
    case 3: brows<3>(w, rb, cols, xb + t * ldxb, ldxb, y + t * ldy, ldy, r0, r1, t == 0, r_end); break;
    case 2: brows<2>(w, rb, cols, xb + t * ldxb, ldxb, y + t * ldy, ldy, r0, r1, t == 0, r_end); break;
    case 1: brows<1>(w, rb, cols, xb + t * ldxb, ldxb, y + t * ldy, ldy, r0, r1, t == 0, r_end); break;
    default: break;
  }
}
}  // namespace

void gemm_bf16_avx512(const uint16_t* w, size_t rb, int64_t cols, const uint16_t* xb, int64_t ldxb, float* y,
                      int64_t ldy, int64_t r0, int64_t r1, int64_t T) {
  bgemm_rows(w, rb, cols, xb, ldxb, y, ldy, r0, r1, T, r1);
}

// ---- bf16 x16 copy (kernel_abi.h): 16 rows in the lanes, so a token's 16 row sums accumulate in one
// register with no horizontal reduction (the dot form above spends ~9 % of a 896-column product
// reducing). Tile: GR groups x TT tokens of accumulators; per column pair, GR weight loads and TT
// activation broadcasts feed GR * TT vdpbf16ps.
namespace {

template <int GR, int TT>
void x16_tile(const uint8_t* w0, int64_t ncp, const uint16_t* xb, int64_t ldxb, float* y, int64_t ldy, int64_t r0,
              int64_t rows) {
  __m512 acc[GR][TT];
  TM_UNROLL
  for (int i = 0; i < GR; ++i)
    TM_UNROLL
    for (int t = 0; t < TT; ++t) acc[i][t] = _mm512_setzero_ps();
  const size_t gstride = static_cast<size_t>(ncp) * 64;
  for (int64_t p = 0; p < ncp; ++p) {
    __m512bh wv[GR];
    TM_UNROLL
    for (int i = 0; i < GR; ++i) {
      const uint8_t* wp = w0 + i * gstride + p * 64;
      _mm_prefetch(reinterpret_cast<const char*>(wp + 1024), _MM_HINT_T0);
      wv[i] = (__m512bh)_mm512_load_si512(wp);
    }
    TM_UNROLL
    for (int t = 0; t < TT; ++t) {
      int32_t pair;
      __builtin_memcpy(&pair, xb + t * ldxb + 2 * p, 4);
      const __m512bh xv = (__m512bh)_mm512_set1_epi32(pair);
      TM_UNROLL
      for (int i = 0; i < GR; ++i) acc[i][t] = _mm512_dpbf16_ps(acc[i][t], wv[i], xv);
    }
  }
  TM_UNROLL
  for (int i = 0; i < GR; ++i) {
    const int64_t left = rows - (r0 + 16 * i);
    const __mmask16 m = left >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
    TM_UNROLL
    for (int t = 0; t < TT; ++t) _mm512_mask_storeu_ps(y + t * ldy + r0 + 16 * i, m, acc[i][t]);
  }
}

template <int GR>
void x16_groups(const uint8_t* w0, int64_t ncp, const uint16_t* xb, int64_t ldxb, float* y, int64_t ldy, int64_t r0,
                int64_t rows, int64_t T) {
  constexpr int kTT = 12;
  int64_t t = 0;
  for (; t + kTT <= T; t += kTT) x16_tile<GR, kTT>(w0, ncp, xb + t * ldxb, ldxb, y + t * ldy, ldy, r0, rows);
  const uint16_t* x = xb + t * ldxb;
  float* yt = y + t * ldy;
  switch (T - t) {
    case 11: return x16_tile<GR, 11>(w0, ncp, x, ldxb, yt, ldy, r0, rows);
    case 10: return x16_tile<GR, 10>(w0, ncp, x, ldxb, yt, ldy, r0, rows);
    case 9: return x16_tile<GR, 9>(w0, ncp, x, ldxb, yt, ldy, r0, rows);
    case 8: return x16_tile<GR, 8>(w0, ncp, x, ldxb, yt, ldy, r0, rows);
    case 7: return x16_tile<GR, 7>(w0, ncp, x, ldxb, yt, ldy, r0, rows);
    case 6: return x16_tile<GR, 6>(w0, ncp, x, ldxb, yt, ldy, r0, rows);
    case 5: return x16_tile<GR, 5>(w0, ncp, x, ldxb, yt, ldy, r0, rows);
    case 4: return x16_tile<GR, 4>(w0, ncp, x, ldxb, yt, ldy, r0, rows);
    case 3: return x16_tile<GR, 3>(w0, ncp, x, ldxb, yt, ldy, r0, rows);
    case 2: return x16_tile<GR, 2>(w0, ncp, x, ldxb, yt, ldy, r0, rows);
    case 1: return x16_tile<GR, 1>(w0, ncp, x, ldxb, yt, ldy, r0, rows);
    default: return;
  }
}

}  // namespace

void gemm_bf16x16_avx512(const uint16_t* w, int64_t ncp, const uint16_t* xb, int64_t ldxb, float* y, int64_t ldy,
                         int64_t rows, int64_t g0, int64_t g1, int64_t T) {
  const auto* base = reinterpret_cast<const uint8_t*>(w);
  const size_t gstride = static_cast<size_t>(ncp) * 64;
  int64_t g = g0;
  for (; g + 2 <= g1; g += 2) x16_groups<2>(base + g * gstride, ncp, xb, ldxb, y, ldy, g * 16, rows, T);
  if (g < g1) x16_groups<1>(base + g * gstride, ncp, xb, ldxb, y, ldy, g * 16, rows, T);
}

FGemmFn fgemm_avx512(int type) {
  switch (type) {
    case 0: return fgemm<0>;
    case 1: return fgemm<1>;
    case 2: return fgemm<2>;
    default: return nullptr;
  }
}

}  // namespace tmill::kern
