// Block layouts: hand-packed blocks with hand-computed outputs, one test per format. The bytes are
// written from the element-placement formulas documented in quant/blocks.h (independently of the
// dequantizer's loops), and a few outputs are spelled out as literal numbers computed by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/dtype.h"
#include "core/fp16.h"
#include "quant/blocks.h"
#include "quant/quant.h"

namespace tmill {
namespace {

template <class Block>
std::vector<float> deq(DType t, const Block& b) {
  std::vector<float> out(static_cast<size_t>(dtype_info(t).block_size));
  dequantize_row(t, &b, out.data(), static_cast<int64_t>(out.size()));
  return out;
}

TEST(QuantLayout, BlockSizesMatchDtypeTable) {
  EXPECT_EQ(sizeof(BlockQ4_0), dtype_info(DType::Q4_0).type_size);
  EXPECT_EQ(sizeof(BlockQ4_1), dtype_info(DType::Q4_1).type_size);
  EXPECT_EQ(sizeof(BlockQ5_0), dtype_info(DType::Q5_0).type_size);
  EXPECT_EQ(sizeof(BlockQ5_1), dtype_info(DType::Q5_1).type_size);
  EXPECT_EQ(sizeof(BlockQ8_0), dtype_info(DType::Q8_0).type_size);
  EXPECT_EQ(sizeof(BlockQ8_1), dtype_info(DType::Q8_1).type_size);
  EXPECT_EQ(sizeof(BlockQ2_K), dtype_info(DType::Q2_K).type_size);
  EXPECT_EQ(sizeof(BlockQ3_K), dtype_info(DType::Q3_K).type_size);
  EXPECT_EQ(sizeof(BlockQ4_K), dtype_info(DType::Q4_K).type_size);
  EXPECT_EQ(sizeof(BlockQ5_K), dtype_info(DType::Q5_K).type_size);
  EXPECT_EQ(sizeof(BlockQ6_K), dtype_info(DType::Q6_K).type_size);
  EXPECT_EQ(sizeof(BlockQ8_K), dtype_info(DType::Q8_K).type_size);
  EXPECT_EQ(sizeof(BlockIQ4_NL), dtype_info(DType::IQ4_NL).type_size);
  EXPECT_EQ(sizeof(BlockIQ4_XS), dtype_info(DType::IQ4_XS).type_size);
  EXPECT_EQ(sizeof(BlockMXFP4), dtype_info(DType::MXFP4).type_size);
  EXPECT_EQ(offsetof(BlockMXFP4, qs), 1u);
  EXPECT_EQ(offsetof(BlockIQ4_XS, scales_h), 2u);
  EXPECT_EQ(offsetof(BlockIQ4_XS, scales_l), 4u);
  EXPECT_EQ(offsetof(BlockIQ4_XS, qs), 8u);
  // Field offsets that SIMD kernels rely on.
  EXPECT_EQ(offsetof(BlockQ5_0, qh), 2u);
  EXPECT_EQ(offsetof(BlockQ5_0, qs), 6u);
  EXPECT_EQ(offsetof(BlockQ5_1, qh), 4u);
  EXPECT_EQ(offsetof(BlockQ2_K, qs), 16u);
  EXPECT_EQ(offsetof(BlockQ2_K, d), 80u);
  EXPECT_EQ(offsetof(BlockQ3_K, qs), 32u);
  EXPECT_EQ(offsetof(BlockQ3_K, scales), 96u);
  EXPECT_EQ(offsetof(BlockQ3_K, d), 108u);
  EXPECT_EQ(offsetof(BlockQ4_K, scales), 4u);
  EXPECT_EQ(offsetof(BlockQ4_K, qs), 16u);
  EXPECT_EQ(offsetof(BlockQ5_K, qh), 16u);
  EXPECT_EQ(offsetof(BlockQ5_K, qs), 48u);
  EXPECT_EQ(offsetof(BlockQ6_K, qh), 128u);
  EXPECT_EQ(offsetof(BlockQ6_K, scales), 192u);
  EXPECT_EQ(offsetof(BlockQ6_K, d), 208u);
  EXPECT_EQ(offsetof(BlockQ8_K, qs), 4u);
  EXPECT_EQ(offsetof(BlockQ8_K, bsums), 260u);
}

TEST(QuantLayout, FloatTypes) {
  const uint16_t f16[4] = {0x3C00, 0xC000, 0x3555, 0x0001};
  float out[4];
  dequantize_row(DType::F16, f16, out, 4);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  EXPECT_EQ(out[2], 0.333251953125f);
  EXPECT_EQ(out[3], 5.9604644775390625e-8f);
  const uint16_t bf16[3] = {0x3F80, 0x4049, 0xBF00};
  dequantize_row(DType::BF16, bf16, out, 3);
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], 3.140625f);
  EXPECT_EQ(out[2], -0.5f);
  const float f32[2] = {1.5f, -7.25f};
  dequantize_row(DType::F32, f32, out, 2);
  EXPECT_EQ(out[0], 1.5f);
  EXPECT_EQ(out[1], -7.25f);
}

TEST(QuantLayout, Q4_0LowNibblesFirstHalf) {
  BlockQ4_0 b{};
  b.d = 0x3800;  // 0.5
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto y = deq(DType::Q4_0, b);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 0.5f) << j;
    EXPECT_EQ(y[j + 16], (15 - j - 8) * 0.5f) << j;
  }
  EXPECT_EQ(y[0], -4.0f);
  EXPECT_EQ(y[16], 3.5f);
  EXPECT_EQ(y[31], -4.0f);
}

TEST(QuantLayout, Q4_1ScaleAndMin) {
  BlockQ4_1 b{};
  b.d = 0x3400;  // 0.25
  b.m = 0xBC00;  // -1
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(((j * 3) & 15) | (((j * 7 + 1) & 15) << 4));
  const auto y = deq(DType::Q4_1, b);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], ((j * 3) & 15) * 0.25f - 1.0f);
    EXPECT_EQ(y[j + 16], ((j * 7 + 1) & 15) * 0.25f - 1.0f);
  }
  EXPECT_EQ(y[16], -0.75f);  // nibble 1
}

TEST(QuantLayout, Q5_0HighBitsInQh) {
  BlockQ5_0 b{};
  b.d = 0x3C00;  // 1.0
  // qh is a little-endian u32: bit 0 (element 0) and bit 31 (element 31).
  b.qh[0] = 0x01;
  b.qh[3] = 0x80;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | (j << 4));
  const auto y = deq(DType::Q5_0, b);
  EXPECT_EQ(y[0], 0.0f);     // 0 | 16 - 16
  EXPECT_EQ(y[1], -15.0f);   // 1 - 16
  EXPECT_EQ(y[15], -1.0f);   // 15 - 16
  EXPECT_EQ(y[16], -16.0f);  // 0 - 16
  EXPECT_EQ(y[30], -2.0f);   // 14 - 16
  EXPECT_EQ(y[31], 15.0f);   // 15 | 16 - 16
}

TEST(QuantLayout, Q5_1HighBitsInQh) {
  BlockQ5_1 b{};
  b.d = 0x3800;  // 0.5
  b.m = 0x4000;  // 2
  b.qh[1] = 0x01;  // bit 8 -> element 8
  b.qh[2] = 0x02;  // bit 17 -> element 17
  for (int j = 0; j < 16; ++j) b.qs[j] = 0x53;
  const auto y = deq(DType::Q5_1, b);
  for (int j = 0; j < 32; ++j) {
    int q = j < 16 ? 3 : 5;
    if (j == 8 || j == 17) q += 16;
    EXPECT_EQ(y[j], q * 0.5f + 2.0f) << j;
  }
  EXPECT_EQ(y[8], 11.5f);
  EXPECT_EQ(y[17], 12.5f);
}

TEST(QuantLayout, Q8_0AndQ8_1) {
  BlockQ8_0 a{};
  a.d = 0x3000;  // 0.125
  for (int j = 0; j < 32; ++j) a.qs[j] = static_cast<int8_t>(j - 16);
  auto y = deq(DType::Q8_0, a);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], (j - 16) * 0.125f);
  BlockQ8_1 b{};
  b.d = 0x4000;  // 2
  b.s = 0x7BFF;  // ignored by dequantization
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(-j);
  y = deq(DType::Q8_1, b);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], -2.0f * j);
}

TEST(QuantLayout, Q2_K) {
  BlockQ2_K b{};
  b.d = 0x3C00;     // 1
  b.dmin = 0x3800;  // 0.5
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<uint8_t>(((j % 4) + 1) | ((j % 3) << 4));
  auto level = [](int e) { return (e * 7 + e / 16) % 4; };
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, shift = 2 * ((e % 128) / 32);
    b.qs[32 * h + e % 32] |= static_cast<uint8_t>(level(e) << shift);
  }
  const auto y = deq(DType::Q2_K, b);
  for (int e = 0; e < 256; ++e) {
    const int j = e / 16;
    EXPECT_EQ(y[e], 1.0f * ((j % 4) + 1) * level(e) - 0.5f * (j % 3)) << e;
  }
  // Element 33: sub-block 2 (scale 3, min 2), level (231 + 2) % 4 = 1 -> 3 - 1 = 2.
  EXPECT_EQ(y[33], 2.0f);
}

TEST(QuantLayout, Q3_K) {
  BlockQ3_K b{};
  b.d = 0x3800;  // 0.5
  // Signed 6-bit scale j - 8, stored as j + 24: low nibble in scales[j % 8] (nibble j / 8),
  // high two bits in scales[8 + j % 4] at bit 2 * (j / 4).
  for (int j = 0; j < 16; ++j) {
    const int l = (j - 8) + 32;
    b.scales[j % 8] |= static_cast<uint8_t>((l & 0xF) << (4 * (j / 8)));
    b.scales[8 + j % 4] |= static_cast<uint8_t>((l >> 4) << (2 * (j / 4)));
  }
  auto value = [](int e) { return (e * 5 + e / 32) % 8 - 4; };  // -4..3
  for (int e = 0; e < 256; ++e) {
    const int u = value(e) + 4;
    const int h = e / 128, shift = 2 * ((e % 128) / 32);
    b.qs[32 * h + e % 32] |= static_cast<uint8_t>((u & 3) << shift);
    if (u & 4) b.hmask[e % 32] |= static_cast<uint8_t>(1 << (e / 32));
  }
  for (int j = 0; j < 16; ++j) EXPECT_EQ(q3k_scale(j, b.scales), j - 8);
  const auto y = deq(DType::Q3_K, b);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 0.5f * (e / 16 - 8) * value(e)) << e;
  // Element 200: sub-block 12 (scale 4), value (1000 + 6) % 8 - 4 = 2 -> 0.5 * 4 * 2.
  EXPECT_EQ(y[200], 4.0f);
}

// Scales {1,2,3,4,17,18,19,20} and mins {5,6,7,8,33,34,35,36} packed by hand into 12 bytes.
constexpr uint8_t kK4Scales[12] = {0x41, 0x42, 0x43, 0x44, 0x85, 0x86, 0x87, 0x88, 0x11, 0x22, 0x33, 0x44};
constexpr uint8_t kK4Sc[8] = {1, 2, 3, 4, 17, 18, 19, 20};
constexpr uint8_t kK4Min[8] = {5, 6, 7, 8, 33, 34, 35, 36};

TEST(QuantLayout, K4ScalePacking) {
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    get_scale_min_k4(j, kK4Scales, &sc, &m);
    EXPECT_EQ(sc, kK4Sc[j]) << j;
    EXPECT_EQ(m, kK4Min[j]) << j;
  }
  uint8_t packed[12];
  pack_scale_min_k4(kK4Sc, kK4Min, packed);
  EXPECT_EQ(0, std::memcmp(packed, kK4Scales, 12));
}

TEST(QuantLayout, Q4_K) {
  BlockQ4_K b{};
  b.d = 0x3800;     // 0.5
  b.dmin = 0x3400;  // 0.25
  std::memcpy(b.scales, kK4Scales, 12);
  std::memset(b.qs, 0x3A, sizeof(b.qs));  // low nibble 10, high nibble 3
  auto y = deq(DType::Q4_K, b);
  EXPECT_EQ(y[0], 3.75f);    // 0.5*1*10 - 0.25*5
  EXPECT_EQ(y[32], 1.5f);    // 0.5*2*3 - 0.25*6
  EXPECT_EQ(y[128], 76.75f); // 0.5*17*10 - 0.25*33
  EXPECT_EQ(y[255], 21.0f);  // 0.5*20*3 - 0.25*36
  // General placement: byte 32*(e/64) + e%32, low nibble for the first 32 of each 64.
  auto level = [](int e) { return (e * 5 + e / 32) % 16; };
  std::memset(b.qs, 0, sizeof(b.qs));
  for (int e = 0; e < 256; ++e)
    b.qs[32 * (e / 64) + e % 32] |= static_cast<uint8_t>(level(e) << ((e % 64) < 32 ? 0 : 4));
  y = deq(DType::Q4_K, b);
  for (int e = 0; e < 256; ++e)
    EXPECT_EQ(y[e], 0.5f * kK4Sc[e / 32] * level(e) - 0.25f * kK4Min[e / 32]) << e;
}

TEST(QuantLayout, Q5_K) {
  BlockQ5_K b{};
  b.d = 0x3800;
  b.dmin = 0x3400;
  std::memcpy(b.scales, kK4Scales, 12);
  std::memset(b.qs, 0x3A, sizeof(b.qs));
  std::memset(b.qh, 0x81, sizeof(b.qh));  // fifth bit for sub-blocks 0 and 7
  auto y = deq(DType::Q5_K, b);
  EXPECT_EQ(y[0], 11.75f);  // 0.5*1*(10+16) - 1.25
  EXPECT_EQ(y[32], 1.5f);   // no fifth bit
  EXPECT_EQ(y[255], 181.0f);  // 0.5*20*(3+16) - 9
  auto level = [](int e) { return (e * 11 + e / 64) % 32; };
  std::memset(b.qs, 0, sizeof(b.qs));
  std::memset(b.qh, 0, sizeof(b.qh));
  for (int e = 0; e < 256; ++e) {
    b.qs[32 * (e / 64) + e % 32] |= static_cast<uint8_t>((level(e) & 15) << ((e % 64) < 32 ? 0 : 4));
    if (level(e) & 16) b.qh[e % 32] |= static_cast<uint8_t>(1 << (e / 32));
  }
  y = deq(DType::Q5_K, b);
  for (int e = 0; e < 256; ++e)
    EXPECT_EQ(y[e], 0.5f * kK4Sc[e / 32] * level(e) - 0.25f * kK4Min[e / 32]) << e;
}

TEST(QuantLayout, Q6_K) {
  BlockQ6_K b{};
  b.d = 0x3800;  // 0.5
  for (int k = 0; k < 16; ++k) b.scales[k] = static_cast<int8_t>(k + 1);
  std::memset(b.ql, 0x21, sizeof(b.ql));
  std::memset(b.qh, 0xE4, sizeof(b.qh));  // 2-bit fields 0,1,2,3
  auto y = deq(DType::Q6_K, b);
  EXPECT_EQ(y[0], -15.5f);    // q = 1 | 0<<4 = 1, scale 1
  EXPECT_EQ(y[32], -22.5f);   // q = 1 | 1<<4 = 17, scale 3
  EXPECT_EQ(y[64], 5.0f);     // q = 2 | 2<<4 = 34, scale 5
  EXPECT_EQ(y[96], 63.0f);    // q = 2 | 3<<4 = 50, scale 7
  EXPECT_EQ(y[144], -155.0f); // second half, sub-block 9, q = 1, scale 10
  // General placement (blocks.h): low 4 bits in ql[64h + l + 32*(k&1)] nibble k>>1, high 2 bits in
  // qh[32h + l] at 2k, for e = 128h + 32k + l.
  auto level = [](int e) { return (e * 13 + 7) % 64; };
  std::memset(b.ql, 0, sizeof(b.ql));
  std::memset(b.qh, 0, sizeof(b.qh));
  for (int k = 0; k < 16; ++k) b.scales[k] = static_cast<int8_t>(k * 9 - 70);
  for (int e = 0; e < 256; ++e) {
    const int h = e / 128, r = e % 128, l = r % 32, k = r / 32;
    b.ql[64 * h + l + 32 * (k & 1)] |= static_cast<uint8_t>((level(e) & 15) << (4 * (k >> 1)));
    b.qh[32 * h + l] |= static_cast<uint8_t>((level(e) >> 4) << (2 * k));
  }
  y = deq(DType::Q6_K, b);
  for (int e = 0; e < 256; ++e) EXPECT_EQ(y[e], 0.5f * (e / 16 * 9 - 70) * (level(e) - 32)) << e;
}

TEST(QuantLayout, Q8_K) {
  BlockQ8_K b{};
  b.d = 0.25f;
  for (int j = 0; j < 256; ++j) b.qs[j] = static_cast<int8_t>(j - 128);
  const auto y = deq(DType::Q8_K, b);
  for (int j = 0; j < 256; ++j) EXPECT_EQ(y[j], 0.25f * (j - 128));
}

TEST(QuantLayout, IQ4_NLTableLookup) {
  // d = 0.5; element j < 16 takes index j (low nibble), element 16 + j index 15 - j (high nibble).
  BlockIQ4_NL b{};
  b.d = 0x3800;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto y = deq(DType::IQ4_NL, b);
  const float table[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * table[j]) << j;
    EXPECT_EQ(y[16 + j], 0.5f * table[15 - j]) << j;
  }
  EXPECT_EQ(y[0], -63.5f);
  EXPECT_EQ(y[16], 56.5f);
  EXPECT_EQ(y[24], -5.0f);  // index 7
}

TEST(QuantLayout, IQ4_XSSixBitScales) {
  // d = 0.25; sub-block j has the stored scale 6-bit value v_j = 32 + (j odd ? -(j + 1) : 3j + 1)
  // packed by hand: low 4 bits in scales_l[j/2] (odd j in the high nibble), top 2 bits in scales_h.
  BlockIQ4_XS b{};
  b.d = 0x3400;
  int v[8];
  for (int j = 0; j < 8; ++j) v[j] = 32 + (j % 2 ? -(j + 1) : 3 * j + 1);
  v[7] = 0;   // the most negative scale, -32
  v[6] = 63;  // the largest, +31
  for (int j = 0; j < 8; ++j) {
    b.scales_l[j / 2] = static_cast<uint8_t>(b.scales_l[j / 2] | ((v[j] & 15) << (4 * (j % 2))));
    b.scales_h = static_cast<uint16_t>(b.scales_h | ((v[j] >> 4) << (2 * j)));
  }
  // Nibbles: element 32j + i (i < 16) has index (i + j) % 16, element 32j + 16 + i index (i * 3) % 16.
  for (int j = 0; j < 8; ++j)
    for (int i = 0; i < 16; ++i) b.qs[16 * j + i] = static_cast<uint8_t>(((i + j) % 16) | (((i * 3) % 16) << 4));
  const auto y = deq(DType::IQ4_XS, b);
  for (int j = 0; j < 8; ++j) {
    const float dl = 0.25f * static_cast<float>(v[j] - 32);
    for (int i = 0; i < 16; ++i) {
      EXPECT_EQ(y[32 * j + i], dl * kIq4nlValues[(i + j) % 16]) << j << " " << i;
      EXPECT_EQ(y[32 * j + 16 + i], dl * kIq4nlValues[(i * 3) % 16]) << j << " " << i;
    }
  }
  EXPECT_EQ(y[0], -31.75f);                        // sub-block 0: scale +1, index 0 (-127)
  EXPECT_EQ(y[32 * 7], 80.0f);                     // sub-block 7: scale -32, index 7 (-10)
  EXPECT_EQ(y[32 * 6 + 16 + 1], -503.75f);         // sub-block 6: scale +31, index 3 (-65)
}

TEST(QuantLayout, MXFP4E2M1CodesAndE8M0Scale) {
  // e = 128: the half scale is 2^0 = 1, so x = the doubled E2M1 value; element j < 16 takes code j
  // (low nibble), element 16 + j code 15 - j (high nibble).
  BlockMXFP4 b[2]{};
  b[0].e = 128;
  for (int j = 0; j < 16; ++j) b[0].qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  // E2M1: sign bit 3, then 0, 0.5, 1, 1.5, 2, 3, 4, 6 -- doubled.
  const float e2m1x2[16] = {0, 1, 2, 3, 4, 6, 8, 12, -0.0f, -1, -2, -3, -4, -6, -8, -12};
  // Second block: e = 127 + 3 (half scale 4), codes 7 (6.0 -> 12 doubled) and 15 (-12).
  b[1].e = 130;
  for (int j = 0; j < 16; ++j) b[1].qs[j] = 0xF7;
  std::vector<float> y(64);
  dequantize_row(DType::MXFP4, b, y.data(), 64);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], e2m1x2[j]) << j;
    EXPECT_EQ(y[16 + j], e2m1x2[15 - j]) << j;
  }
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[32 + j], 48.0f) << j;  // 12 * 4: the true value 6 * 2^(130 - 127)
    EXPECT_EQ(y[48 + j], -48.0f) << j;
  }
}

TEST(QuantLayout, MXFP4ScaleCoversTheWholeE8M0Range) {
  // 2^(e - 128) for every byte, including the subnormal results at e = 0, 1 and the largest at 255.
  EXPECT_EQ(mxfp4_half_scale(0), std::ldexp(1.0f, -128));
  EXPECT_EQ(mxfp4_half_scale(1), std::ldexp(1.0f, -127));
  EXPECT_EQ(mxfp4_half_scale(2), std::ldexp(1.0f, -126));
  EXPECT_EQ(mxfp4_half_scale(127), 0.5f);
  EXPECT_EQ(mxfp4_half_scale(255), std::ldexp(1.0f, 127));
  for (int e = 0; e < 256; ++e) EXPECT_EQ(mxfp4_half_scale(static_cast<uint8_t>(e)), std::ldexp(1.0f, e - 128)) << e;
}

TEST(QuantLayout, MultipleBlocksAdvance) {
  BlockQ8_0 blocks[3]{};
  const uint16_t ds[3] = {0x3C00, 0x4000, 0x3800};  // 1, 2, 0.5
  for (int i = 0; i < 3; ++i) {
    blocks[i].d = ds[i];
    for (int j = 0; j < 32; ++j) blocks[i].qs[j] = static_cast<int8_t>(i * 10 + j);
  }
  float y[96];
  dequantize_row(DType::Q8_0, blocks, y, 96);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 32; ++j) EXPECT_EQ(y[32 * i + j], fp16_to_fp32(ds[i]) * (i * 10 + j));
}

TEST(QuantLayout, SupportedTypes) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1,
                  DType::Q8_0, DType::Q8_1, DType::Q2_K, DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K,
                  DType::Q8_K, DType::IQ4_NL, DType::IQ4_XS, DType::MXFP4, DType::IQ2_XXS, DType::IQ2_XS,
                  DType::IQ2_S, DType::IQ3_XXS, DType::IQ3_S, DType::IQ1_S, DType::IQ1_M}) {
    EXPECT_TRUE(can_dequantize(t)) << dtype_name(t);
    EXPECT_TRUE(can_quantize(t)) << dtype_name(t);
  }
  for (DType t : {DType::TQ1_0, DType::I32, DType::TQ2_0}) {
    EXPECT_FALSE(can_dequantize(t)) << dtype_name(t);
    EXPECT_FALSE(can_quantize(t)) << dtype_name(t);
  }
}

}  // namespace
}  // namespace tmill
