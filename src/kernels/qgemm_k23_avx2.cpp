// AVX2 kernels for Q2_K and Q3_K on their x16 layouts (kernels/kernel_abi.h); a group's 64-byte
// chunk vectors are processed as two 8-row ymm halves (as qgemm_kquant_avx2.cpp).
// Products via vpmaddubsw (u8 levels x s8 activations -> int16 pairs): the 4 chunks of a 16-column
// sub-block sum in int16 (4 * 2 * 7 * 127 < 32767), and one vpmaddwd against (sc, sc) int16 pairs
// applies the row's sub-block scale and widens to int32.
//   Q3_K: the zero point 4 enters the int16 sums: + bias16 / 16 (= -2 * xsum) in both halves of
//         each pair, so the pair's vpmaddwd gives sc * (dot - 4 * xsum); y += dx * d * isum
//   Q2_K: mins by vpmaddwd of (m_2i, m_2i+1) pairs with the token's (-xsum_2i, -xsum_2i+1);
//         y += dx * (d * isum - dmin * msum)
#include "kernels/isa_avx2.h"
#include "kernels/kernel_table.h"

namespace tmill::kern {
namespace {

inline __m128i load64(const uint8_t* p) { return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)); }
inline __m128i load128(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }

// One slice's two crumb vectors (this half's 32 bytes at l and l + 64) -> 8 level vectors.
inline void unpack_crumbs(const uint8_t* l, __m256i q[8]) {
  const __m256i m3 = _mm256_set1_epi8(3);
  const __m256i v0 = load_si256(l), v1 = load_si256(l + 64);
  q[0] = _mm256_and_si256(v0, m3);
  q[4] = _mm256_and_si256(v1, m3);
  TM_UNROLL
  for (int c = 1; c < 4; ++c) {
    q[c] = _mm256_and_si256(_mm256_srli_epi16(v0, 2 * c), m3);
    q[c + 4] = _mm256_and_si256(_mm256_srli_epi16(v1, 2 * c), m3);
  }
}

// ORs the third bits h (bit m of byte i = element 4m + i of the slice) into bit 2 of the 8 levels
// (16-bit shifts never bleed into bit 2 for these counts).
inline void add_third_bits(__m256i h, __m256i q[8]) {
  const __m256i b2 = _mm256_set1_epi8(4);
  q[0] = _mm256_or_si256(q[0], _mm256_and_si256(_mm256_slli_epi16(h, 2), b2));
  q[1] = _mm256_or_si256(q[1], _mm256_and_si256(_mm256_slli_epi16(h, 1), b2));
  q[2] = _mm256_or_si256(q[2], _mm256_and_si256(h, b2));
  TM_UNROLL
  for (int m = 3; m < 8; ++m) q[m] = _mm256_or_si256(q[m], _mm256_and_si256(_mm256_srli_epi16(h, m - 2), b2));
}

// 8 int32 scales -> (sc, sc) int16 pairs.
inline __m256i dup16(__m256i s32) {
  return _mm256_or_si256(_mm256_and_si256(s32, _mm256_set1_epi32(0xFFFF)), _mm256_slli_epi32(s32, 16));
}

inline __m256i mub(__m256i q, const uint8_t* x) { return _mm256_maddubs_epi16(q, bcast32x8(x)); }

// int16 sums of one sub-block's 4 chunks (q[0..3] against x[0..15]).
inline __m256i sum4(const __m256i* q, const uint8_t* x) {
  return _mm256_add_epi16(_mm256_add_epi16(mub(q[0], x), mub(q[1], x + 4)),
                          _mm256_add_epi16(mub(q[2], x + 8), mub(q[3], x + 12)));
}

template <int Kind, int U>
void half_tile(const uint8_t* gb, int64_t nb, int hf, const uint8_t* act, int T, int t0, float* y, int64_t ldy,
               int64_t r, int nrows) {
  constexpr bool kQ2 = Kind == kPackQ2_K;
  constexpr int64_t BB = kGroupBlockBytes[Kind];
  const __m256i m4 = _mm256_set1_epi32(0xF);
  __m256 acc[U];
  TM_UNROLL
  for (int u = 0; u < U; ++u) acc[u] = _mm256_setzero_ps();
  const uint8_t* rec = act;
  for (int64_t b = 0; b < nb; ++b, gb += BB, rec += T * kQ8KRecordBytes) {
    // Per token, the record's bias16 (-32 * xsum per 16 columns) as int16: Q2_K -xsum (>> 5),
    // Q3_K -2 * xsum (>> 4).
    alignas(32) int16_t zs[U][16];
    TM_UNROLL
    for (int u = 0; u < U; ++u) {
      const uint8_t* bias = rec + T * 276 + 64 * (t0 + u);
      const __m256i a = _mm256_srai_epi32(load_si256(bias), kQ2 ? 5 : 4);
      const __m256i c = _mm256_srai_epi32(load_si256(bias + 32), kQ2 ? 5 : 4);
      _mm256_store_si256(reinterpret_cast<__m256i*>(zs[u]), _mm256_permute4x64_epi64(_mm256_packs_epi32(a, c), 0xD8));
    }
    __m256i isum[U];
    TM_UNROLL
    for (int u = 0; u < U; ++u) isum[u] = _mm256_setzero_si256();
    for (int s = 0; s < 8; ++s) {
      __m256i q[8], sc0, sc1;
      if constexpr (kQ2) {
        unpack_crumbs(gb + 320 + 128 * s + 32 * hf, q);
        const __m256i p = _mm256_cvtepu8_epi16(load128(gb + 64 + 32 * s + 16 * hf));  // (sm_2s, sm_2s+1) per row
        sc0 = dup16(_mm256_and_si256(p, m4));
        sc1 = dup16(_mm256_and_si256(_mm256_srli_epi32(p, 16), m4));
      } else {
        const uint8_t* sl = gb + 288 + 192 * s;
        unpack_crumbs(sl + 32 * hf, q);
        add_third_bits(load_si256(sl + 128 + 32 * hf), q);
        sc0 = dup16(_mm256_cvtepi8_epi32(load64(gb + 32 + 32 * s + 8 * hf)));
        sc1 = dup16(_mm256_cvtepi8_epi32(load64(gb + 48 + 32 * s + 8 * hf)));
      }
      TM_UNROLL
      for (int u = 0; u < U; ++u) {
        const uint8_t* x = rec + 256 * (t0 + u) + 32 * s;
        __m256i p0 = sum4(q, x), p1 = sum4(q + 4, x + 16);
        if constexpr (!kQ2) {
          p0 = _mm256_add_epi16(p0, _mm256_set1_epi16(zs[u][2 * s]));
          p1 = _mm256_add_epi16(p1, _mm256_set1_epi16(zs[u][2 * s + 1]));
        }
        isum[u] = _mm256_add_epi32(isum[u], _mm256_add_epi32(_mm256_madd_epi16(p0, sc0), _mm256_madd_epi16(p1, sc1)));
      }
    }
    const __m256 dw = load_f16x8(gb + 16 * hf);
    if constexpr (kQ2) {
      const __m256 dmw = load_f16x8(gb + 32 + 16 * hf);
      __m256i ms[U];  // -msum per token
      TM_UNROLL
      for (int u = 0; u < U; ++u) ms[u] = _mm256_setzero_si256();
      for (int i = 0; i < 8; ++i) {
        const __m256i mp = _mm256_srli_epi16(_mm256_cvtepu8_epi16(load128(gb + 64 + 32 * i + 16 * hf)), 4);
        TM_UNROLL
        for (int u = 0; u < U; ++u)
          ms[u] = _mm256_add_epi32(ms[u], _mm256_madd_epi16(mp, bcast32x8(reinterpret_cast<const uint8_t*>(zs[u]) + 4 * i)));
      }
      TM_UNROLL
      for (int u = 0; u < U; ++u) {
        float dx;
        std::memcpy(&dx, rec + T * 256 + 4 * (t0 + u), 4);
        const __m256 dxv = _mm256_set1_ps(dx);
        acc[u] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[u]), _mm256_mul_ps(dw, dxv), acc[u]);
        acc[u] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(ms[u]), _mm256_mul_ps(dmw, dxv), acc[u]);
      }
    } else {
      TM_UNROLL
      for (int u = 0; u < U; ++u) {
        float dx;
        std::memcpy(&dx, rec + T * 256 + 4 * (t0 + u), 4);
        acc[u] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[u]), _mm256_mul_ps(dw, _mm256_set1_ps(dx)), acc[u]);
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

void add_qgemm_k23_avx2(KernelTable& t) {
  for_each_kind<kPackQ2_K, kPackQ3_K>([&](auto k) { t.qgemm[k.value] = entry<decltype(k)::value>; });
}

}  // namespace tmill::kern
