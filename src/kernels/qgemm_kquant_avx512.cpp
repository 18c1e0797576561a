// AVX-512 VNNI kernels for the K-quants (Q4_K, Q5_K, Q6_K) on the interleaved x16 layouts
// (kernels/kernel_abi.h) against Q8K activation records.
//
// Per group-superblock (16 rows x 256 columns) and token, everything stays in int32 lanes until the
// end of the superblock:
//   Q4_K/Q5_K: isum = sum_j sc_j * dot_j (vpdpbusd per 32-column sub-block, vpmulld by the row's
//              6-bit scale); msum = sum_j m_j * bsum32_j (vpdpwssd on (m_2i, m_2i+1) pairs);
//              y += dx * (d * isum - dmin * msum)
//   Q6_K:      isum = sum_j sc_j * (dot_j - 32 * bsum16_j), the -32 zero point preloaded into the
//              accumulator from the record's bias16; y += dx * d * isum
// Unpacked weights of a sub-block are reused for all tokens of the tile.
#include "kernels/isa_avx512.h"
#include "kernels/kernel_table.h"

namespace tmill::kern {
namespace {

inline __m512i load(const uint8_t* p) { return _mm512_loadu_si512(p); }

// Nibble chunks of one 32-column sub-block -> 8 level vectors (Q4_0 order), plus fifth bits.
inline void unpack_q4(const uint8_t* n, const uint8_t* h, __m512i q[8]) {
  unpack_nibbles(n, q);
  if (h) add_fifth_bits(load(h), q);
}

// Q6_K: nibbles plus high 2 bits (bits 2c.. of h0 for chunk c, of h1 for chunk c+4) -> levels 0..63.
inline void unpack_q6(const uint8_t* n, const uint8_t* h2, __m512i q[8]) {
  const __m512i m4 = _mm512_set1_epi8(0x0F), m30 = _mm512_set1_epi8(0x30);
  const __m512i h0 = load(h2), h1 = load(h2 + 64);
  const __m512i hs[2][4] = {
      {_mm512_slli_epi16(h0, 4), _mm512_slli_epi16(h0, 2), h0, _mm512_srli_epi16(h0, 2)},
      {_mm512_slli_epi16(h1, 4), _mm512_slli_epi16(h1, 2), h1, _mm512_srli_epi16(h1, 2)}};
  TM_UNROLL
  for (int c = 0; c < 4; ++c) {
    const __m512i v = load(n + 64 * c);
    q[c] = _mm512_ternarylogic_epi32(_mm512_and_si512(v, m4), hs[0][c], m30, 0xF8);  // a | (b & c)
    q[c + 4] = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(v, 4), m4), hs[1][c], m30, 0xF8);
  }
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
  constexpr int64_t BB = kGroupBlockBytes[Kind];
  // Weight prefetch. Tiles of 4+ tokens: the super-block two ahead, an eighth of it (kChunk, whole
  // lines) before each sub-block; all of its 37-53 lines in one burst at the top of the super-block had
  // left the first token tile of each row group waiting on its weight loads (BM_Gemm 896x4864 n:16, one
  // thread, AMD EPYC, alternating: Q6_K 477-563 -> 360-368 us, Q4_K 394-530 -> 367-428, Q5_K 484-576 ->
  // 454-480). Smaller tiles (the GEMV): the next super-block at the top, as before.
  constexpr bool kSpread = U >= 4;
  constexpr int64_t kChunk = ((BB + 7) / 8 + 63) / 64 * 64;
  __m512 acc[U];
  TM_UNROLL
  for (int u = 0; u < U; ++u) acc[u] = _mm512_setzero_ps();
  const uint8_t* rec = act;
  for (int64_t b = 0; b < nb; ++b, gb += BB, rec += T * kQ8KRecordBytes) {
    if constexpr (!kSpread) prefetch_weights<BB>(gb, BB);
    __m512i isum[U];
    TM_UNROLL
    for (int u = 0; u < U; ++u) isum[u] = _mm512_setzero_si512();
    if constexpr (Kind == kPackQ6_K) {
      auto sub_block = [&](int s) __attribute__((always_inline)) {
        __m512i q[8];
        unpack_q6(gb + 288 + 384 * s, gb + 544 + 384 * s, q);
        const __m512i sc0 = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gb + 32 + 32 * s)));
        const __m512i sc1 =
            _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gb + 48 + 32 * s)));
        TM_UNROLL
        for (int u = 0; u < U; ++u) {
          const int t = t0 + u;
          const uint8_t* x = rec + 256 * t + 32 * s;
          const uint8_t* bias = rec + T * 276 + 4 * (16 * t + 2 * s);
          const __m512i a0 = dot4(bcast32x16(bias), q, x);
          const __m512i a1 = dot4(bcast32x16(bias + 4), q + 4, x + 16);
          isum[u] = _mm512_add_epi32(isum[u], _mm512_add_epi32(_mm512_mullo_epi32(a0, sc0), _mm512_mullo_epi32(a1, sc1)));
        }
      };
      // Tiles of 4+ tokens: the sub-blocks in a loop. Unrolled, GCC hoisted their unpacking and spilled
      // 8.8 KiB of stack (BM_Gemm Q6_K n:16 226 -> 256-296 GOPS with the loop and the 2-block prefetch).
      if constexpr (kSpread) {
#pragma GCC unroll 1
        for (int s = 0; s < 8; ++s) {
          prefetch_weights<kChunk>(gb + kChunk * s, 2 * BB);
          sub_block(s);
        }
      } else {
        TM_UNROLL
        for (int s = 0; s < 8; ++s) sub_block(s);
      }
      const __m512 dw = load_f16x16(gb);
      TM_UNROLL
      for (int u = 0; u < U; ++u) {
        float dx;
        std::memcpy(&dx, rec + T * 256 + 4 * (t0 + u), 4);
        acc[u] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[u]), _mm512_mul_ps(dw, _mm512_set1_ps(dx)), acc[u]);
      }
    } else {
      TM_UNROLL
      for (int j = 0; j < 8; ++j) {
        if constexpr (kSpread) prefetch_weights<kChunk>(gb + kChunk * j, 2 * BB);
        __m512i q[8];
        unpack_q4(gb + 320 + (Kind == kPackQ5_K ? 320 : 256) * j, Kind == kPackQ5_K ? gb + 576 + 320 * j : nullptr, q);
        const __m512i sc = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gb + 64 + 16 * j)));
        TM_UNROLL
        for (int u = 0; u < U; ++u) {
          const uint8_t* x = rec + 256 * (t0 + u) + 32 * j;
          const __m512i a = dot4(dot4(_mm512_setzero_si512(), q, x), q + 4, x + 16);
          isum[u] = _mm512_add_epi32(isum[u], _mm512_mullo_epi32(a, sc));
        }
      }
      const __m512 dw = load_f16x16(gb);
      const __m512 dmw = load_f16x16(gb + 32);
      __m512i mp[4];
      TM_UNROLL
      for (int i = 0; i < 4; ++i)
        mp[i] = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(gb + 192 + 32 * i)));
      TM_UNROLL
      for (int u = 0; u < U; ++u) {
        const int t = t0 + u;
        const uint8_t* bs = rec + T * 260 + 16 * t;
        __m512i ms = _mm512_dpwssd_epi32(_mm512_setzero_si512(), mp[0], bcast32x16(bs));
        ms = _mm512_dpwssd_epi32(ms, mp[1], bcast32x16(bs + 4));
        ms = _mm512_dpwssd_epi32(ms, mp[2], bcast32x16(bs + 8));
        ms = _mm512_dpwssd_epi32(ms, mp[3], bcast32x16(bs + 12));
        float dx;
        std::memcpy(&dx, rec + T * 256 + 4 * t, 4);
        const __m512 dxv = _mm512_set1_ps(dx);
        acc[u] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[u]), _mm512_mul_ps(dw, dxv), acc[u]);
        acc[u] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(ms), _mm512_mul_ps(dmw, dxv), acc[u]);
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
    // Q6_K: the whole tile of up to 8 tokens per unpack (its unpacking costs more than Q4_K's, and it
    // keeps fewer vectors live per token); Q4_K/Q5_K: 4 tokens (8 spill).
    for_each_tile<Kind == kPackQ6_K ? 8 : 4>(T, [&](auto u, int64_t t) {
      tile<Kind, decltype(u)::value>(gb, nb, act, T, static_cast<int>(t), y, ldy, g * kRows, mask);
    });
  }
}

}  // namespace

void add_qgemm_kquant_avx512(KernelTable& t) {
  for_each_kind<kPackQ4_K, kPackQ5_K, kPackQ6_K>([&](auto k) { t.qgemm[k.value] = entry<decltype(k)::value>; });
}

}  // namespace tmill::kern
