// AVX-512 VNNI kernels for the 32-element block types (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) on the
// interleaved x16 layouts (kernels/kernel_abi.h).
//
// Per group-block (16 rows x 32 columns) the 8 chunk vectors are unpacked to unsigned bytes once
// and reused for all T tokens of the tile. For one token: 8 x vpdpbusd against the token's 4-byte
// activation chunks broadcast to all lanes gives the 16 row dot products in int32 lanes; the
// accumulator starts at the activation block's `bias` (-zero_point * sum(x)), so the zero point
// costs nothing. Then one int->float conversion and two multiplies by the activation and weight
// scales: y16 += float(dot) * dx * dw16.
// GCC 12 reports false "uninitialized" warnings from inside its AVX-512 intrinsics
// (the _mm512_undefined_* self-initialisation idiom) once they are inlined here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/kernel_abi.h"

// Full unrolling of the short fixed-count loops keeps tile accumulators in registers (GCC at -O2
// would otherwise keep the arrays in memory).
#define TM_UNROLL _Pragma("GCC unroll 16")

namespace tmill::kern {
namespace {

constexpr int kPrefetchBytes = 3072;  // software prefetch distance ahead in the weight stream

// Every cache line of a group-block, kPrefetchBytes ahead. With only the hardware prefetcher (plus
// two lines per block) the weight stream fell short of DRAM bandwidth: Q4_0 GEMV 4864x896 on 2
// threads took 155-173 us, 92-97 us with every line prefetched; 16-token GEMMs gained too.
template <int64_t BB>
inline void prefetch_block(const uint8_t* gb) {
  const char* pf = reinterpret_cast<const char*>(gb) + kPrefetchBytes;
  TM_UNROLL
  for (int64_t o = 0; o < BB; o += 64) _mm_prefetch(pf + o, _MM_HINT_T0);
}

inline __m512i bcast32(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// Offsets inside a group-block.
template <int Kind>
struct Layout;
template <>
struct Layout<kPackQ8_0> { [[maybe_unused]] static constexpr int q = 32, h = 0, m = 0; };
template <>
struct Layout<kPackQ4_0> { [[maybe_unused]] static constexpr int q = 32, h = 0, m = 0; };
template <>
struct Layout<kPackQ4_1> { [[maybe_unused]] static constexpr int q = 64, h = 0, m = 32; };
template <>
struct Layout<kPackQ5_0> { [[maybe_unused]] static constexpr int q = 96, h = 32, m = 0; };
template <>
struct Layout<kPackQ5_1> { [[maybe_unused]] static constexpr int q = 128, h = 64, m = 32; };

// Unsigned levels of chunks 0..7 (elements 4c..4c+3 of each row) for one group-block.
template <int Kind>
inline void unpack(const uint8_t* gb, __m512i q[8]) {
  const uint8_t* p = gb + Layout<Kind>::q;
  if constexpr (Kind == kPackQ8_0) {
    TM_UNROLL
    for (int c = 0; c < 8; ++c) q[c] = _mm512_loadu_si512(p + 64 * c);
  } else {
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    TM_UNROLL
    for (int c = 0; c < 4; ++c) {
      const __m512i v = _mm512_loadu_si512(p + 64 * c);
      q[c] = _mm512_and_si512(v, m4);
      q[c + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
    }
    if constexpr (Kind == kPackQ5_0 || Kind == kPackQ5_1) {
      // fifth bit of element 4c+i is bit c of byte i: move it to bit 4 (16-bit shifts cannot bleed
      // into bit 4 of either byte for these shift counts).
      const __m512i h = _mm512_loadu_si512(gb + Layout<Kind>::h);
      const __m512i b4 = _mm512_set1_epi8(0x10);
      q[0] = _mm512_or_si512(q[0], _mm512_and_si512(_mm512_slli_epi16(h, 4), b4));
      q[1] = _mm512_or_si512(q[1], _mm512_and_si512(_mm512_slli_epi16(h, 3), b4));
      q[2] = _mm512_or_si512(q[2], _mm512_and_si512(_mm512_slli_epi16(h, 2), b4));
      q[3] = _mm512_or_si512(q[3], _mm512_and_si512(_mm512_slli_epi16(h, 1), b4));
      q[4] = _mm512_or_si512(q[4], _mm512_and_si512(h, b4));
      q[5] = _mm512_or_si512(q[5], _mm512_and_si512(_mm512_srli_epi16(h, 1), b4));
      q[6] = _mm512_or_si512(q[6], _mm512_and_si512(_mm512_srli_epi16(h, 2), b4));
      q[7] = _mm512_or_si512(q[7], _mm512_and_si512(_mm512_srli_epi16(h, 3), b4));
    }
  }
}

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
      prefetch_block<BB>(gb);
      __m512i q[8];
      unpack<Kind>(gb, q);
      const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(gb)));
      __m512 mw = _mm512_setzero_ps();
      if constexpr (kMin) mw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(gb + 32)));
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
            a0 = _mm512_dpbusd_epi32(a0, q[c], bcast32(xq + 4 * c));
            a1 = _mm512_dpbusd_epi32(a1, q[c + 1], bcast32(xq + 4 * c + 4));
          }
          const __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(a0, a1)), _mm512_set1_ps(dx[t]));
          __m512& a = acc[h * T + t];
          a = _mm512_fmadd_ps(f, dw, a);
          if constexpr (kMin) a = _mm512_fmadd_ps(mw, _mm512_set1_ps(dx[t] * static_cast<float>(bx[t])), a);
        }
        rec[h] += T * kQ8RecordBytes;
      }
    }
    const int64_t left = rows - g * kRows;
    const __mmask16 mask = left >= kRows ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << left) - 1);
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
  switch (T) {
    case 1: return gemm<Kind, 1>(w, nb, g0, g1, act, y, ldy, rows);
    case 2: return gemm<Kind, 2>(w, nb, g0, g1, act, y, ldy, rows);
    case 3: return gemm<Kind, 3>(w, nb, g0, g1, act, y, ldy, rows);
    case 4: return gemm<Kind, 4>(w, nb, g0, g1, act, y, ldy, rows);
    case 5: return gemm<Kind, 5>(w, nb, g0, g1, act, y, ldy, rows);
    case 6: return gemm<Kind, 6>(w, nb, g0, g1, act, y, ldy, rows);
    case 7: return gemm<Kind, 7>(w, nb, g0, g1, act, y, ldy, rows);
    default: return gemm<Kind, 8>(w, nb, g0, g1, act, y, ldy, rows);
  }
}

}  // namespace

QGemmFn qgemm_legacy_avx512(int kind) {
  switch (kind) {
    case kPackQ8_0: return entry<kPackQ8_0>;
    case kPackQ4_0: return entry<kPackQ4_0>;
    case kPackQ4_1: return entry<kPackQ4_1>;
    case kPackQ5_0: return entry<kPackQ5_0>;
    case kPackQ5_1: return entry<kPackQ5_1>;
    default: return nullptr;
  }
}

QGemm2Fn qgemm2_legacy_avx512(int kind) {
  switch (kind) {
    case kPackQ8_0: return gemm2<kPackQ8_0>;
    case kPackQ4_0: return gemm2<kPackQ4_0>;
    case kPackQ4_1: return gemm2<kPackQ4_1>;
    case kPackQ5_0: return gemm2<kPackQ5_0>;
    case kPackQ5_1: return gemm2<kPackQ5_1>;
    default: return nullptr;
  }
}

}  // namespace tmill::kern
