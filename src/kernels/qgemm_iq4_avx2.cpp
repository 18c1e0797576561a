// AVX2 kernels for the non-linear 4-bit types IQ4_NL, IQ4_XS and MXFP4 on their x16 layouts
// (kernels/kernel_abi.h); a group's 64-byte chunk vectors are processed as two 8-row ymm halves.
// The 4-bit indices are unpacked as for Q4_0 and looked up with one vpshufb per chunk vector in the
// table of signed levels (-127..113). Without VNNI the products go through the sign trick of the
// Q8_0 kernel, vpmaddubsw(|w|, sign(x, w)) (pairs <= 2 * 127 * 127 < 32767), so no zero point:
//   IQ4_NL: vpmaddwd by ones per chunk, y += float(dot) * dx * dw (the record's bias is not used);
//   MXFP4:  the same loop with the doubled E2M1 values as the table and f32 half scales as dw;
//   IQ4_XS: vpmaddwd by the row's (sc_j, sc_j) int16 pairs applies the sub-block scale in the same
//           instruction; y += float(isum) * dw * dx per super-block.
#include "kernels/isa_avx2.h"
#include "kernels/kernel_table.h"
#include "quant/blocks.h"

namespace tmill::kern {
namespace {

inline __m256i level_table(const int8_t* values = kIq4nlValues) {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(values));
  return _mm256_broadcastsi128_si256(t);
}

// Nibble chunks of this half's 32-column block -> 8 vectors of |w| and the signed levels w.
TM_ISA_INLINE void unpack_levels(const uint8_t* n, __m256i table, __m256i w[8], __m256i aw[8]) {
  unpack_nibbles(n, w);
  TM_UNROLL
  for (int c = 0; c < 8; ++c) {
    w[c] = _mm256_shuffle_epi8(table, w[c]);
    aw[c] = _mm256_abs_epi8(w[c]);
  }
}

// int32 dot products of the 8 rows' 32 signed levels with one token's 32 activations, each int16
// pair sum multiplied by `pairs` (ones, or the rows' scale pairs).
inline __m256i dot8(const __m256i w[8], const __m256i aw[8], const uint8_t* xq, __m256i pairs) {
  __m256i s = _mm256_setzero_si256();
  TM_UNROLL
  for (int c = 0; c < 8; ++c) {
    const __m256i p = _mm256_maddubs_epi16(aw[c], _mm256_sign_epi8(bcast32x8(xq + 4 * c), w[c]));
    s = _mm256_add_epi32(s, _mm256_madd_epi16(p, pairs));
  }
  return s;
}

// IQ4_NL (f16 scales, then the nibbles at +32) or MXFP4 (E8M0 scale bytes, nibbles at +16).
template <int Kind, int U>
void nl_half(const uint8_t* gb, int64_t nb, int hf, const uint8_t* act, int T, int t0, float* y, int64_t ldy,
             int64_t r, int nrows) {
  constexpr bool kMx = Kind == kPackMXFP4;
  constexpr int64_t BB = kGroupBlockBytes[Kind];
  const __m256i table = level_table(kMx ? kMxfp4Values : kIq4nlValues), ones = _mm256_set1_epi16(1);
  __m256 acc[U];
  TM_UNROLL
  for (int u = 0; u < U; ++u) acc[u] = _mm256_setzero_ps();
  const uint8_t* rec = act;
  for (int64_t b = 0; b < nb; ++b, gb += BB, rec += T * kQ8RecordBytes) {
    if (hf == 0) {  // the first half-group pass streams the group from memory; the second finds it cached
      prefetch_weights<BB>(gb, kWeightPrefetchBytes);
    }
    __m256i w[8], aw[8];
    unpack_levels(gb + (kMx ? 16 : 32) + 32 * hf, table, w, aw);
    const __m256 dw = kMx ? e8m0_half_x8(gb + 8 * hf) : load_f16x8(gb + 16 * hf);
    TM_UNROLL
    for (int u = 0; u < U; ++u) {
      float dx;
      std::memcpy(&dx, rec + T * 32 + 4 * (t0 + u), 4);
      const __m256i s = dot8(w, aw, rec + 32 * (t0 + u), ones);
      acc[u] = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dx)), dw, acc[u]);
    }
  }
  TM_UNROLL
  for (int u = 0; u < U; ++u) store_rows8(y + (t0 + u) * ldy + r, acc[u], nrows);
}

template <int U>
void xs_half(const uint8_t* gb, int64_t nb, int hf, const uint8_t* act, int T, int t0, float* y, int64_t ldy,
             int64_t r, int nrows) {
  constexpr int64_t BB = kGroupBlockBytes[kPackIQ4_XS];
  const __m256i table = level_table();
  __m256 acc[U];
  TM_UNROLL
  for (int u = 0; u < U; ++u) acc[u] = _mm256_setzero_ps();
  const uint8_t* rec = act;
  for (int64_t b = 0; b < nb; ++b, gb += BB, rec += T * kQ8KRecordBytes) {
    __m256i isum[U];
    TM_UNROLL
    for (int u = 0; u < U; ++u) isum[u] = _mm256_setzero_si256();
    for (int j = 0; j < 8; ++j) {
      __m256i w[8], aw[8];
      unpack_levels(gb + 160 + 256 * j + 32 * hf, table, w, aw);
      // (sc, sc) int16 pairs of the 8 rows' signed scales.
      const __m128i s16 = _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(gb + 32 + 16 * j + 8 * hf)));
      const __m256i sc = _mm256_set_m128i(_mm_unpackhi_epi16(s16, s16), _mm_unpacklo_epi16(s16, s16));
      TM_UNROLL
      for (int u = 0; u < U; ++u) isum[u] = _mm256_add_epi32(isum[u], dot8(w, aw, rec + 256 * (t0 + u) + 32 * j, sc));
    }
    const __m256 dw = load_f16x8(gb + 16 * hf);
    TM_UNROLL
    for (int u = 0; u < U; ++u) {
      float dx;
      std::memcpy(&dx, rec + T * 256 + 4 * (t0 + u), 4);
      acc[u] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[u]), _mm256_mul_ps(dw, _mm256_set1_ps(dx)), acc[u]);
    }
  }
  TM_UNROLL
  for (int u = 0; u < U; ++u) store_rows8(y + (t0 + u) * ldy + r, acc[u], nrows);
}

template <int Kind>
void nl_entry(const uint8_t* w, int64_t nb, int64_t g0, int64_t g1, const uint8_t* act, int T, float* y, int64_t ldy,
              int64_t rows) {
  for_each_half_tile<4>(w, nb * kGroupBlockBytes[Kind], g0, g1, T, rows,
                        [&](auto u, const uint8_t* gb, int hf, int t0, int64_t r, int nrows) {
                          nl_half<Kind, decltype(u)::value>(gb, nb, hf, act, T, t0, y, ldy, r, nrows);
                        });
}

void xs_entry(const uint8_t* w, int64_t nb, int64_t g0, int64_t g1, const uint8_t* act, int T, float* y, int64_t ldy,
              int64_t rows) {
  for_each_half_tile<2>(w, nb * kGroupBlockBytes[kPackIQ4_XS], g0, g1, T, rows,
                        [&](auto u, const uint8_t* gb, int hf, int t0, int64_t r, int nrows) {
                          xs_half<decltype(u)::value>(gb, nb, hf, act, T, t0, y, ldy, r, nrows);
                        });
}

}  // namespace

void add_qgemm_iq4_avx2(KernelTable& t) {
  t.qgemm[kPackIQ4_NL] = nl_entry<kPackIQ4_NL>;
  t.qgemm[kPackIQ4_XS] = xs_entry;
  t.qgemm[kPackMXFP4] = nl_entry<kPackMXFP4>;
}

}  // namespace tmill::kern
