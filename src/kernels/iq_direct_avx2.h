// The lattice i-quants' super-block decoder shared by the AVX2 and AVX-512 i-quant kernels
// (iq_gemm_avx2.cpp, iq_gemm_avx512.cpp): the integer form of quant/iq_decode.h straight into
// registers. Include after isa_avx2.h / isa_avx512.h, only from those files (same ODR rule:
// everything static).
#pragma once

#include "core/fp16.h"
#include "kernels/isa_avx2.h"
#include "kernels/kernel_table.h"  // g_iq_fast_pdep
#include "quant/iq_decode.h"

namespace tmill::kern {
namespace {

// The 4 sign (or delta) bytes of a sub-block (byte l for elements 8l..8l+7), each spread over its 8
// elements: 0xff where bit (element % 8) of the element's byte is set (bit 0 of every byte: bit0_only).
TM_ISA_INLINE __m256i spread_bits(uint32_t v, bool bit0_only) {
  const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3,
                                        3, 3, 3, 3, 3);
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(v)), shuf);
  const __m256i bits = bit0_only ? _mm256_set1_epi8(1)
                                 : _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  return _mm256_cmpeq_epi8(_mm256_and_si256(bytes, bits), bits);  // 0xff where set
}

// kIqSigns expanded: entry i holds the 8 multipliers of a 7-bit sign field i as bytes, -1 (0xff)
// where bit j of kIqSigns[i] is set, else +1 -- one 64-bit load per 8 elements instead of a byte
// look-up, shifts and a spread (the 7-bit-field types: IQ2_XXS, IQ2_XS, IQ3_XXS).
constexpr uint64_t sign_word(uint8_t bits) {
  uint64_t w = 0;
  for (int j = 0; j < 8; ++j) w |= static_cast<uint64_t>((bits >> j) & 1 ? 0xff : 0x01) << (8 * j);
  return w;
}
struct IqSignWords {
  uint64_t v[128];
  constexpr IqSignWords() : v() {
    for (int i = 0; i < 128; ++i) v[i] = sign_word(kIqSigns[i]);
  }
};
constexpr IqSignWords kIqSignWords{};

// The +-1 bytes of a sub-block's four 7-bit sign fields (bits 0..27 of f).
TM_ISA_INLINE __m256i sign_fields(uint32_t f) {
  return _mm256_set_epi64x(static_cast<int64_t>(kIqSignWords.v[(f >> 21) & 127]),
                           static_cast<int64_t>(kIqSignWords.v[(f >> 14) & 127]),
                           static_cast<int64_t>(kIqSignWords.v[(f >> 7) & 127]),
                           static_cast<int64_t>(kIqSignWords.v[f & 127]));
}

// One super-block straight from the file layout into registers (grid entries gathered by
// _mm256_set_epi64x / _epi32): per sub-block ib |w| (aw), the sign source (sw: +-1, or IQ1's signed
// w = 8 * level + delta itself) and the two 16-element multipliers (sc) -- the integer form of
// quant/iq_decode.h; `mult` (16 ints, optional) gets the two multipliers of each sub-block. Returns
// the fp16 bits of d.
template <int K>
TM_ISA_INLINE uint16_t build_direct(const uint8_t* blk, __m256i aw[8], __m256i sw[8], __m256i sc[8],
                                    int* mult = nullptr) {
  const __m256i one = _mm256_set1_epi8(1);
  uint16_t d;
  std::memcpy(&d, blk, 2);
  if constexpr (K == kIqIQ1_S || K == kIqIQ1_M) {
    // IQ1_S: d | qs[32] at 2 | qh u16[8] at 34.  IQ1_M: qs[32] | qh[16] at 32 | scales u16[4] at 48.
    uint16_t sc16[4];
    if constexpr (K == kIqIQ1_M) {
      std::memcpy(sc16, blk + 48, 8);
      d = static_cast<uint16_t>((sc16[0] >> 12) | ((sc16[1] >> 8) & 0x00f0) | ((sc16[2] >> 4) & 0x0f00) | (sc16[3] & 0xf000));
    }
    TM_UNROLL
    for (int ib = 0; ib < 8; ++ib) {
      int idx[4];
      uint32_t delta;  // bit 0 of byte l: group l's delta is negative
      int s0, s1;
      if constexpr (K == kIqIQ1_S) {
        const uint8_t* q = blk + 2 + 4 * ib;
        uint16_t h;
        std::memcpy(&h, blk + 34 + 2 * ib, 2);
        for (int l = 0; l < 4; ++l) idx[l] = q[l] | (((h >> (3 * l)) & 7) << 8);
        delta = (h >> 15) * 0x01010101u;
        s0 = s1 = 2 * ((h >> 12) & 7) + 1;
      } else {
        const uint8_t* q = blk + 4 * ib;
        const int h0 = blk[32 + 2 * ib], h1 = blk[33 + 2 * ib];
        idx[0] = q[0] | ((h0 & 7) << 8);
        idx[1] = q[1] | (((h0 >> 4) & 7) << 8);
        idx[2] = q[2] | ((h1 & 7) << 8);
        idx[3] = q[3] | (((h1 >> 4) & 7) << 8);
        delta = ((h0 >> 3) & 1) | (((h0 >> 7) & 1) << 8) | (((h1 >> 3) & 1) << 16) | (static_cast<uint32_t>((h1 >> 7) & 1) << 24);
        const int sw16 = sc16[ib / 2] >> (6 * (ib % 2));
        s0 = 2 * (sw16 & 7) + 1;
        s1 = 2 * ((sw16 >> 3) & 7) + 1;
      }
      const __m256i lvl = _mm256_set_epi64x(static_cast<int64_t>(kIq1sGrid[idx[3]]), static_cast<int64_t>(kIq1sGrid[idx[2]]),
                                            static_cast<int64_t>(kIq1sGrid[idx[1]]), static_cast<int64_t>(kIq1sGrid[idx[0]]));
      const __m256i l2 = _mm256_add_epi8(lvl, lvl), l4 = _mm256_add_epi8(l2, l2), l8 = _mm256_add_epi8(l4, l4);
      const __m256i w = _mm256_add_epi8(l8, _mm256_or_si256(spread_bits(delta, true), one));  // 8 * level +- 1
      aw[ib] = _mm256_abs_epi8(w);
      sw[ib] = w;
      sc[ib] = _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(s1)), _mm_set1_epi16(static_cast<int16_t>(s0)));
      if (mult) {
        mult[2 * ib] = s0;
        mult[2 * ib + 1] = s1;
      }
    }
    return d;
  }
  TM_UNROLL
  for (int ib = 0; ib < 8; ++ib) {
    int s0, s1;  // the sub-block's two 16-element multipliers (sw: its +-1 signs)
    if constexpr (K == kIqIQ2_XXS) {
      const uint32_t a = iq_le32(blk + 2 + 8 * ib), s = iq_le32(blk + 6 + 8 * ib);
      aw[ib] = _mm256_set_epi64x(static_cast<int64_t>(kIq2xxsGrid[a >> 24]), static_cast<int64_t>(kIq2xxsGrid[(a >> 16) & 255]),
                                 static_cast<int64_t>(kIq2xxsGrid[(a >> 8) & 255]), static_cast<int64_t>(kIq2xxsGrid[a & 255]));
      sw[ib] = sign_fields(s);
      s0 = s1 = static_cast<int>(2 * (s >> 28) + 1);
    } else if constexpr (K == kIqIQ2_XS) {
      uint16_t v[4];
      std::memcpy(v, blk + 2 + 8 * ib, 8);
      aw[ib] = _mm256_set_epi64x(static_cast<int64_t>(kIq2xsGrid[v[3] & 511]), static_cast<int64_t>(kIq2xsGrid[v[2] & 511]),
                                 static_cast<int64_t>(kIq2xsGrid[v[1] & 511]), static_cast<int64_t>(kIq2xsGrid[v[0] & 511]));
      sw[ib] = _mm256_set_epi64x(static_cast<int64_t>(kIqSignWords.v[v[3] >> 9]), static_cast<int64_t>(kIqSignWords.v[v[2] >> 9]),
                                 static_cast<int64_t>(kIqSignWords.v[v[1] >> 9]), static_cast<int64_t>(kIqSignWords.v[v[0] >> 9]));
      const int sb = blk[66 + ib];
      s0 = 2 * (sb & 15) + 1;
      s1 = 2 * (sb >> 4) + 1;
    } else if constexpr (K == kIqIQ2_S) {  // qs[32] at 2, signs[32] at 34, qh[8] at 66, scales[8] at 74
      const uint8_t* q = blk + 2 + 4 * ib;
      const int h = blk[66 + ib];
      if (g_iq_fast_pdep) {  // the four 10-bit indices in 16-bit fields
        const uint64_t idx = _pdep_u64(iq_le32(q), 0x00ff00ff00ff00ffull) |
                             _pdep_u64(static_cast<uint64_t>(h), 0x0300030003000300ull);
        auto g = [&](int l) { return static_cast<int64_t>(kIq2sGrid[(idx >> (16 * l)) & 0xffff]); };
        aw[ib] = _mm256_set_epi64x(g(3), g(2), g(1), g(0));
      } else {
        auto g = [&](int l) { return static_cast<int64_t>(kIq2sGrid[q[l] | (((h >> (2 * l)) & 3) << 8)]); };
        aw[ib] = _mm256_set_epi64x(g(3), g(2), g(1), g(0));
      }
      sw[ib] = _mm256_or_si256(spread_bits(iq_le32(blk + 34 + 4 * ib), false), one);  // -1 or +1
      const int sb = blk[74 + ib];
      s0 = 2 * (sb & 15) + 1;
      s1 = 2 * (sb >> 4) + 1;
    } else if constexpr (K == kIqIQ3_XXS) {
      const uint8_t* q = blk + 2 + 8 * ib;
      const uint32_t a = iq_le32(blk + 2 + 64 + 4 * ib);
      aw[ib] = _mm256_set_epi32(static_cast<int>(kIq3xxsGrid[q[7]]), static_cast<int>(kIq3xxsGrid[q[6]]),
                                static_cast<int>(kIq3xxsGrid[q[5]]), static_cast<int>(kIq3xxsGrid[q[4]]),
                                static_cast<int>(kIq3xxsGrid[q[3]]), static_cast<int>(kIq3xxsGrid[q[2]]),
                                static_cast<int>(kIq3xxsGrid[q[1]]), static_cast<int>(kIq3xxsGrid[q[0]]));
      sw[ib] = sign_fields(a);
      s0 = s1 = static_cast<int>(2 * (a >> 28) + 1);
    } else {  // kIqIQ3_S: qs[64] at 2, qh[8] at 66, signs[32] at 74, scales[4] at 106
      const uint8_t* q = blk + 2 + 8 * ib;
      const int h = blk[66 + ib];
      if (g_iq_fast_pdep) {  // the 9-bit indices, four per 64-bit word of 16-bit fields
        const uint64_t lo = _pdep_u64(iq_le32(q), 0x00ff00ff00ff00ffull) |
                            _pdep_u64(static_cast<uint64_t>(h & 15), 0x0100010001000100ull);
        const uint64_t hi = _pdep_u64(iq_le32(q + 4), 0x00ff00ff00ff00ffull) |
                            _pdep_u64(static_cast<uint64_t>(h >> 4), 0x0100010001000100ull);
        auto g = [&](int k) { return static_cast<int>(kIq3sGrid[((k < 4 ? lo : hi) >> (16 * (k & 3))) & 0xffff]); };
        aw[ib] = _mm256_set_epi32(g(7), g(6), g(5), g(4), g(3), g(2), g(1), g(0));
      } else {
        auto g = [&](int k) { return static_cast<int>(kIq3sGrid[q[k] | (((h >> k) & 1) << 8)]); };
        aw[ib] = _mm256_set_epi32(g(7), g(6), g(5), g(4), g(3), g(2), g(1), g(0));
      }
      sw[ib] = _mm256_or_si256(spread_bits(iq_le32(blk + 74 + 4 * ib), false), one);
      s0 = s1 = 2 * ((blk[106 + ib / 2] >> (4 * (ib % 2))) & 15) + 1;
    }
    sc[ib] = _mm256_set_m128i(_mm_set1_epi16(static_cast<int16_t>(s1)), _mm_set1_epi16(static_cast<int16_t>(s0)));
    if (mult) {
      mult[2 * ib] = s0;
      mult[2 * ib + 1] = s1;
    }
  }
  return d;
}

}  // namespace
}  // namespace tmill::kern
