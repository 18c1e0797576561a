// Quantizers: ggml reference semantics on hand-computed blocks, exact round trips for representable
// inputs, error bounds on random data, importance weighting and the threaded tensor helper.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/dtype.h"
#include "core/fp16.h"
#include "core/thread_pool.h"
#include "quant/blocks.h"
#include "quant/quant.h"

namespace tmill {
namespace {

std::vector<uint8_t> quant(DType t, const std::vector<float>& x, const float* imp = nullptr) {
  std::vector<uint8_t> out(*dtype_row_bytes(t, x.size()));
  EXPECT_EQ(quantize_row(t, x.data(), out.data(), static_cast<int64_t>(x.size()), imp), out.size());
  return out;
}

std::vector<float> roundtrip(DType t, const std::vector<float>& x, const float* imp = nullptr) {
  const auto q = quant(t, x, imp);
  std::vector<float> y(x.size());
  dequantize_row(t, q.data(), y.data(), static_cast<int64_t>(x.size()));
  return y;
}

double rel_rms(const std::vector<float>& x, const std::vector<float>& y) {
  double e = 0, s = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    e += (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
    s += double(x[i]) * x[i];
  }
  return std::sqrt(e / s);
}

std::vector<float> gaussian(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, sigma);
  std::vector<float> x(n);
  for (auto& v : x) v = nd(rng);
  return x;
}

// ---------------------------------------------------------------- ggml reference semantics

TEST(QuantRef, Q8_0HandValues) {
  std::vector<float> x(32, 0.0f);
  x[0] = 1.0f;
  x[1] = -0.5f;
  x[2] = 0.25f;
  x[3] = 3.0f;  // amax -> d = 3/127, id = 42.333...
  const auto q = quant(DType::Q8_0, x);
  BlockQ8_0 b;
  std::memcpy(&b, q.data(), sizeof b);
  EXPECT_EQ(b.d, fp32_to_fp16(3.0f / 127.0f));
  EXPECT_EQ(b.qs[0], 42);   // round(42.33)
  EXPECT_EQ(b.qs[1], -21);  // round(-21.17)
  EXPECT_EQ(b.qs[2], 11);   // round(10.58)
  EXPECT_EQ(b.qs[3], 127);
  EXPECT_EQ(b.qs[4], 0);
}

TEST(QuantRef, Q8_0RoundsHalfAwayFromZero) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;  // d = 1, id = 1
  x[1] = 2.5f;
  x[2] = -2.5f;
  x[3] = 0.5f;
  x[4] = 1.5f;
  const auto q = quant(DType::Q8_0, x);
  BlockQ8_0 b;
  std::memcpy(&b, q.data(), sizeof b);
  EXPECT_EQ(b.d, 0x3C00);
  EXPECT_EQ(b.qs[1], 3);   // roundf, not banker's rounding
  EXPECT_EQ(b.qs[2], -3);
  EXPECT_EQ(b.qs[3], 1);
  EXPECT_EQ(b.qs[4], 2);
}

TEST(QuantRef, Q8_1StoresScaledSum) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;
  x[1] = -27.0f;
  x[2] = 4.4f;
  const auto q = quant(DType::Q8_1, x);
  BlockQ8_1 b;
  std::memcpy(&b, q.data(), sizeof b);
  EXPECT_EQ(b.d, 0x3C00);
  EXPECT_EQ(b.qs[2], 4);
  EXPECT_EQ(fp16_to_fp32(b.s), 104.0f);  // (127 - 27 + 4) * 1
}

TEST(QuantRef, Q4_0NegativeExtreme) {
  // Largest magnitude is -8 -> d = -8 / -8 = 1, id = 1; q = min(15, trunc(x + 8.5)).
  std::vector<float> x(32, 0.0f);
  x[0] = -8.0f;  // 0.5 -> 0
  x[1] = 7.0f;   // 15.5 -> 15
  x[2] = 7.6f;   // 16.1 -> 16 -> clamped 15
  x[3] = -0.5f;  // 8.0 -> 8
  x[4] = 0.5f;   // 9.0 -> 9
  x[5] = -7.5f;  // 1.0 -> 1
  x[6] = -7.51f; // 0.99 -> 0
  x[16] = 2.49f; // 10.99 -> 10 (element 16 is the high nibble of byte 0)
  const auto q = quant(DType::Q4_0, x);
  BlockQ4_0 b;
  std::memcpy(&b, q.data(), sizeof b);
  EXPECT_EQ(b.d, 0x3C00);
  EXPECT_EQ(b.qs[0], 0x00 | (10 << 4));
  EXPECT_EQ(b.qs[1], 15 | (8 << 4));  // element 17 is 0 -> 8
  EXPECT_EQ(b.qs[2], 15 | (8 << 4));
  EXPECT_EQ(b.qs[3], 8 | (8 << 4));
  EXPECT_EQ(b.qs[4], 9 | (8 << 4));
  EXPECT_EQ(b.qs[5], 1 | (8 << 4));
  EXPECT_EQ(b.qs[6], 0 | (8 << 4));
}

TEST(QuantRef, Q4_0PositiveExtremeGivesNegativeScale) {
  // Largest magnitude +4 -> d = 4 / -8 = -0.5, id = -2; +4 maps exactly onto level 0.
  std::vector<float> x(32, 1.0f);
  x[0] = 4.0f;    // -8 + 8.5 -> 0    -> (0-8) * -0.5 = 4
  x[1] = -3.9f;   // 7.8 + 8.5 -> 16 -> 15 -> -3.5
  x[2] = 1.0f;    // -2 + 8.5 -> 6    -> 1
  const auto q = quant(DType::Q4_0, x);
  BlockQ4_0 b;
  std::memcpy(&b, q.data(), sizeof b);
  EXPECT_EQ(b.d, 0xB800);  // -0.5
  EXPECT_EQ(b.qs[0] & 15, 0);
  EXPECT_EQ(b.qs[1] & 15, 15);
  EXPECT_EQ(b.qs[2] & 15, 6);
  const auto y = roundtrip(DType::Q4_0, x);
  EXPECT_EQ(y[0], 4.0f);
  EXPECT_EQ(y[1], -3.5f);
  EXPECT_EQ(y[2], 1.0f);
}

TEST(QuantRef, Q4_1UsesUnroundedMin) {
  // min -2, max 5.5 -> d = 0.5, m = -2; q = min(15, trunc((x + 2) * 2 + 0.5)).
  std::vector<float> x(32, 0.0f);
  x[0] = -2.0f;
  x[1] = 5.5f;
  x[2] = 0.2f;   // 4.4 + 0.5 -> 4
  x[3] = 0.3f;   // 4.6 + 0.5 -> 5
  const auto q = quant(DType::Q4_1, x);
  BlockQ4_1 b;
  std::memcpy(&b, q.data(), sizeof b);
  EXPECT_EQ(b.d, 0x3800);
  EXPECT_EQ(b.m, 0xC000);
  EXPECT_EQ(b.qs[0] & 15, 0);
  EXPECT_EQ(b.qs[1] & 15, 15);
  EXPECT_EQ(b.qs[2] & 15, 4);
  EXPECT_EQ(b.qs[3] & 15, 5);
  EXPECT_EQ(b.qs[4] & 15, 4);  // 0 -> 4.5 -> 4
}

TEST(QuantRef, Q5_0PacksFifthBit) {
  // Largest magnitude -16 -> d = 1; q = min(31, trunc(x + 16.5)); element 20 = +15 -> 31 (bit 20 of qh).
  std::vector<float> x(32, 0.0f);
  x[0] = -16.0f;
  x[20] = 15.0f;
  x[5] = 3.0f;  // 19 -> fifth bit set at position 5
  const auto q = quant(DType::Q5_0, x);
  BlockQ5_0 b;
  std::memcpy(&b, q.data(), sizeof b);
  uint32_t qh;
  std::memcpy(&qh, b.qh, 4);
  EXPECT_EQ(b.d, 0x3C00);
  // Zeros quantize to 16 (fifth bit set) except element 0 (level 0).
  EXPECT_EQ(qh, 0xFFFFFFFEu);
  EXPECT_EQ(b.qs[0], 0x00 | (0 << 4));       // element 0: 0; element 16: 16 & 15 = 0
  EXPECT_EQ(b.qs[4], 0x0 | (15 << 4));       // element 4: 16 -> 0; element 20: 31 -> 15
  EXPECT_EQ(b.qs[5], 3 | (0 << 4));          // element 5: 19 -> 3
}

// ---------------------------------------------------------------- exact round trips

TEST(QuantRoundTrip, FloatTypesExactWhenRepresentable) {
  std::vector<float> x = {1.0f, -2.5f, 0.0f, 65504.0f, 0.333251953125f, -6.103515625e-05f, 3.140625f, 512.5f};
  EXPECT_EQ(roundtrip(DType::F32, x), x);
  EXPECT_EQ(roundtrip(DType::F16, x), x);
  std::vector<float> b = {1.0f, -2.5f, 0.0f, 3.140625f, 1.0e30f, -7.5e-30f};
  for (auto& v : b) v = bf16_to_fp32(fp32_to_bf16(v));
  EXPECT_EQ(roundtrip(DType::BF16, b), b);
}

TEST(QuantRoundTrip, BlockFormatsExactOnTheirGrid) {
  std::mt19937 rng(7);
  // Q8_0: k * d with the extreme +-127 present and d a power of two.
  {
    std::vector<float> x(64);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(int(rng() % 255) - 127) * 0.0625f;
    x[0] = 127 * 0.0625f;
    x[40] = -127 * 0.0625f;
    EXPECT_EQ(roundtrip(DType::Q8_0, x), x);
    EXPECT_EQ(roundtrip(DType::Q8_1, x), x);
  }
  // Q4_0 / Q5_0: (q - 8|16) * d with the negative extreme present.
  for (auto [t, half] : {std::pair{DType::Q4_0, 8}, std::pair{DType::Q5_0, 16}}) {
    std::vector<float> x(64);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(int(rng() % (2 * half)) - half) * 0.25f;
    x[3] = -half * 0.25f;
    x[35] = -half * 0.25f;
    EXPECT_EQ(roundtrip(t, x), x) << dtype_name(t);
  }
  // Q4_1 / Q5_1: min + q * d with both ends present.
  for (auto [t, top] : {std::pair{DType::Q4_1, 15}, std::pair{DType::Q5_1, 31}}) {
    std::vector<float> x(64);
    for (size_t i = 0; i < x.size(); ++i) x[i] = -3.0f + static_cast<float>(rng() % (top + 1)) * 0.5f;
    for (int b = 0; b < 2; ++b) {
      x[32 * b + 1] = -3.0f;
      x[32 * b + 2] = -3.0f + top * 0.5f;
    }
    EXPECT_EQ(roundtrip(t, x), x) << dtype_name(t);
  }
  // Q8_K: integers with the extreme -127 (max magnitude negative -> iscale = 1).
  {
    std::vector<float> x(256);
    for (auto& v : x) v = static_cast<float>(int(rng() % 255) - 127);
    x[9] = -127.0f;
    EXPECT_EQ(roundtrip(DType::Q8_K, x), x);
  }
}

TEST(QuantRoundTrip, RequantizingDequantizedBlocksGivesTheSameBytes) {
  // The symmetric formats map the extreme value exactly onto a level, so quantize(dequantize(q)) == q.
  const auto x = gaussian(8 * 4096, 23);
  for (DType t : {DType::Q8_0, DType::Q4_0, DType::Q5_0}) {
    const auto q = quant(t, x);
    std::vector<float> y(x.size());
    dequantize_row(t, q.data(), y.data(), static_cast<int64_t>(y.size()));
    EXPECT_EQ(quant(t, y), q) << dtype_name(t);
  }
}

TEST(QuantRoundTrip, ZerosStayZero) {
  const std::vector<float> x(512, 0.0f);
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q8_0, DType::Q8_1, DType::Q2_K,
                  DType::Q3_K, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q8_K, DType::IQ4_NL, DType::IQ4_XS,
                  DType::MXFP4}) {
    const auto y = roundtrip(t, x);
    for (float v : y) ASSERT_EQ(v, 0.0f) << dtype_name(t);
  }
}

TEST(QuantRoundTrip, Q8_KBlockSums) {
  const auto x = gaussian(512, 3);
  const auto q = quant(DType::Q8_K, x);
  for (int i = 0; i < 2; ++i) {
    BlockQ8_K b;
    std::memcpy(&b, q.data() + i * sizeof(BlockQ8_K), sizeof b);
    for (int j = 0; j < 16; ++j) {
      int s = 0;
      for (int k = 0; k < 16; ++k) s += b.qs[16 * j + k];
      EXPECT_EQ(b.bsums[j], s);
    }
  }
  std::vector<uint8_t> q2(q.size());
  quantize_row_q8_K(x.data(), q2.data(), 512);
  EXPECT_EQ(q, q2);
}

// ---------------------------------------------------------------- error bounds on random data

struct Bound {
  DType type;
  double max_rel_rms;
};

// Measured on N(0,1) rows of 4096 (seed 42): Q8_0 0.54%, Q4_0 8.6%, Q4_1 7.8%, Q5_0 4.3%,
// Q5_1 3.8%, Q2_K 29.8%, Q3_K 15.1%, Q4_K 7.1%, Q5_K 3.6%, Q6_K 1.77%, Q8_K 0.69%, F16 0.021%,
// BF16 0.17%, IQ4_NL 7.64%, IQ4_XS 7.69%. Bounds are the measurement plus ~8%.
class QuantError : public testing::TestWithParam<Bound> {};

TEST_P(QuantError, RandomGaussianWithinBound) {
  const auto [t, bound] = GetParam();
  const auto x = gaussian(16 * 4096, 42);
  const auto y = roundtrip(t, x);
  const double e = rel_rms(x, y);
  RecordProperty("rel_rms", std::to_string(e));
  EXPECT_LT(e, bound) << dtype_name(t);
  EXPECT_GT(e, 0.0) << dtype_name(t);
}

INSTANTIATE_TEST_SUITE_P(
    Types, QuantError,
    testing::Values(Bound{DType::Q8_0, 0.0058}, Bound{DType::Q8_1, 0.0058}, Bound{DType::Q4_0, 0.093},
                    Bound{DType::Q4_1, 0.084}, Bound{DType::Q5_0, 0.046}, Bound{DType::Q5_1, 0.041},
                    Bound{DType::Q2_K, 0.32}, Bound{DType::Q3_K, 0.163}, Bound{DType::Q4_K, 0.077},
                    Bound{DType::Q5_K, 0.039}, Bound{DType::Q6_K, 0.019}, Bound{DType::Q8_K, 0.0075},
                    Bound{DType::F16, 0.00023}, Bound{DType::BF16, 0.0018}, Bound{DType::IQ4_NL, 0.083},
                    Bound{DType::IQ4_XS, 0.083}),
    [](const testing::TestParamInfo<Bound>& i) { return std::string(dtype_name(i.param.type)); });

TEST(QuantError, HigherBitTypesAreMoreAccurate) {
  const auto x = gaussian(8 * 4096, 5);
  const double q2 = rel_rms(x, roundtrip(DType::Q2_K, x)), q3 = rel_rms(x, roundtrip(DType::Q3_K, x)),
               q4 = rel_rms(x, roundtrip(DType::Q4_K, x)), q5 = rel_rms(x, roundtrip(DType::Q5_K, x)),
               q6 = rel_rms(x, roundtrip(DType::Q6_K, x)), q8 = rel_rms(x, roundtrip(DType::Q8_0, x));
  EXPECT_LT(q3, q2);
  EXPECT_LT(q4, q3);
  EXPECT_LT(q5, q4);
  EXPECT_LT(q6, q5);
  EXPECT_LT(q8, q6);
  // K-quants beat the legacy formats of the same width.
  EXPECT_LT(q4, rel_rms(x, roundtrip(DType::Q4_0, x)));
  EXPECT_LT(q5, rel_rms(x, roundtrip(DType::Q5_0, x)));
}

TEST(QuantError, NonLinear4BitBeatsQ4_0) {
  // The non-linear levels fit Gaussian weights better than Q4_0's uniform grid at the same width.
  const auto x = gaussian(8 * 4096, 5);
  const double q4_0 = rel_rms(x, roundtrip(DType::Q4_0, x));
  EXPECT_LT(rel_rms(x, roundtrip(DType::IQ4_NL, x)), q4_0);
  EXPECT_LT(rel_rms(x, roundtrip(DType::IQ4_XS, x)), q4_0);
}

TEST(QuantRef, IQ4_NLExtremeMapsOntoLevel) {
  // A block of levels times d with the extreme -127 * d present: the start scale is exact, no other
  // candidate fits better, so the block round-trips exactly; zero blocks store index 8 (the level
  // nearest 0) with d = 0, as ggml does.
  std::vector<float> x(64, 0.0f);
  std::mt19937 rng(3);
  for (int j = 0; j < 32; ++j) x[j] = 0.5f * kIq4nlValues[rng() % 16];
  x[5] = 0.5f * -127;
  const auto q = quant(DType::IQ4_NL, x);
  BlockIQ4_NL b[2];
  std::memcpy(b, q.data(), sizeof b);
  EXPECT_EQ(fp16_to_fp32(b[0].d), 0.5f);
  EXPECT_EQ(b[1].d & 0x7FFF, 0);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(b[1].qs[j], 0x88) << j;
  EXPECT_EQ(roundtrip(DType::IQ4_NL, x), x);
}

TEST(QuantRef, IQ4_XSScalesRelativeToLargest) {
  // Blocks scaled by 1..8 of levels: the largest block scale gets the 6-bit value -32 (stored 0),
  // d = -max_scale / 32, and block j's scale is the nearest multiple of d.
  std::vector<float> x(256);
  std::mt19937 rng(4);
  for (int b = 0; b < 8; ++b)
    for (int j = 0; j < 32; ++j) x[32 * b + j] = 0.125f * (b + 1) * kIq4nlValues[rng() % 16];
  for (int b = 0; b < 8; ++b) x[32 * b] = 0.125f * (b + 1) * -127;
  const auto q = quant(DType::IQ4_XS, x);
  BlockIQ4_XS blk;
  std::memcpy(&blk, q.data(), sizeof blk);
  EXPECT_EQ(fp16_to_fp32(blk.d), -1.0f / 32);  // max scale 1.0 (block 7: 8 * 0.125)
  EXPECT_EQ(iq4xs_scale(7, blk), -32);
  EXPECT_EQ(iq4xs_scale(3, blk), -16);  // 0.5 / (-1/32)
  EXPECT_EQ(iq4xs_scale(0, blk), -4);
  EXPECT_EQ(roundtrip(DType::IQ4_XS, x), x);  // every scale is an exact multiple of d
}

TEST(QuantRef, MXFP4ExponentAndNearestCode) {
  // Block 0: amax 5 -> e = floor(log2 5) - 2 + 127 = 127 (unit 1: codes are the E2M1 values);
  // 2.4 sits between 2 and 3 -> 2, 2.5 is a tie -> the first code (2), 5 between 4 and 6 is a tie
  // -> 4, 0.2 -> 0 (+0 before -0), -0.8 -> -1, -5 -> -4. Block 1: amax 0.75 -> e = 124 (unit 1/8).
  std::vector<float> x(64, 0.0f);
  x[0] = 2.4f; x[1] = 2.5f; x[2] = 5.0f; x[3] = 0.2f; x[4] = -0.8f; x[17] = -5.0f;
  for (int j = 0; j < 32; ++j) x[32 + j] = 0.75f * ((j % 5) - 2) / 2;  // -0.75 .. 0.75 in steps of 0.375
  const auto q = quant(DType::MXFP4, x);
  BlockMXFP4 b[2];
  std::memcpy(b, q.data(), sizeof b);
  EXPECT_EQ(b[0].e, 127);
  EXPECT_EQ(b[1].e, 124);
  EXPECT_EQ(b[0].qs[0] & 0xF, 4);   // 2.0
  EXPECT_EQ(b[0].qs[1] & 0xF, 4);   // 2.5 -> 2.0 (tie, first code)
  EXPECT_EQ(b[0].qs[2] & 0xF, 6);   // 5 -> 4.0 (tie)
  EXPECT_EQ(b[0].qs[3] & 0xF, 0);   // +0
  EXPECT_EQ(b[0].qs[4] & 0xF, 10);  // -1.0
  EXPECT_EQ(b[0].qs[1] >> 4, 14);   // x[17] = -5 -> -4.0 (tie)
  EXPECT_EQ(b[0].qs[0] >> 4, 0);    // x[16] = 0
  // Block 1's values are on the grid (0, 0.375 = 3 units, 0.75 = 6 units): exact.
  const auto y = roundtrip(DType::MXFP4, x);
  for (int j = 32; j < 64; ++j) EXPECT_EQ(y[j], x[j]) << j;
  EXPECT_EQ(y[0], 2.0f);
  EXPECT_EQ(y[2], 4.0f);
  EXPECT_EQ(y[17], -4.0f);
}

TEST(QuantRef, MXFP4ExponentClampsAtTheEnds) {
  // Below 2^-125 ggml's exponent would be negative (an undefined cast): 0 here, the smallest scale.
  // An infinite element gives 255. Just above, 2^-125 itself is ggml's e = 0 exactly.
  std::vector<float> x(96, 0.0f);
  x[0] = std::ldexp(1.0f, -130);
  x[32] = std::ldexp(1.0f, -125);
  x[64] = std::numeric_limits<float>::infinity();
  const auto q = quant(DType::MXFP4, x);
  EXPECT_EQ(q[0], 0);
  EXPECT_EQ(q[17], 0);
  EXPECT_EQ(q[34], 255);
  // 2^-130 against the unit 2^-127 (values 0, 2^-128, ...): nearest is 0.
  EXPECT_EQ(q[1] & 0xF, 0);
}

TEST(QuantError, MXFP4RandomGaussian) {
  // E2M1 with a power-of-two scale: coarser than the 4-bit types with a free f16 scale.
  // Measured on N(0,1) (seed 42): 11.4 %; the bound is that plus ~8 %.
  const auto x = gaussian(8 * 4096, 42);
  const double err = rel_rms(x, roundtrip(DType::MXFP4, x));
  EXPECT_GT(err, 0.05);
  EXPECT_LT(err, 0.124);
}

TEST(QuantError, ScaleInvariant) {
  // Scaling the input by a power of two scales the (de)quantized output by the same factor as long
  // as the fp16 block scales stay normal.
  const auto x = gaussian(1024, 9);
  std::vector<float> x4(x.size());
  for (size_t i = 0; i < x.size(); ++i) x4[i] = 4.0f * x[i];
  for (DType t : {DType::Q4_0, DType::Q8_0, DType::Q4_K, DType::Q6_K}) {
    const auto y = roundtrip(t, x), y4 = roundtrip(t, x4);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(4.0f * y[i], y4[i]) << dtype_name(t) << " " << i;
  }
}

// ---------------------------------------------------------------- importance weighting

double weighted_err(const std::vector<float>& x, const std::vector<float>& y, const std::vector<float>& w,
                    size_t cols) {
  double e = 0;
  for (size_t i = 0; i < x.size(); ++i) e += w[i % cols] * (double(x[i]) - y[i]) * (double(x[i]) - y[i]);
  return e;
}

TEST(QuantImportance, ReducesImportanceWeightedError) {
  const size_t cols = 1024, rows = 32;
  // Every 8th column carries 50x the activation energy.
  std::vector<float> imp(cols);
  for (size_t c = 0; c < cols; ++c) imp[c] = c % 8 == 0 ? 50.0f : 1.0f;
  const auto x = gaussian(rows * cols, 11);
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q5_1, DType::Q2_K, DType::Q3_K, DType::Q4_K,
                  DType::Q5_K, DType::Q6_K, DType::IQ4_NL, DType::IQ4_XS}) {
    std::vector<float> y_plain(x.size()), y_imp(x.size());
    const size_t rb = *dtype_row_bytes(t, cols);
    std::vector<uint8_t> q(rb);
    for (size_t r = 0; r < rows; ++r) {
      quantize_row(t, x.data() + r * cols, q.data(), cols, nullptr);
      dequantize_row(t, q.data(), y_plain.data() + r * cols, cols);
      quantize_row(t, x.data() + r * cols, q.data(), cols, imp.data());
      dequantize_row(t, q.data(), y_imp.data() + r * cols, cols);
    }
    const double ep = weighted_err(x, y_plain, imp, cols), ei = weighted_err(x, y_imp, imp, cols);
    EXPECT_LT(ei, 0.9 * ep) << dtype_name(t) << " plain " << ep << " imatrix " << ei;
  }
}

TEST(QuantImportance, IgnoredByTypesWithoutWeightedSearch) {
  const auto x = gaussian(512, 13);
  std::vector<float> imp(512, 3.0f);
  imp[7] = 100.0f;
  for (DType t : {DType::F16, DType::BF16, DType::Q8_0, DType::Q8_1, DType::Q8_K})
    EXPECT_EQ(quant(t, x, imp.data()), quant(t, x)) << dtype_name(t);
}

TEST(QuantImportance, UniformImportanceStaysClose) {
  // A flat importance vector still goes through the weighted search; quality must stay comparable.
  const auto x = gaussian(8 * 4096, 17);
  std::vector<float> imp(x.size(), 1.0f);
  for (DType t : {DType::Q4_0, DType::Q4_K, DType::Q5_K, DType::Q6_K, DType::Q3_K, DType::Q2_K, DType::IQ4_NL,
                  DType::IQ4_XS}) {
    const double plain = rel_rms(x, roundtrip(t, x)), weighted = rel_rms(x, roundtrip(t, x, imp.data()));
    EXPECT_LT(weighted, plain * 1.1) << dtype_name(t);
  }
}

// ---------------------------------------------------------------- tensor helper

TEST(QuantTensor, ThreadedMatchesRowByRow) {
  const int64_t rows = 96, cols = 512;
  const auto x = gaussian(rows * cols, 21);
  std::vector<float> imp(cols);
  for (int64_t c = 0; c < cols; ++c) imp[c] = 1.0f + static_cast<float>(c % 5);
  ThreadPool pool(3);
  for (DType t : {DType::Q4_0, DType::Q4_K, DType::Q6_K, DType::Q8_0, DType::F16}) {
    const size_t rb = *dtype_row_bytes(t, cols);
    std::vector<uint8_t> serial(rb * rows), threaded(rb * rows);
    for (int64_t r = 0; r < rows; ++r) quantize_row(t, x.data() + r * cols, serial.data() + r * rb, cols, imp.data());
    EXPECT_EQ(quantize_tensor(t, x.data(), threaded.data(), rows, cols, imp.data(), &pool), rb * rows);
    EXPECT_EQ(serial, threaded) << dtype_name(t);
    std::vector<float> a(rows * cols), b(rows * cols);
    dequantize_row(t, serial.data(), a.data(), rows * cols);
    dequantize_tensor(t, threaded.data(), b.data(), rows * cols, &pool);
    EXPECT_EQ(a, b) << dtype_name(t);
  }
}

}  // namespace
}  // namespace tmill
