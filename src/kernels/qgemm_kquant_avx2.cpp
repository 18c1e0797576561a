// AVX2 kernels for the K-quants (Q4_K, Q5_K, Q6_K) on the interleaved x16 layouts
// (kernels/kernel_abi.h); a group's 64-byte chunk vectors are processed as two 8-row ymm halves.
// Products via vpmaddubsw (u8 levels x s8 activations -> int16 pairs) and vpmaddwd:
//   Q4_K (levels <= 15): the 8 chunks of a 32-column sub-block sum in int16 (8*2*15*127 < 32767)
//        and one vpmaddwd against (sc, sc) int16 pairs applies the row's sub-block scale;
//   Q5_K (<= 31): two int16 partial sums of 4 chunks each (4*2*31*127 < 32767), same scale trick;
//   Q6_K (<= 63): 2-chunk int16 sums (2*2*63*127 < 32767) -> int32, plus the -32 zero point from
//        the record's bias16, times the signed scale with vpmulld.
// Mins (Q4_K/Q5_K): vpmaddwd of (m_2i, m_2i+1) pairs with the token's (bsum32_2i, bsum32_2i+1).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/kernel_abi.h"

// Full unrolling of the short fixed-count loops keeps tile accumulators in registers (GCC at -O2
// would otherwise keep the arrays in memory).
#define TM_UNROLL _Pragma("GCC unroll 16")

namespace tmill::kern {
namespace {

inline __m256i bcast32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}
inline __m256i load(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m128i load64(const uint8_t* p) { return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)); }

inline void unpack_q4(const uint8_t* n, const uint8_t* h, __m256i q[8]) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  TM_UNROLL
  for (int c = 0; c < 4; ++c) {
    const __m256i v = load(n + 64 * c);
    q[c] = _mm256_and_si256(v, m4);
    q[c + 4] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
  }
  if (h) {
    const __m256i hv = load(h);
    const __m256i b4 = _mm256_set1_epi8(0x10);
    q[0] = _mm256_or_si256(q[0], _mm256_and_si256(_mm256_slli_epi16(hv, 4), b4));
    q[1] = _mm256_or_si256(q[1], _mm256_and_si256(_mm256_slli_epi16(hv, 3), b4));
    q[2] = _mm256_or_si256(q[2], _mm256_and_si256(_mm256_slli_epi16(hv, 2), b4));
    q[3] = _mm256_or_si256(q[3], _mm256_and_si256(_mm256_slli_epi16(hv, 1), b4));
    q[4] = _mm256_or_si256(q[4], _mm256_and_si256(hv, b4));
    q[5] = _mm256_or_si256(q[5], _mm256_and_si256(_mm256_srli_epi16(hv, 1), b4));
    q[6] = _mm256_or_si256(q[6], _mm256_and_si256(_mm256_srli_epi16(hv, 2), b4));
    q[7] = _mm256_or_si256(q[7], _mm256_and_si256(_mm256_srli_epi16(hv, 3), b4));
  }
}

inline void unpack_q6(const uint8_t* n, const uint8_t* h0p, const uint8_t* h1p, __m256i q[8]) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
  const __m256i h0 = load(h0p), h1 = load(h1p);
  const __m256i hs[2][4] = {
      {_mm256_slli_epi16(h0, 4), _mm256_slli_epi16(h0, 2), h0, _mm256_srli_epi16(h0, 2)},
      {_mm256_slli_epi16(h1, 4), _mm256_slli_epi16(h1, 2), h1, _mm256_srli_epi16(h1, 2)}};
  TM_UNROLL
  for (int c = 0; c < 4; ++c) {
    const __m256i v = load(n + 64 * c);
    q[c] = _mm256_or_si256(_mm256_and_si256(v, m4), _mm256_and_si256(hs[0][c], m30));
    q[c + 4] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), _mm256_and_si256(hs[1][c], m30));
  }
}

inline __m256i mub(__m256i q, const uint8_t* x) { return _mm256_maddubs_epi16(q, bcast32(x)); }

template <int Kind, int U>
void half_tile(const uint8_t* gb, int64_t nb, int hf, const uint8_t* act, int T, int t0, float* y, int64_t ldy,
               int64_t r, int nrows) {
  constexpr int64_t BB = kGroupBlockBytes[Kind];
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[U];
  TM_UNROLL
  for (int u = 0; u < U; ++u) acc[u] = _mm256_setzero_ps();
  const uint8_t* rec = act;
  for (int64_t b = 0; b < nb; ++b, gb += BB, rec += T * kQ8KRecordBytes) {
    __m256i isum[U];
    TM_UNROLL
    for (int u = 0; u < U; ++u) isum[u] = _mm256_setzero_si256();
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gb + 16 * hf)));
    __m256 dmw = _mm256_setzero_ps();
    if constexpr (Kind == kPackQ6_K) {
      for (int s = 0; s < 8; ++s) {
        __m256i q[8];
        unpack_q6(gb + 288 + 384 * s + 32 * hf, gb + 544 + 384 * s + 32 * hf, gb + 608 + 384 * s + 32 * hf, q);
        const __m256i sc0 = _mm256_cvtepi8_epi32(load64(gb + 32 + 32 * s + 8 * hf));
        const __m256i sc1 = _mm256_cvtepi8_epi32(load64(gb + 48 + 32 * s + 8 * hf));
        TM_UNROLL
        for (int u = 0; u < U; ++u) {
          const int t = t0 + u;
          const uint8_t* x = rec + 256 * t + 32 * s;
          const uint8_t* bias = rec + T * 276 + 4 * (16 * t + 2 * s);
          const __m256i p0 = _mm256_add_epi16(mub(q[0], x), mub(q[1], x + 4));
          const __m256i p1 = _mm256_add_epi16(mub(q[2], x + 8), mub(q[3], x + 12));
          const __m256i p2 = _mm256_add_epi16(mub(q[4], x + 16), mub(q[5], x + 20));
          const __m256i p3 = _mm256_add_epi16(mub(q[6], x + 24), mub(q[7], x + 28));
          const __m256i d0 = _mm256_add_epi32(_mm256_add_epi32(_mm256_madd_epi16(p0, ones), _mm256_madd_epi16(p1, ones)),
                                              bcast32(bias));
          const __m256i d1 = _mm256_add_epi32(_mm256_add_epi32(_mm256_madd_epi16(p2, ones), _mm256_madd_epi16(p3, ones)),
                                              bcast32(bias + 4));
          isum[u] = _mm256_add_epi32(isum[u], _mm256_add_epi32(_mm256_mullo_epi32(d0, sc0), _mm256_mullo_epi32(d1, sc1)));
        }
      }
    } else {
      for (int j = 0; j < 8; ++j) {
        __m256i q[8];
        unpack_q4(gb + 320 + (Kind == kPackQ5_K ? 320 : 256) * j + 32 * hf,
                  Kind == kPackQ5_K ? gb + 576 + 320 * j + 32 * hf : nullptr, q);
        const __m256i s32 = _mm256_cvtepu8_epi32(load64(gb + 64 + 16 * j + 8 * hf));
        const __m256i sc = _mm256_or_si256(s32, _mm256_slli_epi32(s32, 16));  // (sc, sc) int16 pairs
        TM_UNROLL
        for (int u = 0; u < U; ++u) {
          const uint8_t* x = rec + 256 * (t0 + u) + 32 * j;
          __m256i p0 = _mm256_add_epi16(mub(q[0], x), mub(q[1], x + 4));
          p0 = _mm256_add_epi16(p0, _mm256_add_epi16(mub(q[2], x + 8), mub(q[3], x + 12)));
          __m256i p1 = _mm256_add_epi16(mub(q[4], x + 16), mub(q[5], x + 20));
          p1 = _mm256_add_epi16(p1, _mm256_add_epi16(mub(q[6], x + 24), mub(q[7], x + 28)));
          __m256i d;
          if constexpr (Kind == kPackQ4_K) d = _mm256_madd_epi16(_mm256_add_epi16(p0, p1), sc);
          else d = _mm256_add_epi32(_mm256_madd_epi16(p0, sc), _mm256_madd_epi16(p1, sc));
          isum[u] = _mm256_add_epi32(isum[u], d);
        }
      }
      dmw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gb + 32 + 16 * hf)));
    }
    __m256i mp[4];
    if constexpr (Kind != kPackQ6_K) {
      TM_UNROLL
      for (int i = 0; i < 4; ++i)
        mp[i] = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gb + 192 + 32 * i + 16 * hf)));
    }
    TM_UNROLL
    for (int u = 0; u < U; ++u) {
      const int t = t0 + u;
      float dx;
      std::memcpy(&dx, rec + T * 256 + 4 * t, 4);
      const __m256 dxv = _mm256_set1_ps(dx);
      acc[u] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[u]), _mm256_mul_ps(dw, dxv), acc[u]);
      if constexpr (Kind != kPackQ6_K) {
        const uint8_t* bs = rec + T * 260 + 16 * t;
        __m256i ms = _mm256_madd_epi16(mp[0], bcast32(bs));
        ms = _mm256_add_epi32(ms, _mm256_madd_epi16(mp[1], bcast32(bs + 4)));
        ms = _mm256_add_epi32(ms, _mm256_madd_epi16(mp[2], bcast32(bs + 8)));
        ms = _mm256_add_epi32(ms, _mm256_madd_epi16(mp[3], bcast32(bs + 12)));
        acc[u] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(ms), _mm256_mul_ps(dmw, dxv), acc[u]);
      }
    }
  }
  TM_UNROLL
  for (int u = 0; u < U; ++u) {
    float* dst = y + (t0 + u) * ldy + r;
    if (nrows == 8) {
      _mm256_storeu_ps(dst, acc[u]);
    } else {
      float tmp[8];
      _mm256_storeu_ps(tmp, acc[u]);
      for (int i = 0; i < nrows; ++i) dst[i] = tmp[i];
    }
  }
}

template <int Kind>
void entry(const uint8_t* w, int64_t nb, int64_t g0, int64_t g1, const uint8_t* act, int T, float* y, int64_t ldy,
           int64_t rows) {
  constexpr int64_t BB = kGroupBlockBytes[Kind];
  for (int64_t g = g0; g < g1; ++g) {
    for (int hf = 0; hf < 2; ++hf) {
      const int64_t r = g * kRows + 8 * hf;
      if (r >= rows) break;
      const int nrows = rows - r >= 8 ? 8 : static_cast<int>(rows - r);
      const uint8_t* gb = w + g * nb * BB;
      int t = 0;
      for (; t + 2 <= T; t += 2) half_tile<Kind, 2>(gb, nb, hf, act, T, t, y, ldy, r, nrows);
      if (t < T) half_tile<Kind, 1>(gb, nb, hf, act, T, t, y, ldy, r, nrows);
    }
  }
}

}  // namespace

QGemmFn qgemm_kquant_avx2(int kind) {
  switch (kind) {
    case kPackQ4_K: return entry<kPackQ4_K>;
    case kPackQ5_K: return entry<kPackQ5_K>;
    case kPackQ6_K: return entry<kPackQ6_K>;
    default: return nullptr;
  }
}

}  // namespace tmill::kern
