// The lattice i-quants (IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M) dequantized three ways:
//  * against llama.cpp de3ff81's own dequantize_row_* (libggml-base.so of node-llama-cpp, through
//    tools/iq_golden.c) on 256 pseudo-random blocks per type: the FNV-1a hash of the output bits,
//    i.e. bit-identical output, every index, sign and scale bit random;
//  * against a per-element decoder written here from the byte layout (quant/blocks.h), which computes
//    the sign parity bit itself instead of reading kIqSigns;
//  * a few blocks by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "core/fp16.h"
#include "quant/iq_grids.h"
#include "quant/quant.h"

namespace tmill {
namespace {

constexpr int kBlocks = 256;

// tools/iq_golden.c's generator: every byte random, then the fp16 scale 0x3000 + 10 random bits.
std::vector<uint8_t> golden_blocks(DType t) {
  const int bb = static_cast<int>(dtype_info(t).type_size);
  std::vector<uint8_t> out(static_cast<size_t>(kBlocks * bb));
  uint32_t s = 2024;
  for (int b = 0; b < kBlocks; ++b) {
    uint8_t* p = out.data() + b * bb;
    for (int i = 0; i < bb; ++i) {
      s = s * 1664525u + 1013904223u;
      p[i] = static_cast<uint8_t>(s >> 24);
    }
    s = s * 1664525u + 1013904223u;
    const auto d = static_cast<uint16_t>(0x3000 + ((s >> 16) & 0x3ff));
    if (t != DType::IQ1_M) {
      p[0] = static_cast<uint8_t>(d & 0xff);
      p[1] = static_cast<uint8_t>(d >> 8);
    } else {
      for (int k = 0; k < 4; ++k) p[49 + 2 * k] = static_cast<uint8_t>((p[49 + 2 * k] & 0x0f) | (((d >> (4 * k)) & 0xf) << 4));
    }
  }
  return out;
}

struct Golden {
  DType type;
  uint64_t hash;
  float first[4];
};

// Output of tools/iq_golden.c against node-llama-cpp's libggml-base.so (llama.cpp de3ff81).
const Golden kGolden[] = {
    {DType::IQ2_XXS, 0xc07414bd3eb45f91ull, {-29.3899384f, -5.46789551f, 5.46789551f, 29.3899384f}},
    {DType::IQ2_XS, 0xb8a148d2b61fff96ull, {-4.55603027f, -4.55603027f, 4.55603027f, -14.2375946f}},
    {DType::IQ2_S, 0x56f57c9250d6cdc7ull, {3.01513672f, -16.2063599f, -3.01513672f, 9.42230225f}},
    {DType::IQ3_XXS, 0x65e0ad97ce3fb2e5ull, {29.1390381f, -54.1153564f, -54.1153564f, -29.1390381f}},
    {DType::IQ3_S, 0xa93b9292d56a39eeull, {-15.3875732f, 27.6976318f, 27.6976318f, -9.23254395f}},
    {DType::IQ1_S, 0x769c27499e04857eull, {1.57832336f, 0.175369263f, 0.175369263f, 0.175369263f}},
    {DType::IQ1_M, 0xeba040457b07a1c9ull, {1.45573425f, 1.45573425f, -0.207962036f, -0.207962036f}},
};

uint64_t fnv1a(const std::vector<float>& y) {
  uint64_t h = 1469598103934665603ull;
  for (float v : y) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    for (int k = 0; k < 4; ++k) {
      h ^= (u >> (8 * k)) & 0xff;
      h *= 1099511628211ull;
    }
  }
  return h;
}

TEST(IqLattice, BitIdenticalToLlamaCppDequantization) {
  for (const Golden& g : kGolden) {
    const std::vector<uint8_t> blocks = golden_blocks(g.type);
    std::vector<float> y(kBlocks * 256);
    ASSERT_TRUE(can_dequantize(g.type));
    dequantize_row(g.type, blocks.data(), y.data(), static_cast<int64_t>(y.size()));
    for (int i = 0; i < 4; ++i) EXPECT_EQ(y[i], g.first[i]) << dtype_name(g.type) << " element " << i;
    EXPECT_EQ(fnv1a(y), g.hash) << dtype_name(g.type);
  }
}

uint32_t le32(const uint8_t* p) { return p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24); }
uint16_t le16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
int parity(unsigned v) { return __builtin_popcount(v) & 1; }
// Bit `bit` (0..7) of a sign byte given by its 7 stored bits (bit 7: the parity of the other seven).
bool sign7(unsigned s7, int bit) { return bit < 7 ? ((s7 >> bit) & 1) : parity(s7); }

// Element e of the super-block at p, straight from the layout, in double.
double element(DType t, const uint8_t* p, int e) {
  const int ib = e / 32, l = (e % 32) / 8, j = e % 8, k = (e % 32) / 4, j4 = e % 4;
  switch (t) {
    case DType::IQ2_XXS: {
      const double d = fp16_to_fp32(le16(p));
      const uint32_t a = le32(p + 2 + 8 * ib), b = le32(p + 6 + 8 * ib);
      const double g = static_cast<double>((kIq2xxsGrid[(a >> (8 * l)) & 255] >> (8 * j)) & 255);
      return d * (0.5 + (b >> 28)) * 0.25 * g * (sign7((b >> (7 * l)) & 127, j) ? -1 : 1);
    }
    case DType::IQ2_XS: {
      const double d = fp16_to_fp32(le16(p));
      const uint16_t v = le16(p + 2 + 2 * (4 * ib + l));
      const double g = static_cast<double>((kIq2xsGrid[v & 511] >> (8 * j)) & 255);
      const int s = l < 2 ? p[66 + ib] & 15 : p[66 + ib] >> 4;
      return d * (0.5 + s) * 0.25 * g * (sign7(v >> 9, j) ? -1 : 1);
    }
    case DType::IQ2_S: {  // all 8 sign bits stored (no parity bit)
      const double d = fp16_to_fp32(le16(p));
      const int idx = p[2 + 4 * ib + l] | (((p[66 + ib] >> (2 * l)) & 3) << 8);
      const double g = static_cast<double>((kIq2sGrid[idx] >> (8 * j)) & 255);
      const int s = l < 2 ? p[74 + ib] & 15 : p[74 + ib] >> 4;
      return d * (0.5 + s) * 0.25 * g * (((p[34 + 4 * ib + l] >> j) & 1) ? -1 : 1);
    }
    case DType::IQ3_XXS: {
      const double d = fp16_to_fp32(le16(p));
      const uint32_t a = le32(p + 2 + 64 + 4 * ib);
      const double g = static_cast<double>((kIq3xxsGrid[p[2 + 8 * ib + k]] >> (8 * j4)) & 255);
      return d * (0.5 + (a >> 28)) * 0.5 * g * (sign7((a >> (7 * (k / 2))) & 127, 4 * (k % 2) + j4) ? -1 : 1);
    }
    case DType::IQ3_S: {
      const double d = fp16_to_fp32(le16(p));
      const int idx = p[2 + 8 * ib + k] | (((p[66 + ib] >> k) & 1) << 8);
      const double g = static_cast<double>((kIq3sGrid[idx] >> (8 * j4)) & 255);
      const bool neg = (p[74 + 4 * ib + k / 2] >> (4 * (k % 2) + j4)) & 1;
      const int s = (p[106 + ib / 2] >> (4 * (ib % 2))) & 15;
      return d * (1 + 2 * s) * g * (neg ? -1 : 1);
    }
    case DType::IQ1_S: {
      const double d = fp16_to_fp32(le16(p));
      const uint16_t qh = le16(p + 34 + 2 * ib);
      const int idx = p[2 + 4 * ib + l] | (((qh >> (3 * l)) & 7) << 8);
      const double g = static_cast<int8_t>((kIq1sGrid[idx] >> (8 * j)) & 255);
      return d * (2 * ((qh >> 12) & 7) + 1) * (g + ((qh & 0x8000) ? -0.125 : 0.125));
    }
    default: {  // IQ1_M
      uint16_t dbits = 0;
      for (int w = 0; w < 4; ++w) dbits = static_cast<uint16_t>(dbits | ((le16(p + 48 + 2 * w) >> 12) << (4 * w)));
      const double d = fp16_to_fp32(dbits);
      const int nib = (p[32 + 2 * ib + l / 2] >> (4 * (l % 2))) & 15;
      const double g = static_cast<int8_t>((kIq1sGrid[p[4 * ib + l] | ((nib & 7) << 8)] >> (8 * j)) & 255);
      const int s = (le16(p + 48 + 2 * (ib / 2)) >> (6 * (ib % 2) + 3 * (l / 2))) & 7;
      return d * (2 * s + 1) * (g + ((nib & 8) ? -0.125 : 0.125));
    }
  }
}

TEST(IqLattice, MatchesAPerElementDecoderOfTheLayout) {
  for (DType t : {DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S, DType::IQ3_XXS, DType::IQ3_S, DType::IQ1_S,
                  DType::IQ1_M}) {
    const std::vector<uint8_t> blocks = golden_blocks(t);
    const int nb = 16, bb = static_cast<int>(dtype_info(t).type_size);
    std::vector<float> y(nb * 256);
    dequantize_row(t, blocks.data(), y.data(), nb * 256);
    for (int i = 0; i < nb * 256; ++i) {
      const double want = element(t, blocks.data() + (i / 256) * bb, i % 256);
      ASSERT_NEAR(y[i], want, 1e-6 * std::fabs(want)) << dtype_name(t) << " element " << i;
    }
  }
}

TEST(IqLattice, HandBuiltBlocks) {
  // IQ2_XXS, d = 1: grid entry 0 is eight 8s; scale 0 gives 8 * 0.5 * 0.25 = 1 everywhere.
  std::vector<uint8_t> b(66, 0);
  b[1] = 0x3c;
  std::vector<float> y(256);
  dequantize_row(DType::IQ2_XXS, b.data(), y.data(), 256);
  for (float v : y) ASSERT_EQ(v, 1.0f);
  // Sub-block 0: scale 1 (3 * 0.125 per unit), 7-bit sign field 1 of group 0: element 0 and, by
  // parity, element 7 negative; group 1 takes grid entry 1 (0x2b = 43 in element 0).
  b[2 + 1] = 1;                          // a: byte 1 = grid index 1 for group 1
  const uint32_t s = (1u << 28) | 1u;    // scale 1, sign field 1 for group 0
  std::memcpy(b.data() + 6, &s, 4);
  dequantize_row(DType::IQ2_XXS, b.data(), y.data(), 256);
  EXPECT_EQ(y[0], -3.0f);
  EXPECT_EQ(y[1], 3.0f);
  EXPECT_EQ(y[7], -3.0f);
  EXPECT_EQ(y[8], 43 * 0.375f);
  EXPECT_EQ(y[9], 3.0f);
  EXPECT_EQ(y[32], 1.0f);
  // IQ1_S, d = 1, all else 0: grid entry 0 is eight -1s, scale 2*0+1, delta +1/8: -0.875; with bit 15
  // of qh[0] set (delta -1/8) and scale 3 (bits 12..14): 7 * (-1.125).
  std::vector<uint8_t> q1(50, 0);
  q1[1] = 0x3c;
  dequantize_row(DType::IQ1_S, q1.data(), y.data(), 256);
  for (float v : y) ASSERT_EQ(v, -0.875f);
  q1[35] = 0x80 | 0x30;
  dequantize_row(DType::IQ1_S, q1.data(), y.data(), 256);
  EXPECT_EQ(y[0], 7 * -1.125f);
  EXPECT_EQ(y[31], 7 * -1.125f);
  EXPECT_EQ(y[32], -0.875f);
  // IQ3_XXS, d = 1: grid entry 0 is four 4s, scale 0: 4 * 0.5 * 0.5 = 1.
  std::vector<uint8_t> q3(98, 0);
  q3[1] = 0x3c;
  dequantize_row(DType::IQ3_XXS, q3.data(), y.data(), 256);
  for (float v : y) ASSERT_EQ(v, 1.0f);
  // IQ1_M: d = 2 (fp16 0x4000: only the top nibble of scales word 3), all scales 0: 2 * (-1 + 1/8).
  std::vector<uint8_t> m(56, 0);
  m[55] = 0x40;
  dequantize_row(DType::IQ1_M, m.data(), y.data(), 256);
  for (float v : y) ASSERT_EQ(v, -1.75f);
  // IQ2_S, d = 1, scale 0: grid entry 0 (eight 8s) gives 1 everywhere. Sign byte 0 = 0x80 negates
  // element 7 alone (an odd count: IQ2_S stores all 8 bits); qh[0] = 0b0100 takes group 1's index to
  // 256 + qs[1] = 256, scales[0] = 0x10 gives the second 16-group (groups 2, 3) scale 1 (3 * 0.125).
  std::vector<uint8_t> q2(82, 0);
  q2[1] = 0x3c;
  dequantize_row(DType::IQ2_S, q2.data(), y.data(), 256);
  for (float v : y) ASSERT_EQ(v, 1.0f);
  q2[34] = 0x80;
  q2[66] = 0x04;
  q2[74] = 0x10;
  dequantize_row(DType::IQ2_S, q2.data(), y.data(), 256);
  EXPECT_EQ(y[0], 1.0f);
  EXPECT_EQ(y[7], -1.0f);
  for (int j = 0; j < 8; ++j) EXPECT_EQ(y[8 + j], static_cast<float>((kIq2sGrid[256] >> (8 * j)) & 255) / 8) << j;
  EXPECT_EQ(y[16], 3.0f);
  EXPECT_EQ(y[31], 3.0f);
  EXPECT_EQ(y[32], 1.0f);
}

TEST(IqLattice, ReadableAndWritable) {  // the quantizers: iq_lattice_quant_test.cpp
  for (DType t : {DType::IQ2_XXS, DType::IQ2_XS, DType::IQ2_S, DType::IQ3_XXS, DType::IQ3_S, DType::IQ1_S,
                  DType::IQ1_M}) {
    EXPECT_TRUE(can_dequantize(t)) << dtype_name(t);
    EXPECT_TRUE(can_quantize(t)) << dtype_name(t);
    EXPECT_GE(iq_kind(t), 0) << dtype_name(t);
  }
  EXPECT_FALSE(can_dequantize(DType::TQ1_0));  // not yet
  EXPECT_EQ(iq_kind(DType::IQ4_XS), -1);
  EXPECT_TRUE(can_quantize(DType::IQ4_XS));
}

}  // namespace
}  // namespace tmill
