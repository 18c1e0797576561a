// The lattice i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M; layouts in quant/blocks.h)
// decoded into one integer form that both the scalar dequantizer (quant/dequantize_iq.cpp) and the
// dot-product kernels (kernels/iqdot_*.cpp) start from:
//
//   element i of a super-block = d * f * sc[i / 16] * w[i]
//
// with sc[] odd integer multipliers (2s + 1 of the stored scale s), f a power of two per type
// (kIqFactor: 1/8 IQ2_*, 1/4 IQ3_XXS, 1 IQ3_S, 1/8 IQ1_*) and w an integer level:
//   IQ2 / IQ3 types: w = +-mag[i] (the grid's magnitude; bit i % 8 of sgn[i / 8] set: negative);
//   IQ1 types: w = 8 * lvl + delta (lvl = the grid's -1/0/1 byte in mag[i]; delta = -1 if bit 0 of
//   sgn[i / 8] is set, else +1), i.e. level + delta / 8 of the format with delta = +-1/8.
// A dot product over a super-block is then exactly d * f * sum_j sc[j] * (integer dot of group j),
// which the SIMD kernels compute in integer arithmetic, bitwise equal to the scalar kernel.
//
// Plain data and `static inline` functions only (the kernel ISA files include it: kernels/kernel_abi.h).
#pragma once

#include <cstdint>
#include <cstring>

#include "quant/blocks.h"
#include "quant/iq_grids.h"

namespace tmill {

// (IQ2_S came later and is appended, so the older kinds keep their numbers.)
enum IqKind : int { kIqIQ2_XXS = 0, kIqIQ2_XS, kIqIQ3_XXS, kIqIQ3_S, kIqIQ1_S, kIqIQ1_M, kIqIQ2_S, kIqKinds };
inline constexpr int kIqBlockBytes[kIqKinds] = {66, 74, 98, 110, 50, 56, 82};
// Power-of-two factor f (above) per kind, as a float multiplier.
inline constexpr float kIqFactor[kIqKinds] = {0.125f, 0.125f, 0.25f, 1.0f, 0.125f, 0.125f, 0.125f};
// True for the IQ1 kinds, whose mag[] holds signed levels and sgn[] the delta signs.
static inline bool iq_is_iq1(int kind) { return kind == kIqIQ1_S || kind == kIqIQ1_M; }

struct IqDecoded {
  uint8_t mag[256];  // grid bytes: unsigned magnitudes (IQ2/IQ3) or int8 levels -1/0/1 (IQ1)
  uint8_t sgn[32];   // per 8 elements: sign bits (IQ2/IQ3) or the delta flag in bit 0 (IQ1)
  int16_t sc[16];    // odd multiplier per 16 elements
  uint16_t d;        // fp16 bits of the super-block scale
};

static inline uint32_t iq_le32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Decodes one super-block of kind `kind` at `blk` into `o`.
static inline void iq_decode(int kind, const uint8_t* blk, IqDecoded& o) {
  switch (kind) {
    case kIqIQ2_XXS: {
      std::memcpy(&o.d, blk, 2);
      for (int ib = 0; ib < 8; ++ib) {
        const uint32_t a = iq_le32(blk + 2 + 8 * ib), s = iq_le32(blk + 6 + 8 * ib);
        for (int l = 0; l < 4; ++l) {
          std::memcpy(o.mag + 32 * ib + 8 * l, &kIq2xxsGrid[(a >> (8 * l)) & 255], 8);
          o.sgn[4 * ib + l] = kIqSigns[(s >> (7 * l)) & 127];
        }
        o.sc[2 * ib] = o.sc[2 * ib + 1] = static_cast<int16_t>(2 * (s >> 28) + 1);
      }
      return;
    }
    case kIqIQ2_XS: {
      BlockIQ2_XS b;
      std::memcpy(&b, blk, sizeof b);
      o.d = b.d;
      for (int ib = 0; ib < 8; ++ib) {
        for (int l = 0; l < 4; ++l) {
          const uint16_t v = b.qs[4 * ib + l];
          std::memcpy(o.mag + 32 * ib + 8 * l, &kIq2xsGrid[v & 511], 8);
          o.sgn[4 * ib + l] = kIqSigns[v >> 9];
        }
        o.sc[2 * ib] = static_cast<int16_t>(2 * (b.scales[ib] & 15) + 1);
        o.sc[2 * ib + 1] = static_cast<int16_t>(2 * (b.scales[ib] >> 4) + 1);
      }
      return;
    }
    case kIqIQ2_S: {
      BlockIQ2_S b;
      std::memcpy(&b, blk, sizeof b);
      o.d = b.d;
      for (int ib = 0; ib < 8; ++ib) {
        for (int l = 0; l < 4; ++l) {
          const int idx = b.qs[4 * ib + l] | (((b.qh[ib] >> (2 * l)) & 3) << 8);
          std::memcpy(o.mag + 32 * ib + 8 * l, &kIq2sGrid[idx], 8);
          o.sgn[4 * ib + l] = b.qs[QK_K / 8 + 4 * ib + l];  // the 8 sign bits are stored whole
        }
        o.sc[2 * ib] = static_cast<int16_t>(2 * (b.scales[ib] & 15) + 1);
        o.sc[2 * ib + 1] = static_cast<int16_t>(2 * (b.scales[ib] >> 4) + 1);
      }
      return;
    }
    case kIqIQ3_XXS: {
      std::memcpy(&o.d, blk, 2);
      const uint8_t* qs = blk + 2;
      for (int ib = 0; ib < 8; ++ib) {
        const uint32_t a = iq_le32(qs + 64 + 4 * ib);
        for (int k = 0; k < 8; ++k) std::memcpy(o.mag + 32 * ib + 4 * k, &kIq3xxsGrid[qs[8 * ib + k]], 4);
        for (int l = 0; l < 4; ++l) o.sgn[4 * ib + l] = kIqSigns[(a >> (7 * l)) & 127];
        o.sc[2 * ib] = o.sc[2 * ib + 1] = static_cast<int16_t>(2 * (a >> 28) + 1);
      }
      return;
    }
    case kIqIQ3_S: {
      BlockIQ3_S b;
      std::memcpy(&b, blk, sizeof b);
      o.d = b.d;
      for (int ib = 0; ib < 8; ++ib) {
        for (int k = 0; k < 8; ++k) {
          const int idx = b.qs[8 * ib + k] | (((b.qh[ib] >> k) & 1) << 8);
          std::memcpy(o.mag + 32 * ib + 4 * k, &kIq3sGrid[idx], 4);
        }
        for (int l = 0; l < 4; ++l) o.sgn[4 * ib + l] = b.signs[4 * ib + l];
        o.sc[2 * ib] = o.sc[2 * ib + 1] = static_cast<int16_t>(2 * ((b.scales[ib / 2] >> (4 * (ib % 2))) & 15) + 1);
      }
      return;
    }
    case kIqIQ1_S: {
      BlockIQ1_S b;
      std::memcpy(&b, blk, sizeof b);
      o.d = b.d;
      for (int ib = 0; ib < 8; ++ib) {
        const uint16_t h = b.qh[ib];
        for (int l = 0; l < 4; ++l) {
          const int idx = b.qs[4 * ib + l] | (((h >> (3 * l)) & 7) << 8);
          std::memcpy(o.mag + 32 * ib + 8 * l, &kIq1sGrid[idx], 8);
          o.sgn[4 * ib + l] = static_cast<uint8_t>(h >> 15);
        }
        o.sc[2 * ib] = o.sc[2 * ib + 1] = static_cast<int16_t>(2 * ((h >> 12) & 7) + 1);
      }
      return;
    }
    default: {  // kIqIQ1_M
      BlockIQ1_M b;
      std::memcpy(&b, blk, sizeof b);
      o.d = iq1m_d_bits(b);
      for (int ib = 0; ib < 8; ++ib) {
        for (int l = 0; l < 4; ++l) {
          const int nib = (b.qh[2 * ib + l / 2] >> (4 * (l % 2))) & 15;
          const int idx = b.qs[4 * ib + l] | ((nib & 7) << 8);
          std::memcpy(o.mag + 32 * ib + 8 * l, &kIq1sGrid[idx], 8);
          o.sgn[4 * ib + l] = static_cast<uint8_t>(nib >> 3);
        }
        const int s = b.scales[2 * (ib / 2)] | (b.scales[2 * (ib / 2) + 1] << 8);
        for (int h = 0; h < 2; ++h)
          o.sc[2 * ib + h] = static_cast<int16_t>(2 * ((s >> (6 * (ib % 2) + 3 * h)) & 7) + 1);
      }
      return;
    }
  }
}

// The integer level w[i] of decoded element i (see the top of this file).
static inline int iq_level(int kind, const IqDecoded& o, int i) {
  if (iq_is_iq1(kind)) return 8 * static_cast<int8_t>(o.mag[i]) + ((o.sgn[i / 8] & 1) ? -1 : 1);
  return ((o.sgn[i / 8] >> (i % 8)) & 1) ? -static_cast<int>(o.mag[i]) : static_cast<int>(o.mag[i]);
}

}  // namespace tmill
