// AVX2 kernels for the 32-element block types on the interleaved x16 layouts (kernels/kernel_abi.h).
// A 64-byte chunk vector of the layout is two ymm halves: rows 0..7 and rows 8..15 of the group.
// Without VNNI the u8 x s8 products go through vpmaddubsw (int16 pairs, saturating) + vpmaddwd:
//   Q4_x levels <= 15: eight chunks' pair sums fit int16 (8 * 2 * 15 * 127 < 32767): one vpmaddwd;
//   Q5_x levels <= 31: four chunks fit (4 * 2 * 31 * 127 < 32767): two vpmaddwd;
//   Q8_0: signed weights via the sign trick |w| * sign(x, w) (2 * 128 * 127 < 32767), one vpmaddwd
//         per chunk.
// Zero points come in through the activation `bias` as in the AVX-512 kernels.
#include "kernels/isa_avx2.h"
#include "kernels/kernel_table.h"

namespace tmill::kern {
namespace {

// Levels of chunks 0..7 for half `hf` (rows 8hf..8hf+7). Q8_0 returns the signed weights.
template <int Kind>
inline void unpack(const uint8_t* gb, int hf, __m256i q[8]) {
  constexpr LegacyLayout L = kLegacyLayout[Kind];
  const uint8_t* p = gb + L.q + 32 * hf;
  if constexpr (Kind == kPackQ8_0) {
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
    TM_UNROLL
    for (int c = 0; c < 8; ++c) q[c] = _mm256_xor_si256(load_si256(p + 64 * c), flip);
  } else {
    unpack_nibbles(p, q);
    if constexpr (L.h != 0) add_fifth_bits(load_si256(gb + L.h + 32 * hf), q);
  }
}

// int32 dot products of the 8 rows with one token's 32 activations.
template <int Kind>
inline __m256i dot8(const __m256i q[8], const uint8_t* xq) {
  const __m256i ones = _mm256_set1_epi16(1);
  if constexpr (Kind == kPackQ8_0) {
    __m256i s = _mm256_setzero_si256();
    TM_UNROLL
    for (int c = 0; c < 8; ++c) {
      const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(q[c]), _mm256_sign_epi8(bcast32x8(xq + 4 * c), q[c]));
      s = _mm256_add_epi32(s, _mm256_madd_epi16(p, ones));
    }
    return s;
  } else if constexpr (Kind == kPackQ4_0 || Kind == kPackQ4_1) {
    __m256i p = _mm256_maddubs_epi16(q[0], bcast32x8(xq));
    TM_UNROLL
    for (int c = 1; c < 8; ++c) p = _mm256_add_epi16(p, _mm256_maddubs_epi16(q[c], bcast32x8(xq + 4 * c)));
    return _mm256_madd_epi16(p, ones);
  } else {
    __m256i p0 = _mm256_maddubs_epi16(q[0], bcast32x8(xq));
    __m256i p1 = _mm256_maddubs_epi16(q[4], bcast32x8(xq + 16));
    TM_UNROLL
    for (int c = 1; c < 4; ++c) {
      p0 = _mm256_add_epi16(p0, _mm256_maddubs_epi16(q[c], bcast32x8(xq + 4 * c)));
      p1 = _mm256_add_epi16(p1, _mm256_maddubs_epi16(q[c + 4], bcast32x8(xq + 16 + 4 * c)));
    }
    return _mm256_add_epi32(_mm256_madd_epi16(p0, ones), _mm256_madd_epi16(p1, ones));
  }
}

// Tokens t0..t0+U of a T-token tile, one half-group of rows.
template <int Kind, int U>
void half_gemm(const uint8_t* gb, int64_t nb, int hf, const uint8_t* act, int T, int t0, float* y, int64_t ldy,
               int64_t r, int nrows) {
  constexpr int64_t BB = kGroupBlockBytes[Kind];
  constexpr bool kMin = Kind == kPackQ4_1 || Kind == kPackQ5_1;
  __m256 acc[U];
  TM_UNROLL
  for (int u = 0; u < U; ++u) acc[u] = _mm256_setzero_ps();
  const uint8_t* rec = act;
  for (int64_t b = 0; b < nb; ++b, gb += BB, rec += T * kQ8RecordBytes) {
    if (hf == 0) {  // the first half-group pass streams the group from memory; the second finds it cached
      prefetch_weights<BB>(gb, kWeightPrefetchBytes);
    }
    __m256i q[8];
    unpack<Kind>(gb, hf, q);
    const __m256 dw = load_f16x8(gb + 16 * hf);
    __m256 mw = _mm256_setzero_ps();
    if constexpr (kMin) mw = load_f16x8(gb + kLegacyLayout[Kind].m + 16 * hf);
    TM_UNROLL
    for (int u = 0; u < U; ++u) {
      const int t = t0 + u;
      float dx;
      int32_t bias;
      std::memcpy(&dx, rec + T * 32 + 4 * t, 4);
      std::memcpy(&bias, rec + T * 36 + 4 * t, 4);
      __m256i s = dot8<Kind>(q, rec + 32 * t);
      // Q8_0 multiplies the signed weights directly: its bias (-128 * sum x) is not needed.
      if constexpr (!kMin && Kind != kPackQ8_0) s = _mm256_add_epi32(s, _mm256_set1_epi32(bias));
      const __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(s), _mm256_set1_ps(dx));
      acc[u] = _mm256_fmadd_ps(f, dw, acc[u]);
      if constexpr (kMin) acc[u] = _mm256_fmadd_ps(mw, _mm256_set1_ps(dx * static_cast<float>(bias)), acc[u]);
    }
  }
  TM_UNROLL
  for (int u = 0; u < U; ++u) store_rows8(y + (t0 + u) * ldy + r, acc[u], nrows);
}

template <int Kind>
void entry(const uint8_t* w, int64_t nb, int64_t g0, int64_t g1, const uint8_t* act, int T, float* y, int64_t ldy,
           int64_t rows) {
  const int64_t group_bytes = nb * kGroupBlockBytes[Kind];
  for_each_half_tile<4>(w, group_bytes, g0, g1, T, rows,
                        [&](auto u, const uint8_t* gb, int hf, int t0, int64_t r, int nrows) {
                          half_gemm<Kind, decltype(u)::value>(gb, nb, hf, act, T, t0, y, ldy, r, nrows);
                        });
}

}  // namespace

void add_qgemm_legacy_avx2(KernelTable& t) {
  for_each_kind<kPackQ8_0, kPackQ4_0, kPackQ4_1, kPackQ5_0, kPackQ5_1>(
      [&](auto k) { t.qgemm[k.value] = entry<decltype(k)::value>; });
}

}  // namespace tmill::kern
