// AVX2 kernels for the 32-element block types on the interleaved x16 layouts (kernels/kernel_abi.h).
// A 64-byte chunk vector of the layout is two ymm halves: rows 0..7 and rows 8..15 of the group.
// Without VNNI the u8 x s8 products go through vpmaddubsw (int16 pairs, saturating) + vpmaddwd:
//   Q4_x levels <= 15: eight chunks' pair sums fit int16 (8 * 2 * 15 * 127 < 32767): one vpmaddwd;
//   Q5_x levels <= 31: four chunks fit (4 * 2 * 31 * 127 < 32767): two vpmaddwd;
//   Q8_0: signed weights via the sign trick |w| * sign(x, w) (2 * 128 * 127 < 32767), one vpmaddwd
//         per chunk.
// Zero points come in through the activation `bias` as in the AVX-512 kernels.
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

template <int Kind>
struct Layout;
template <>
struct Layout<kPackQ8_0> { [[maybe_unused]] static constexpr int q = 32, h = 0; };
template <>
struct Layout<kPackQ4_0> { [[maybe_unused]] static constexpr int q = 32, h = 0; };
template <>
struct Layout<kPackQ4_1> { [[maybe_unused]] static constexpr int q = 64, h = 0; };
template <>
struct Layout<kPackQ5_0> { [[maybe_unused]] static constexpr int q = 96, h = 32; };
template <>
struct Layout<kPackQ5_1> { [[maybe_unused]] static constexpr int q = 128, h = 64; };

// Levels of chunks 0..7 for half `hf` (rows 8hf..8hf+7). Q8_0 returns the signed weights.
template <int Kind>
inline void unpack(const uint8_t* gb, int hf, __m256i q[8]) {
  const uint8_t* p = gb + Layout<Kind>::q + 32 * hf;
  if constexpr (Kind == kPackQ8_0) {
    const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
    TM_UNROLL
    for (int c = 0; c < 8; ++c)
      q[c] = _mm256_xor_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 64 * c)), flip);
  } else {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    TM_UNROLL
    for (int c = 0; c < 4; ++c) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 64 * c));
      q[c] = _mm256_and_si256(v, m4);
      q[c + 4] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    }
    if constexpr (Kind == kPackQ5_0 || Kind == kPackQ5_1) {
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(gb + Layout<Kind>::h + 32 * hf));
      const __m256i b4 = _mm256_set1_epi8(0x10);
      q[0] = _mm256_or_si256(q[0], _mm256_and_si256(_mm256_slli_epi16(h, 4), b4));
      q[1] = _mm256_or_si256(q[1], _mm256_and_si256(_mm256_slli_epi16(h, 3), b4));
      q[2] = _mm256_or_si256(q[2], _mm256_and_si256(_mm256_slli_epi16(h, 2), b4));
      q[3] = _mm256_or_si256(q[3], _mm256_and_si256(_mm256_slli_epi16(h, 1), b4));
      q[4] = _mm256_or_si256(q[4], _mm256_and_si256(h, b4));
      q[5] = _mm256_or_si256(q[5], _mm256_and_si256(_mm256_srli_epi16(h, 1), b4));
      q[6] = _mm256_or_si256(q[6], _mm256_and_si256(_mm256_srli_epi16(h, 2), b4));
      q[7] = _mm256_or_si256(q[7], _mm256_and_si256(_mm256_srli_epi16(h, 3), b4));
    }
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
      const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(q[c]), _mm256_sign_epi8(bcast32(xq + 4 * c), q[c]));
      s = _mm256_add_epi32(s, _mm256_madd_epi16(p, ones));
    }
    return s;
  } else if constexpr (Kind == kPackQ4_0 || Kind == kPackQ4_1) {
    __m256i p = _mm256_maddubs_epi16(q[0], bcast32(xq));
    TM_UNROLL
    for (int c = 1; c < 8; ++c) p = _mm256_add_epi16(p, _mm256_maddubs_epi16(q[c], bcast32(xq + 4 * c)));
    return _mm256_madd_epi16(p, ones);
  } else {
    __m256i p0 = _mm256_maddubs_epi16(q[0], bcast32(xq));
    __m256i p1 = _mm256_maddubs_epi16(q[4], bcast32(xq + 16));
    TM_UNROLL
    for (int c = 1; c < 4; ++c) {
      p0 = _mm256_add_epi16(p0, _mm256_maddubs_epi16(q[c], bcast32(xq + 4 * c)));
      p1 = _mm256_add_epi16(p1, _mm256_maddubs_epi16(q[c + 4], bcast32(xq + 16 + 4 * c)));
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
      TM_UNROLL
      for (int64_t o = 0; o < BB; o += 64) _mm_prefetch(reinterpret_cast<const char*>(gb + 3072 + o), _MM_HINT_T0);
    }
    __m256i q[8];
    unpack<Kind>(gb, hf, q);
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gb + 16 * hf)));
    __m256 mw = _mm256_setzero_ps();
    if constexpr (kMin) mw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(gb + 32 + 16 * hf)));
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
      for (; t + 4 <= T; t += 4) half_gemm<Kind, 4>(gb, nb, hf, act, T, t, y, ldy, r, nrows);
      switch (T - t) {
        case 3: half_gemm<Kind, 3>(gb, nb, hf, act, T, t, y, ldy, r, nrows); break;
        case 2: half_gemm<Kind, 2>(gb, nb, hf, act, T, t, y, ldy, r, nrows); break;
        case 1: half_gemm<Kind, 1>(gb, nb, hf, act, T, t, y, ldy, r, nrows); break;
        default: break;
      }
    }
  }
}

}  // namespace

QGemmFn qgemm_legacy_avx2(int kind) {
  switch (kind) {
    case kPackQ8_0: return entry<kPackQ8_0>;
    case kPackQ4_0: return entry<kPackQ4_0>;
    case kPackQ4_1: return entry<kPackQ4_1>;
    case kPackQ5_0: return entry<kPackQ5_0>;
    case kPackQ5_1: return entry<kPackQ5_1>;
    default: return nullptr;
  }
}

}  // namespace tmill::kern
