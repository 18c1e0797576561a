// AVX-512 VNNI kernels for the non-linear 4-bit types IQ4_NL, IQ4_XS and MXFP4 on their x16 layouts
// (kernels/kernel_abi.h). The 4-bit indices are unpacked as for Q4_0, then one vpshufb per chunk
// vector looks them up in the 16-entry table, stored as values + 128 (unsigned bytes 1..241 for
// vpdpbusd); the +128 comes back out through the activations' sums:
//   IQ4_NL: Q8 records with zero point 128, the accumulator starts at bias = -128 * sum(x): then as
//           Q8_0 (y16 += float(dot) * dx * dw16), with the two-tile qgemm2 as the legacy kernels.
//   MXFP4:  the same kernel with the doubled E2M1 values (+128) as the table and f32 half scales.
//   IQ4_XS: Q8K records; isum = sum_j sc_j * dot_j (vpmulld by the row's signed 6-bit sub-block scale)
//           minus 128 * sum_j sc_j * bsum32_j (vpdpwssd, as Q4_K's mins); y16 += float(isum) * dw16 * dx
//           per super-block.
// Unpacked weights are reused for all tokens of the tile.
#include "kernels/isa_avx512.h"
#include "kernels/kernel_table.h"
#include "quant/blocks.h"

namespace tmill::kern {
namespace {


// The 16 levels + 128 in each 128-bit lane (vpshufb looks up within lanes).
inline __m512i level_table(const int8_t* values = kIq4nlValues) {
  alignas(16) uint8_t t[16];
  for (int i = 0; i < 16; ++i) t[i] = static_cast<uint8_t>(values[i] + 128);
  return _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(t)));
}

// Nibble chunks of one 32-column block -> 8 vectors of unsigned levels (values + 128).
TM_ISA_INLINE void unpack_levels(const uint8_t* n, __m512i table, __m512i q[8]) {
  unpack_nibbles(n, q);
  TM_UNROLL
  for (int c = 0; c < 8; ++c) q[c] = _mm512_shuffle_epi8(table, q[c]);
}

inline __m512i dot4(__m512i a, const __m512i* q, const uint8_t* x) {
  a = _mm512_dpbusd_epi32(a, q[0], bcast32x16(x));
  a = _mm512_dpbusd_epi32(a, q[1], bcast32x16(x + 4));
  a = _mm512_dpbusd_epi32(a, q[2], bcast32x16(x + 8));
  return _mm512_dpbusd_epi32(a, q[3], bcast32x16(x + 12));
}

// IQ4_NL: NT activation tiles of T tokens (tile h's records at act[h]) in one pass over the weights,
// as the legacy kernels' gemm_tiles (each token's result is the same for any NT).
// MXFP4 (Kind) has E8M0 scale bytes and its nibbles at +16.
template <int Kind, int T, int NT>
void nl_tiles(const uint8_t* w, int64_t nb, int64_t g0, int64_t g1, const uint8_t* const* act, float* y,
              int64_t ldy, int64_t rows) {
  constexpr bool kMx = Kind == kPackMXFP4;
  constexpr int64_t BB = kGroupBlockBytes[Kind];
  const __m512i table = level_table(kMx ? kMxfp4Values : kIq4nlValues);
  for (int64_t g = g0; g < g1; ++g) {
    const uint8_t* gb = w + g * nb * BB;
    const uint8_t* rec[NT];
    TM_UNROLL
    for (int h = 0; h < NT; ++h) rec[h] = act[h];
    __m512 acc[NT * T];
    TM_UNROLL
    for (int t = 0; t < NT * T; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b, gb += BB) {
      prefetch_weights<BB>(gb, kWeightPrefetchBytes);
      __m512i q[8];
      unpack_levels(gb + (kMx ? 16 : 32), table, q);
      const __m512 dw = kMx ? e8m0_half_x16(gb) : load_f16x16(gb);
      TM_UNROLL
      for (int h = 0; h < NT; ++h) {
        const float* dx = reinterpret_cast<const float*>(rec[h] + T * 32);
        const int32_t* bx = reinterpret_cast<const int32_t*>(rec[h] + T * 36);
        TM_UNROLL
        for (int t = 0; t < T; ++t) {
          const uint8_t* xq = rec[h] + 32 * t;
          const __m512i a0 = dot4(_mm512_set1_epi32(bx[t]), q, xq);
          const __m512i a1 = dot4(_mm512_setzero_si512(), q + 4, xq + 16);
          const __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(a0, a1)), _mm512_set1_ps(dx[t]));
          acc[h * T + t] = _mm512_fmadd_ps(f, dw, acc[h * T + t]);
        }
        rec[h] += T * kQ8RecordBytes;
      }
    }
    const __mmask16 mask = group_mask(g, rows);
    TM_UNROLL
    for (int t = 0; t < NT * T; ++t) _mm512_mask_storeu_ps(y + t * ldy + g * kRows, mask, acc[t]);
  }
}

template <int Kind>
void nl_entry(const uint8_t* w, int64_t nb, int64_t g0, int64_t g1, const uint8_t* act, int T, float* y, int64_t ldy,
              int64_t rows) {
  with_count<kTile>(T, [&](auto k) { nl_tiles<Kind, decltype(k)::value, 1>(w, nb, g0, g1, &act, y, ldy, rows); });
}

template <int Kind>
void nl_entry2(const uint8_t* w, int64_t nb, int64_t g0, int64_t g1, const uint8_t* act0, const uint8_t* act1,
               float* y, int64_t ldy, int64_t rows) {
  const uint8_t* act[2] = {act0, act1};
  nl_tiles<Kind, kTile, 2>(w, nb, g0, g1, act, y, ldy, rows);
}

// IQ4_XS: tokens t0..t0+U-1 of a T-token tile, one group (rows r0.., store mask).
template <int U>
void xs_tile(const uint8_t* gb, int64_t nb, const uint8_t* act, int T, int t0, float* y, int64_t ldy, int64_t r0,
             __mmask16 mask) {
  constexpr int64_t BB = kGroupBlockBytes[kPackIQ4_XS];
  const __m512i table = level_table();
  __m512 acc[U];
  TM_UNROLL
  for (int u = 0; u < U; ++u) acc[u] = _mm512_setzero_ps();
  const uint8_t* rec = act;
  for (int64_t b = 0; b < nb; ++b, gb += BB, rec += T * kQ8KRecordBytes) {
    prefetch_weights<BB>(gb, BB);
    __m512i isum[U];
    TM_UNROLL
    for (int u = 0; u < U; ++u) isum[u] = _mm512_setzero_si512();
    __m512i sc[8];
    TM_UNROLL
    for (int j = 0; j < 8; ++j)
      sc[j] = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gb + 32 + 16 * j)));
    TM_UNROLL
    for (int j = 0; j < 8; ++j) {
      __m512i q[8];
      unpack_levels(gb + 160 + 256 * j, table, q);
      TM_UNROLL
      for (int u = 0; u < U; ++u) {
        const uint8_t* x = rec + 256 * (t0 + u) + 32 * j;
        const __m512i a = dot4(dot4(_mm512_setzero_si512(), q, x), q + 4, x + 16);
        isum[u] = _mm512_add_epi32(isum[u], _mm512_mullo_epi32(a, sc[j]));
      }
    }
    // The +128 of the levels: 128 * sum_j sc_j * bsum32_j, by vpdpwssd of (sc_2i, sc_2i+1) int16
    // pairs against the token's (bsum32_2i, bsum32_2i+1), as Q4_K's mins.
    __m512i sp[4];
    TM_UNROLL
    for (int i = 0; i < 4; ++i)
      sp[i] = _mm512_or_si512(_mm512_and_si512(sc[2 * i], _mm512_set1_epi32(0xFFFF)), _mm512_slli_epi32(sc[2 * i + 1], 16));
    const __m512 dw = load_f16x16(gb);
    TM_UNROLL
    for (int u = 0; u < U; ++u) {
      const int t = t0 + u;
      const uint8_t* bs = rec + T * 260 + 16 * t;
      __m512i ms = _mm512_dpwssd_epi32(_mm512_setzero_si512(), sp[0], bcast32x16(bs));
      ms = _mm512_dpwssd_epi32(ms, sp[1], bcast32x16(bs + 4));
      ms = _mm512_dpwssd_epi32(ms, sp[2], bcast32x16(bs + 8));
      ms = _mm512_dpwssd_epi32(ms, sp[3], bcast32x16(bs + 12));
      float dx;
      std::memcpy(&dx, rec + T * 256 + 4 * t, 4);
      const __m512i tot = _mm512_sub_epi32(isum[u], _mm512_slli_epi32(ms, 7));
      acc[u] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(tot), _mm512_mul_ps(dw, _mm512_set1_ps(dx)), acc[u]);
    }
  }
  TM_UNROLL
  for (int u = 0; u < U; ++u) _mm512_mask_storeu_ps(y + (t0 + u) * ldy + r0, mask, acc[u]);
}

void xs_entry(const uint8_t* w, int64_t nb, int64_t g0, int64_t g1, const uint8_t* act, int T, float* y, int64_t ldy,
              int64_t rows) {
  constexpr int64_t BB = kGroupBlockBytes[kPackIQ4_XS];
  for (int64_t g = g0; g < g1; ++g) {
    const __mmask16 mask = group_mask(g, rows);
    const uint8_t* gb = w + g * nb * BB;
    for_each_tile<4>(T, [&](auto u, int64_t t) {
      xs_tile<decltype(u)::value>(gb, nb, act, T, static_cast<int>(t), y, ldy, g * kRows, mask);
    });
  }
}

}  // namespace

void add_qgemm_iq4_avx512(KernelTable& t) {
  t.qgemm[kPackIQ4_NL] = nl_entry<kPackIQ4_NL>;
  t.qgemm2[kPackIQ4_NL] = nl_entry2<kPackIQ4_NL>;
  t.qgemm[kPackIQ4_XS] = xs_entry;
  t.qgemm[kPackMXFP4] = nl_entry<kPackMXFP4>;
  t.qgemm2[kPackMXFP4] = nl_entry2<kPackMXFP4>;
}

}  // namespace tmill::kern
