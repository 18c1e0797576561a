// AVX2 kernels for the K-quants (Q4_K, Q5_K, Q6_K) on the interleaved x16 layouts
// (kernels/kernel_abi.h); a group's 64-byte chunk vectors are processed as two 8-row ymm halves.
// Products via vpmaddubsw (u8 levels x s8 activations -> int16 pairs) and vpmaddwd:
//   Q4_K (levels <= 15): the 8 chunks of a 32-column sub-block sum in int16 (8*2*15*127 < 32767)
//        and one vpmaddwd against (sc, sc) int16 pairs applies the row's sub-block scale;
//   Q5_K (<= 31): two int16 partial sums of 4 chunks each (4*2*31*127 < 32767), same scale trick;
//   Q6_K (<= 63): 2-chunk int16 sums (2*2*63*127 < 32767) -> int32, plus the -32 zero point from
//        the record's bias16, times the signed scale with vpmulld.
// Mins (Q4_K/Q5_K): vpmaddwd of (m_2i, m_2i+1) pairs with the token's (bsum32_2i, bsum32_2i+1).
#include "kernels/isa_avx2.h"
#include "kernels/kernel_table.h"

namespace tmill::kern {
namespace {

inline __m128i load64(const uint8_t* p) { return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)); }

// Q4_K / Q5_K sub-block: nibbles (and the fifth bits h, when not null) -> 8 level vectors.
inline void unpack_q4(const uint8_t* n, const uint8_t* h, __m256i q[8]) {
  unpack_nibbles(n, q);
  if (h) add_fifth_bits(load_si256(h), q);
}

inline void unpack_q6(const uint8_t* n, const uint8_t* h0p, const uint8_t* h1p, __m256i q[8]) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
  const __m256i h0 = load_si256(h0p), h1 = load_si256(h1p);
  const __m256i hs[2][4] = {
      {_mm256_slli_epi16(h0, 4), _mm256_slli_epi16(h0, 2), h0, _mm256_srli_epi16(h0, 2)},
      {_mm256_slli_epi16(h1, 4), _mm256_slli_epi16(h1, 2), h1, _mm256_srli_epi16(h1, 2)}};
  TM_UNROLL
  for (int c = 0; c < 4; ++c) {
    const __m256i v = load_si256(n + 64 * c);
    q[c] = _mm256_or_si256(_mm256_and_si256(v, m4), _mm256_and_si256(hs[0][c], m30));
    q[c + 4] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), m4), _mm256_and_si256(hs[1][c], m30));
  }
}

inline __m256i mub(__m256i q, const uint8_t* x) { return _mm256_maddubs_epi16(q, bcast32x8(x)); }

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
    const __m256 dw = load_f16x8(gb + 16 * hf);
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
                                              bcast32x8(bias));
          const __m256i d1 = _mm256_add_epi32(_mm256_add_epi32(_mm256_madd_epi16(p2, ones), _mm256_madd_epi16(p3, ones)),
                                              bcast32x8(bias + 4));
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
      dmw = load_f16x8(gb + 32 + 16 * hf);
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
        __m256i ms = _mm256_madd_epi16(mp[0], bcast32x8(bs));
        ms = _mm256_add_epi32(ms, _mm256_madd_epi16(mp[1], bcast32x8(bs + 4)));
        ms = _mm256_add_epi32(ms, _mm256_madd_epi16(mp[2], bcast32x8(bs + 8)));
        ms = _mm256_add_epi32(ms, _mm256_madd_epi16(mp[3], bcast32x8(bs + 12)));
        acc[u] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(ms), _mm256_mul_ps(dmw, dxv), acc[u]);
      }
    }
  }
  TM_UNROLL
  for (int u = 0; u < U; ++u) store_rows8(y + (t0 + u) * ldy + r, acc[u], nrows);
}

template <int Kind>
void entry(const uint8_t* w, int64_t nb, int64_t g0, int64_t g1, const uint8_t* act, int T, float* y, int64_t ldy,
           int64_t rows) {
  const int64_t group_bytes = nb * kGroupBlockBytes[Kind];
  for_each_half_tile<2>(w, group_bytes, g0, g1, T, rows,
                        [&](auto u, const uint8_t* gb, int hf, int t0, int64_t r, int nrows) {
                          half_tile<Kind, decltype(u)::value>(gb, nb, hf, act, T, t0, y, ldy, r, nrows);
                        });
}

}  // namespace

void add_qgemm_kquant_avx2(KernelTable& t) {
  for_each_kind<kPackQ4_K, kPackQ5_K, kPackQ6_K>([&](auto k) { t.qgemm[k.value] = entry<decltype(k)::value>; });
}

}  // namespace tmill::kern
