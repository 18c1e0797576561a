// GGUF / ggml tensor block layouts, byte for byte. Plain data only (plus `static inline` helpers),
// so SIMD kernels in *_avx2.cpp / *_avx512.cpp may include this header.
//
// Every block is little-endian; `uint16_t` halves are IEEE fp16 bit patterns (core/fp16.h).
// Element order inside a block (i = element index within the block):
//
//   Q4_0  (32 el, 18 B)  d:f16 | qs[16]            x[i] = d * (q - 8)
//         q(i) = qs[i] & 15 for i < 16, qs[i-16] >> 4 for i >= 16   (low nibbles = 0..15)
//   Q4_1  (32 el, 20 B)  d:f16 m:f16 | qs[16]      x[i] = d * q + m        (same nibble order)
//   Q5_0  (32 el, 22 B)  d:f16 | qh[4] | qs[16]    x[i] = d * (q - 16), q = nibble | bit i of qh (u32 LE) << 4
//   Q5_1  (32 el, 24 B)  d:f16 m:f16 | qh[4] | qs[16]  x[i] = d * q + m
//   Q8_0  (32 el, 34 B)  d:f16 | qs[32] int8       x[i] = d * qs[i]
//   Q8_1  (32 el, 36 B)  d:f16 s:f16 | qs[32]      x[i] = d * qs[i];  s = d * sum(qs)
//
// K-quants work on super-blocks of QK_K = 256 elements:
//   Q2_K (84 B)  scales[16] | qs[64] | d:f16 dmin:f16
//        16 sub-blocks of 16; scales[j] = scale4 | min4 << 4; x = d*scale*q - dmin*min, q in 0..3.
//        Element e: half h = e / 128, shift = 2 * ((e % 128) / 32), byte qs[32*h + e % 32].
//   Q3_K (110 B) hmask[32] | qs[64] | scales[12] | d:f16
//        16 sub-blocks of 16 with 6-bit signed scales (stored +32); q = low2 | (hmask bit ? 4 : 0) - 4.
//        Low 2 bits as in Q2_K; high bit of element e: hmask[e % 32] bit (e / 32).
//        6-bit scale j: low 4 bits = scales[j % 8] >> (4 * (j / 8)), high 2 bits = scales[8 + j % 4] >> (2 * (j / 4)).
//   Q4_K (144 B) d:f16 dmin:f16 | scales[12] | qs[128]
//        8 sub-blocks of 32, 6-bit scale and min each (packed, see get_scale_min_k4);
//        x = d*sc*q - dmin*m, q in 0..15. Element e: pair p = e / 64, byte qs[32*p + e % 32],
//        low nibble for (e % 64) < 32, high nibble otherwise.
//   Q5_K (176 B) d:f16 dmin:f16 | scales[12] | qh[32] | qs[128]
//        as Q4_K plus a fifth bit: qh[e % 32] bit (e / 32).
//   Q6_K (210 B) ql[128] | qh[64] | scales[16] int8 | d:f16
//        16 sub-blocks of 16, x = d * scales[e/16] * (q - 32), q in 0..63.
//        Element e: half h = e / 128, r = e % 128, l = r % 32, quarter k = r / 32:
//        low 4 bits  = ql[64*h + l + 32*(k & 1)] >> (4 * (k >> 1)),
//        high 2 bits = qh[32*h + l] >> (2 * k).
//   Q8_K (292 B) d:f32 | qs[256] int8 | bsums[16] int16   x = d * qs; bsums[j] = sum of qs[16j..16j+15]
//        (Q8_K is only an activation format for K-quant dot products; it never appears in files.)
//
// Non-linear 4-bit types: a 4-bit index q selects kIq4nlValues[q] (int8, -127..113).
//   IQ4_NL (32 el, 18 B)  d:f16 | qs[16]          x[i] = d * values[q(i)]   (Q4_0's nibble order)
//   IQ4_XS (256 el, 136 B) d:f16 | scales_h:u16 | scales_l[4] | qs[128]
//        8 sub-blocks of 32 with 6-bit scales ls_j (stored +32): low 4 bits = scales_l[j/2] >> 4*(j%2),
//        high 2 bits = scales_h >> 2j. x = d * (ls_j - 32) * values[q]; sub-block j's 32 elements
//        are qs[16j..16j+15] in Q4_0's nibble order (low nibbles first).
//
// MXFP4 (OCP microscaling FP4, 32 el, 17 B): e:u8 (E8M0 exponent) | qs[16] E2M1 codes in Q4_0's nibble
//   order. x[i] = kMxfp4Values[q(i)] * mxfp4_half_scale(e): the table holds the E2M1 values doubled
//   (integers -12..12), the scale is half of 2^(e - 127), so the product is exact.
//
// i-quants (256-element super-blocks of eight 32-element sub-blocks ib; lattice grids and sign tables
// in quant/iq_grids.h). A grid entry holds 8 (or 4) magnitudes, element 0 in its lowest byte; a sign
// byte negates element j where bit j is set (7-bit sign fields index kIqSigns, which adds the parity bit).
//   IQ2_XXS (66 B)  d:f16 | qs:u16[32]. Sub-block ib: u32 a = qs[4ib..4ib+1], u32 b = qs[4ib+2..+3];
//        8-group l (0..3): grid kIq2xxsGrid[byte l of a], signs kIqSigns[(b >> 7l) & 127];
//        x = d * (0.5 + (b >> 28)) * 0.25 * grid * sign.
//   IQ2_XS  (74 B)  d:f16 | qs:u16[32] | scales[8]. 8-group l of ib: v = qs[4ib+l], grid
//        kIq2xsGrid[v & 511], signs kIqSigns[v >> 9]; x = d * (0.5 + s) * 0.25 * grid * sign with
//        s = scales[ib] & 15 for l < 2, scales[ib] >> 4 otherwise.
//   IQ2_S   (82 B)  d:f16 | qs[32] grid index low bytes | signs[32] | qh[8] | scales[8]. 8-group l of
//        ib: grid kIq2sGrid[qs[4ib+l] | ((qh[ib] >> 2l) & 3) << 8], sign byte signs[4ib+l] (all 8 bits
//        stored); x = d * (0.5 + s) * 0.25 * grid * sign, s as IQ2_XS.
//   IQ3_XXS (98 B)  d:f16 | qs[64] grid indices | u32 scales_and_signs[8]. Sub-block ib: u32 a =
//        word ib; 4-group k (0..7) of ib: kIq3xxsGrid[qs[8ib+k]], signs bits 4(k%2).. of
//        kIqSigns[(a >> 7(k/2)) & 127]; x = d * (0.5 + (a >> 28)) * 0.5 * grid * sign.
//   IQ3_S   (110 B) d:f16 | qs[64] | qh[8] | signs[32] | scales[4]. 4-group k of ib: index
//        qs[8ib+k] | bit k of qh[ib] << 8 into kIq3sGrid; sign byte signs[4ib + k/2], bits 4(k%2)..;
//        x = d * (1 + 2s) * grid * sign, s = nibble ib%2 of scales[ib/2].
//   IQ1_S   (50 B)  d:f16 | qs[32] | qh:u16[8]. 8-group l of ib: kIq1sGrid[qs[4ib+l] | ((qh[ib] >> 3l)
//        & 7) << 8] (int8 levels -1, 0, 1); x = d * (2((qh[ib] >> 12) & 7) + 1) * (level + delta),
//        delta = -0.125 if bit 15 of qh[ib] is set, else +0.125.
//   IQ1_M   (56 B)  qs[32] | qh[16] | scales:u16[4] (no d field: d is the fp16 whose four nibbles are
//        the top nibbles of scales[0..3], scales[0]'s lowest). 8-group l of ib: grid index qs[4ib+l] |
//        ((qh[2ib + l/2] >> 4(l%2)) & 7) << 8, delta sign bit 3 of that nibble; 3-bit scale s of the
//        16-group h = l/2: (scales[ib/2] >> (6(ib%2) + 3h)) & 7; x = d * (2s + 1) * (level + delta).
#pragma once

#include <bit>
#include <cstdint>

namespace tmill {

inline constexpr int QK4_0 = 32;
inline constexpr int QK4_1 = 32;
inline constexpr int QK5_0 = 32;
inline constexpr int QK5_1 = 32;
inline constexpr int QK8_0 = 32;
inline constexpr int QK8_1 = 32;
inline constexpr int QK_K = 256;
inline constexpr int K_SCALE_SIZE = 12;

struct BlockQ4_0 {
  uint16_t d;
  uint8_t qs[QK4_0 / 2];
};
static_assert(sizeof(BlockQ4_0) == 18, "Q4_0 block must be 18 bytes");

struct BlockQ4_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qs[QK4_1 / 2];
};
static_assert(sizeof(BlockQ4_1) == 20, "Q4_1 block must be 20 bytes");

struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[QK5_0 / 2];
};
static_assert(sizeof(BlockQ5_0) == 22, "Q5_0 block must be 22 bytes");

struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[QK5_1 / 2];
};
static_assert(sizeof(BlockQ5_1) == 24, "Q5_1 block must be 24 bytes");

struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[QK8_0];
};
static_assert(sizeof(BlockQ8_0) == 34, "Q8_0 block must be 34 bytes");

struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;  // d * sum(qs)
  int8_t qs[QK8_1];
};
static_assert(sizeof(BlockQ8_1) == 36, "Q8_1 block must be 36 bytes");

struct BlockQ2_K {
  uint8_t scales[QK_K / 16];  // low nibble: scale, high nibble: min
  uint8_t qs[QK_K / 4];
  uint16_t d;
  uint16_t dmin;
};
static_assert(sizeof(BlockQ2_K) == 84, "Q2_K block must be 84 bytes");

struct BlockQ3_K {
  uint8_t hmask[QK_K / 8];
  uint8_t qs[QK_K / 4];
  uint8_t scales[12];
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110, "Q3_K block must be 110 bytes");

struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[K_SCALE_SIZE];
  uint8_t qs[QK_K / 2];
};
static_assert(sizeof(BlockQ4_K) == 144, "Q4_K block must be 144 bytes");

struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[K_SCALE_SIZE];
  uint8_t qh[QK_K / 8];
  uint8_t qs[QK_K / 2];
};
static_assert(sizeof(BlockQ5_K) == 176, "Q5_K block must be 176 bytes");

struct BlockQ6_K {
  uint8_t ql[QK_K / 2];
  uint8_t qh[QK_K / 4];
  int8_t scales[QK_K / 16];
  uint16_t d;
};
static_assert(sizeof(BlockQ6_K) == 210, "Q6_K block must be 210 bytes");

struct BlockQ8_K {
  float d;
  int8_t qs[QK_K];
  int16_t bsums[QK_K / 16];
};
static_assert(sizeof(BlockQ8_K) == 292, "Q8_K block must be 292 bytes");

inline constexpr int QK4_NL = 32;

struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[QK4_NL / 2];
};
static_assert(sizeof(BlockIQ4_NL) == 18, "IQ4_NL block must be 18 bytes");

struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[QK_K / 64];
  uint8_t qs[QK_K / 2];
};
static_assert(sizeof(BlockIQ4_XS) == 136, "IQ4_XS block must be 136 bytes");

// The 16 levels of IQ4_NL / IQ4_XS (ggml's kvalues_iq4nl), ascending.
static constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

inline constexpr int QK_MXFP4 = 32;

struct BlockMXFP4 {
  uint8_t e;
  uint8_t qs[QK_MXFP4 / 2];
};
static_assert(sizeof(BlockMXFP4) == 17, "MXFP4 block must be 17 bytes");

// E2M1 code -> twice its value (bit 3 the sign; 0, 0.5, 1, 1.5, 2, 3, 4, 6 doubled).
static constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

// 2^(e - 128) as a float, exact for every e: e = 0 and 1 are the subnormals 2^-128, 2^-127.
static inline float mxfp4_half_scale(uint8_t e) {
  const uint32_t bits = e < 2 ? (uint32_t{0x00200000} << e) : (static_cast<uint32_t>(e - 1) << 23);
  return std::bit_cast<float>(bits);
}

// ---- i-quants (layouts above; grids in quant/iq_grids.h)
struct BlockIQ2_XXS {
  uint16_t d;
  uint16_t qs[QK_K / 8];
};
static_assert(sizeof(BlockIQ2_XXS) == 66, "IQ2_XXS block must be 66 bytes");

struct BlockIQ2_XS {
  uint16_t d;
  uint16_t qs[QK_K / 8];
  uint8_t scales[QK_K / 32];
};
static_assert(sizeof(BlockIQ2_XS) == 74, "IQ2_XS block must be 74 bytes");

struct BlockIQ2_S {
  uint16_t d;
  uint8_t qs[QK_K / 4];  // 32 grid index low bytes, then 32 sign bytes
  uint8_t qh[QK_K / 32];
  uint8_t scales[QK_K / 32];
};
static_assert(sizeof(BlockIQ2_S) == 82, "IQ2_S block must be 82 bytes");

struct BlockIQ3_XXS {
  uint16_t d;
  uint8_t qs[3 * QK_K / 8];  // 64 grid indices, then 8 u32 scale-and-sign words
};
static_assert(sizeof(BlockIQ3_XXS) == 98, "IQ3_XXS block must be 98 bytes");

struct BlockIQ3_S {
  uint16_t d;
  uint8_t qs[QK_K / 4];
  uint8_t qh[QK_K / 32];
  uint8_t signs[QK_K / 8];
  uint8_t scales[QK_K / 64];
};
static_assert(sizeof(BlockIQ3_S) == 110, "IQ3_S block must be 110 bytes");

struct BlockIQ1_S {
  uint16_t d;
  uint8_t qs[QK_K / 8];
  uint16_t qh[QK_K / 32];
};
static_assert(sizeof(BlockIQ1_S) == 50, "IQ1_S block must be 50 bytes");

struct BlockIQ1_M {
  uint8_t qs[QK_K / 8];
  uint8_t qh[QK_K / 16];
  uint8_t scales[QK_K / 32];  // four u16 (LE); their top nibbles form the fp16 d
};
static_assert(sizeof(BlockIQ1_M) == 56, "IQ1_M block must be 56 bytes");

// IQ1_M: the fp16 bits of d, gathered from the top nibbles of the four u16 scale words.
static inline uint16_t iq1m_d_bits(const BlockIQ1_M& b) {
  uint16_t d = 0;
  for (int k = 0; k < 4; ++k) d = static_cast<uint16_t>(d | ((b.scales[2 * k + 1] >> 4) << (4 * k)));
  return d;
}

// IQ4_XS: the 6-bit scale of sub-block j (0..7), already minus 32.
static inline int iq4xs_scale(int j, const BlockIQ4_XS& b) {
  return (((b.scales_l[j / 2] >> (4 * (j % 2))) & 0xF) | (((b.scales_h >> (2 * j)) & 3) << 4)) - 32;
}

// Q4_K / Q5_K: 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes.
//   j < 4:  sc = s[j] & 63,                       m = s[j+4] & 63
//   j >= 4: sc = (s[j+4] & 15) | (s[j-4] >> 6) << 4, m = (s[j+4] >> 4) | (s[j] >> 6) << 4
static inline void get_scale_min_k4(int j, const uint8_t* s, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

// Inverse of get_scale_min_k4: packs eight 6-bit scales and mins (each 0..63).
static inline void pack_scale_min_k4(const uint8_t sc[8], const uint8_t m[8], uint8_t s[12]) {
  for (int j = 0; j < 12; ++j) s[j] = 0;
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      s[j] = sc[j];
      s[j + 4] = m[j];
    } else {
      s[j + 4] = static_cast<uint8_t>((sc[j] & 0xF) | ((m[j] & 0xF) << 4));
      s[j - 4] |= static_cast<uint8_t>((sc[j] >> 4) << 6);
      s[j] |= static_cast<uint8_t>((m[j] >> 4) << 6);
    }
  }
}

// Q3_K: signed 6-bit scale of sub-block j (0..15), already minus 32.
static inline int q3k_scale(int j, const uint8_t* s) {
  const int lo = (s[j % 8] >> (4 * (j / 8))) & 0xF;
  const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (lo | (hi << 4)) - 32;
}

// Q3_K: packs sixteen 6-bit scales given as 0..63 (i.e. scale + 32).
static inline void pack_q3k_scales(const uint8_t l[16], uint8_t s[12]) {
  for (int j = 0; j < 12; ++j) s[j] = 0;
  for (int j = 0; j < 16; ++j) {
    if (j < 8) s[j] = l[j] & 0xF;
    else s[j - 8] |= static_cast<uint8_t>((l[j] & 0xF) << 4);
    s[j % 4 + 8] |= static_cast<uint8_t>((l[j] >> 4) << (2 * (j / 4)));
  }
}

}  // namespace tmill
