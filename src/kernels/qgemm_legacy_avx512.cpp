// AVX-512 VNNI kernels for the 32-element block types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) on the
// interleaved x16 layouts (kernels/kernel_abi.h).
//
// Per group-block (16 rows x 32 columns) the 8 chunk vectors are unpacked to unsigned bytes once
// and reused for all T tokens of the tile. For one token: 8 x vpdpbusd against the token's 4-byte
// activation chunks broadcast to all lanes gives the 16 row dot products in int32 lanes; the
// accumulator starts at the activation block's `bias` (-zero_point * sum(x)), so the zero point
// costs nothing. Then one int->float conversion and two multiplies by the activation and weight
// scales: y16 += float(dot) * dx * dw16.
#include "kernels/isa_avx512.h"
#include "kernels/kernel_table.h"

namespace tmill::kern {
namespace {

// NT activation tiles of T tokens each (tile h's records at act[h]) in one pass over the weights;
// y rows are tokens h * T + t. NT = 1 is the plain kernel; NT = 2 with T = kTile (`qgemm2`) loads and
// unpacks each group-block once for 16 tokens instead of once per tile, so in batched decode (16+
// streams) the weight stream from DRAM overlaps twice as much arithmetic instead of a DRAM-bound
// pass followed by a compute-bound one. The per-token arithmetic does not depend on NT, so every
// token's result is bitwise the same either way.
template <int Kind, int T, int NT>
void gemm_tiles(const uint8_t* w, int64_t nb, int64_t g0, int64_t g1, const uint8_t* const* act, float* y,
                int64_t ldy, int64_t rows) {
  constexpr int64_t BB = kGroupBlockBytes[Kind];
  constexpr bool kMin = Kind == kPackQ4_1 || Kind == kPackQ5_1;
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
      unpack_legacy<Kind>(gb, q);
      const __m512 dw = load_f16x16(gb);
      __m512 mw = _mm512_setzero_ps();
      if constexpr (kMin) mw = load_f16x16(gb + kLegacyLayout[Kind].m);
      TM_UNROLL
      for (int h = 0; h < NT; ++h) {
        const float* dx = reinterpret_cast<const float*>(rec[h] + T * 32);
        const int32_t* bx = reinterpret_cast<const int32_t*>(rec[h] + T * 36);
        TM_UNROLL
        for (int t = 0; t < T; ++t) {
          const uint8_t* xq = rec[h] + 32 * t;
          __m512i a0 = kMin ? _mm512_setzero_si512() : _mm512_set1_epi32(bx[t]);
          __m512i a1 = _mm512_setzero_si512();
          TM_UNROLL
          for (int c = 0; c < 8; c += 2) {
            a0 = _mm512_dpbusd_epi32(a0, q[c], bcast32x16(xq + 4 * c));
            a1 = _mm512_dpbusd_epi32(a1, q[c + 1], bcast32x16(xq + 4 * c + 4));
          }
          add_legacy_block<kMin>(acc[h * T + t], _mm512_add_epi32(a0, a1), dx[t], bx[t], dw, mw);
        }
        rec[h] += T * kQ8RecordBytes;
      }
    }
    const __mmask16 mask = group_mask(g, rows);
    TM_UNROLL
    for (int t = 0; t < NT * T; ++t) _mm512_mask_storeu_ps(y + t * ldy + g * kRows, mask, acc[t]);
  }
}

template <int Kind, int T>
void gemm(const uint8_t* w, int64_t nb, int64_t g0, int64_t g1, const uint8_t* act, float* y, int64_t ldy,
          int64_t rows) {
  gemm_tiles<Kind, T, 1>(w, nb, g0, g1, &act, y, ldy, rows);
}

template <int Kind>
void gemm2(const uint8_t* w, int64_t nb, int64_t g0, int64_t g1, const uint8_t* act0, const uint8_t* act1,
           float* y, int64_t ldy, int64_t rows) {
  const uint8_t* act[2] = {act0, act1};
  gemm_tiles<Kind, kTile, 2>(w, nb, g0, g1, act, y, ldy, rows);
}

template <int Kind>
void entry(const uint8_t* w, int64_t nb, int64_t g0, int64_t g1, const uint8_t* act, int T, float* y, int64_t ldy,
           int64_t rows) {
  with_count<kTile>(T, [&](auto k) { gemm<Kind, decltype(k)::value>(w, nb, g0, g1, act, y, ldy, rows); });
}

}  // namespace

void add_qgemm_legacy_avx512(KernelTable& t) {
  for_each_kind<kPackQ8_0, kPackQ4_0, kPackQ4_1, kPackQ5_0, kPackQ5_1>([&](auto k) {
    t.qgemm[k.value] = entry<decltype(k)::value>;
    t.qgemm2[k.value] = gemm2<decltype(k)::value>;
  });
}

}  // namespace tmill::kern
