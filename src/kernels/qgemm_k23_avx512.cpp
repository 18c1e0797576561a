// AVX-512 VNNI kernels for Q2_K and Q3_K on their x16 layouts (kernels/kernel_abi.h) against Q8K
// activation records.
//
// Levels are unsigned (Q2_K 0..3, Q3_K 0..7 = low 2 bits | third bit << 2): one 64-byte crumb vector
// holds a 16-column sub-block of all 16 rows, unpacked by a shift and a mask per 4-column chunk.
// Per group-superblock (16 rows x 256 columns) and token everything stays in int32 lanes:
//   dot_j  = vpdpbusd over sub-block j's 4 chunks (16 columns)
//   Q3_K:  isum = sum_j sc_j * (dot_j - 4 * xsum_j): the accumulator of dot_j starts at the zero
//          point's -4 * xsum_j = bias16_j / 8 (the record's bias16 = -32 * xsum); y += dx * d * isum
//   Q2_K:  isum = sum_j sc_j * dot_j; msum = sum_j m_j * xsum_j by vpdpwssd of (m_2i, m_2i+1) pairs
//          against the token's (xsum_2i, xsum_2i+1) (as Q4_K's mins, at 16-column granularity);
//          y += dx * (d * isum - dmin * msum)
// The scales go in by vpmulld per sub-block (as Q6_K). Unpacked weights of a 32-column slice are
// reused for all tokens of the tile.
#include "kernels/isa_avx512.h"
#include "kernels/kernel_table.h"

namespace tmill::kern {
namespace {

inline __m512i load(const uint8_t* p) { return _mm512_loadu_si512(p); }

// One slice's two crumb vectors (sub-blocks 2s, 2s+1) -> 8 level vectors, chunk order.
inline void unpack_crumbs(const uint8_t* l, __m512i q[8]) {
  const __m512i m3 = _mm512_set1_epi8(3);
  const __m512i v0 = load(l), v1 = load(l + 64);
  q[0] = _mm512_and_si512(v0, m3);
  q[4] = _mm512_and_si512(v1, m3);
  TM_UNROLL
  for (int c = 1; c < 4; ++c) {
    q[c] = _mm512_and_si512(_mm512_srli_epi16(v0, 2 * c), m3);
    q[c + 4] = _mm512_and_si512(_mm512_srli_epi16(v1, 2 * c), m3);
  }
}

// ORs the third bits h (bit m of byte i = element 4m + i of the slice) into bit 2 of the 8 levels.
// 16-bit shifts move bits across bytes, but never into bit 2 (right shifts are at most 5).
inline void add_third_bits(__m512i h, __m512i q[8]) {
  const __m512i b2 = _mm512_set1_epi8(4);
  q[0] = _mm512_ternarylogic_epi32(q[0], _mm512_slli_epi16(h, 2), b2, 0xF8);  // a | (b & c)
  q[1] = _mm512_ternarylogic_epi32(q[1], _mm512_slli_epi16(h, 1), b2, 0xF8);
  q[2] = _mm512_ternarylogic_epi32(q[2], h, b2, 0xF8);
  q[3] = _mm512_ternarylogic_epi32(q[3], _mm512_srli_epi16(h, 1), b2, 0xF8);
  q[4] = _mm512_ternarylogic_epi32(q[4], _mm512_srli_epi16(h, 2), b2, 0xF8);
  q[5] = _mm512_ternarylogic_epi32(q[5], _mm512_srli_epi16(h, 3), b2, 0xF8);
  q[6] = _mm512_ternarylogic_epi32(q[6], _mm512_srli_epi16(h, 4), b2, 0xF8);
  q[7] = _mm512_ternarylogic_epi32(q[7], _mm512_srli_epi16(h, 5), b2, 0xF8);
}

inline __m512i dot4(__m512i a, const __m512i* q, const uint8_t* x) {
  a = _mm512_dpbusd_epi32(a, q[0], bcast32x16(x));
  a = _mm512_dpbusd_epi32(a, q[1], bcast32x16(x + 4));
  a = _mm512_dpbusd_epi32(a, q[2], bcast32x16(x + 8));
  return _mm512_dpbusd_epi32(a, q[3], bcast32x16(x + 12));
}

template <int Kind, int U>
void tile(const uint8_t* gb, int64_t nb, const uint8_t* act, int T, int t0, float* y, int64_t ldy, int64_t r0,
          __mmask16 mask) {
  constexpr bool kQ2 = Kind == kPackQ2_K;
  constexpr int64_t BB = kGroupBlockBytes[Kind];
  const __m512i m4 = _mm512_set1_epi32(0xF);
  __m512 acc[U];
  TM_UNROLL
  for (int u = 0; u < U; ++u) acc[u] = _mm512_setzero_ps();
  const uint8_t* rec = act;
  for (int64_t b = 0; b < nb; ++b, gb += BB, rec += T * kQ8KRecordBytes) {
    prefetch_weights<BB>(gb, BB);
    // Per token, from the record's bias16 (-32 * the sum of each 16 x): Q3_K's accumulator starts
    // bias16 / 8 (int32), Q2_K's -xsum = bias16 / 32 as int16 pairs for vpdpwssd.
    alignas(64) int32_t zs[U][16];
    TM_UNROLL
    for (int u = 0; u < U; ++u) {
      const __m512i bias = _mm512_loadu_si512(rec + T * 276 + 64 * (t0 + u));
      if constexpr (kQ2) _mm256_store_si256(reinterpret_cast<__m256i*>(zs[u]), _mm512_cvtepi32_epi16(_mm512_srai_epi32(bias, 5)));
      else _mm512_store_si512(zs[u], _mm512_srai_epi32(bias, 3));
    }
    __m512i isum[U];
    TM_UNROLL
    for (int u = 0; u < U; ++u) isum[u] = _mm512_setzero_si512();
    TM_UNROLL
    for (int s = 0; s < 8; ++s) {
      __m512i q[8], sc0, sc1;
      if constexpr (kQ2) {
        unpack_crumbs(gb + 320 + 128 * s, q);
        // (scale | min << 4) of sub-blocks 2s, 2s+1 as one int16 pair per row
        const __m512i p = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(gb + 64 + 32 * s)));
        sc0 = _mm512_and_si512(p, m4);
        sc1 = _mm512_and_si512(_mm512_srli_epi32(p, 16), m4);
      } else {
        const uint8_t* sl = gb + 288 + 192 * s;
        unpack_crumbs(sl, q);
        add_third_bits(load(sl + 128), q);
        sc0 = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gb + 32 + 32 * s)));
        sc1 = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gb + 48 + 32 * s)));
      }
      TM_UNROLL
      for (int u = 0; u < U; ++u) {
        const uint8_t* x = rec + 256 * (t0 + u) + 32 * s;
        __m512i a0, a1;
        if constexpr (kQ2) {
          a0 = dot4(_mm512_setzero_si512(), q, x);
          a1 = dot4(_mm512_setzero_si512(), q + 4, x + 16);
        } else {
          a0 = dot4(_mm512_set1_epi32(zs[u][2 * s]), q, x);
          a1 = dot4(_mm512_set1_epi32(zs[u][2 * s + 1]), q + 4, x + 16);
        }
        isum[u] = _mm512_add_epi32(isum[u], _mm512_add_epi32(_mm512_mullo_epi32(a0, sc0), _mm512_mullo_epi32(a1, sc1)));
      }
    }
    const __m512 dw = load_f16x16(gb);
    if constexpr (kQ2) {
      __m512i mp[8];
      TM_UNROLL
      for (int i = 0; i < 8; ++i)
        mp[i] = _mm512_srli_epi16(
            _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(gb + 64 + 32 * i))), 4);
      const __m512 dmw = load_f16x16(gb + 32);
      TM_UNROLL
      for (int u = 0; u < U; ++u) {
        const auto* zp = reinterpret_cast<const uint8_t*>(zs[u]);
        __m512i ms = _mm512_setzero_si512();  // -msum
        TM_UNROLL
        for (int i = 0; i < 8; ++i) ms = _mm512_dpwssd_epi32(ms, mp[i], bcast32x16(zp + 4 * i));
        float dx;
        std::memcpy(&dx, rec + T * 256 + 4 * (t0 + u), 4);
        const __m512 dxv = _mm512_set1_ps(dx);
        acc[u] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[u]), _mm512_mul_ps(dw, dxv), acc[u]);
        acc[u] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ms), _mm512_mul_ps(dmw, dxv), acc[u]);
      }
    } else {
      TM_UNROLL
      for (int u = 0; u < U; ++u) {
        float dx;
        std::memcpy(&dx, rec + T * 256 + 4 * (t0 + u), 4);
        acc[u] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[u]), _mm512_mul_ps(dw, _mm512_set1_ps(dx)), acc[u]);
      }
    }
  }
  TM_UNROLL
  for (int u = 0; u < U; ++u) _mm512_mask_storeu_ps(y + (t0 + u) * ldy + r0, mask, acc[u]);
}

template <int Kind>
void entry(const uint8_t* w, int64_t nb, int64_t g0, int64_t g1, const uint8_t* act, int T, float* y, int64_t ldy,
           int64_t rows) {
  constexpr int64_t BB = kGroupBlockBytes[Kind];
  for (int64_t g = g0; g < g1; ++g) {
    const __mmask16 mask = group_mask(g, rows);
    const uint8_t* gb = w + g * nb * BB;
    for_each_tile<4>(T, [&](auto u, int64_t t) {
      tile<Kind, decltype(u)::value>(gb, nb, act, T, static_cast<int>(t), y, ldy, g * kRows, mask);
    });
  }
}

}  // namespace

void add_qgemm_k23_avx512(KernelTable& t) {
  for_each_kind<kPackQ2_K, kPackQ3_K>([&](auto k) { t.qgemm[k.value] = entry<decltype(k)::value>; });
}

}  // namespace tmill::kern
