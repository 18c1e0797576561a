// AVX-512 products for float weight types on their row-major file layout ("dot form"):
// a tile of R = 4 rows x T tokens keeps R*T vector accumulators; each step loads one vector of every
// row and every token and does R*T FMAs (f32: 16 columns per step; bf16: vdpbf16ps, 32 columns).
// The 4 row sums of one token are reduced together and stored as one 128-bit vector.
//   fgemm_*   : f32 FMA, weights converted to f32 on load (F32 / F16 via vcvtph2ps / BF16 by shift);
//               used for GEMV (exact products) and as the GEMM on machines without the bf16 path.
//   gemm_bf16 : activations pre-converted to bf16, weights bf16 (BF16 files or the packed copy of F16).
// Token tiles are outermost within a call so a tile's activations stay in L1 while the call's row
// range (sized by the dispatcher to fit L2) streams past.
#include "kernels/isa_avx512.h"
#include "kernels/kernel_table.h"

namespace tmill::kern {
namespace {

// 16 weights of row `row` from column c as f32; `m` masks a partial tail.
template <int Type>
inline __m512 load_w(const uint8_t* row, int64_t c, __mmask16 m) {
  return load16<Type>(row + elem_bytes<Type>() * c, m);
}

// The R x T tile's row sums: y[t][r + i] = sum of acc[i][t].
template <int R, int T>
TM_ISA_INLINE void store_row_sums(const __m512 (&acc)[R][T], float* y, int64_t ldy, int64_t r) {
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

// PF: prefetch the next R rows while this tile runs (first token tile of a call: the weights come from
// DRAM, and R interleaved short row streams defeat the hardware prefetcher).
template <int Type, int R, int T, bool PF>
void ftile(const uint8_t* w, size_t rb, int64_t cols, const float* x, int64_t ldx, float* y, int64_t ldy, int64_t r) {
  __m512 acc[R][T];
  zero_tile(acc);
  const uint8_t* rows[R];
  row_pointers(rows, w, rb, r);
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
  if (c < cols) step(tail_mask16(cols - c));
  store_row_sums(acc, y, ldy, r);
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
      const __mmask16 m = tail_mask16(cols - c);
      a0 = _mm512_fmadd_ps(load_w<Type>(row, c, m), _mm512_maskz_loadu_ps(m, x + c), a0);
    }
    y[r] = hsum16(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  }
}

template <int Type>
void fgemm_rows(const uint8_t* wp, size_t rb, int64_t cols, const float* x, int64_t ldx, float* y, int64_t ldy,
                int64_t r0, int64_t r1, int64_t T, int64_t r_end) {
  for_each_tile<6>(T, [&](auto tt, int64_t t) {
    rows_tile<Type, decltype(tt)::value>(wp, rb, cols, x + t * ldx, ldx, y + t * ldy, ldy, r0, r1, t == 0, r_end);
  });
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
  zero_tile(acc);
  const uint8_t* rows[R];
  row_pointers(rows, w, rb, r);
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
  store_row_sums(acc, y, ldy, r);
}

template <int T>
void brows(const uint16_t* w, size_t rb, int64_t cols, const uint16_t* xb, int64_t ldxb, float* y, int64_t ldy,
           int64_t r0, int64_t r1, bool first, int64_t r_end) {
  int64_t r = r0;
  for (; r + 4 <= r1 && r + 8 <= r_end && first; r += 4) btile<4, T, true>(w, rb, cols, xb, ldxb, y, ldy, r);
  for (; r + 4 <= r1; r += 4) btile<4, T, false>(w, rb, cols, xb, ldxb, y, ldy, r);
  for (; r < r1; ++r) btile<1, T, false>(w, rb, cols, xb, ldxb, y, ldy, r);
}

void bgemm_rows(const uint16_t* w, size_t rb, int64_t cols, const uint16_t* xb, int64_t ldxb, float* y, int64_t ldy,
                int64_t r0, int64_t r1, int64_t T, int64_t r_end) {
  for_each_tile<6>(T, [&](auto tt, int64_t t) {
    brows<decltype(tt)::value>(w, rb, cols, xb + t * ldxb, ldxb, y + t * ldy, ldy, r0, r1, t == 0, r_end);
  });
}

void gemm_bf16(const uint16_t* w, size_t rb, int64_t cols, const uint16_t* xb, int64_t ldxb, float* y, int64_t ldy,
               int64_t r0, int64_t r1, int64_t T) {
  bgemm_rows(w, rb, cols, xb, ldxb, y, ldy, r0, r1, T, r1);
}

// ---- bf16 x16 copy (kernel_abi.h): 16 rows in the lanes, so a token's 16 row sums accumulate in one
// register with no horizontal reduction (the dot form above spends ~9 % of a 896-column product
// reducing). Tile: GR groups x TT tokens of accumulators; per column pair, GR weight loads and TT
// activation broadcasts feed GR * TT vdpbf16ps.

template <int GR, int TT>
void x16_tile(const uint8_t* w0, int64_t ncp, const uint16_t* xb, int64_t ldxb, float* y, int64_t ldy, int64_t r0,
              int64_t rows) {
  __m512 acc[GR][TT];
  zero_tile(acc);
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
    const __mmask16 m = tail_mask16(rows - (r0 + 16 * i));
    TM_UNROLL
    for (int t = 0; t < TT; ++t) _mm512_mask_storeu_ps(y + t * ldy + r0 + 16 * i, m, acc[i][t]);
  }
}

template <int GR>
void x16_groups(const uint8_t* w0, int64_t ncp, const uint16_t* xb, int64_t ldxb, float* y, int64_t ldy, int64_t r0,
                int64_t rows, int64_t T) {
  for_each_tile<12>(T, [&](auto tt, int64_t t) {
    x16_tile<GR, decltype(tt)::value>(w0, ncp, xb + t * ldxb, ldxb, y + t * ldy, ldy, r0, rows);
  });
}

void gemm_bf16x16(const uint16_t* w, int64_t ncp, const uint16_t* xb, int64_t ldxb, float* y, int64_t ldy,
                  int64_t rows, int64_t g0, int64_t g1, int64_t T) {
  const auto* base = reinterpret_cast<const uint8_t*>(w);
  const size_t gstride = static_cast<size_t>(ncp) * 64;
  int64_t g = g0;
  for (; g + 2 <= g1; g += 2) x16_groups<2>(base + g * gstride, ncp, xb, ldxb, y, ldy, g * 16, rows, T);
  if (g < g1) x16_groups<1>(base + g * gstride, ncp, xb, ldxb, y, ldy, g * 16, rows, T);
}

}  // namespace

void add_fgemm_avx512(KernelTable& t) {
  for_each_kind<kFloatF32, kFloatF16, kFloatBF16>([&](auto k) { t.fgemm[k.value] = fgemm<decltype(k)::value>; });
  t.gemm_bf16 = gemm_bf16;
  t.gemm_bf16x16 = gemm_bf16x16;
}

}  // namespace tmill::kern
