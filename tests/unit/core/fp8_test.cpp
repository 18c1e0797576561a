// core/fp8.h: the KV cache's FP8 encoders against a brute-force nearest code, and the FP16 bit
// patterns the SIMD and CUDA readers widen against the exact decoders.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>

#include "core/dtype.h"
#include "core/fp16.h"
#include "core/fp8.h"

namespace tmill {
namespace {

// The code whose value is nearest f (ties: the even code), saturating at the largest finite value.
uint8_t nearest_code(float f, float (*decode)(uint8_t), float max) {
  const float a = std::fmin(std::fabs(f), max);
  int best = -1;
  double best_err = 0;
  for (int c = 0; c < 128; ++c) {
    const float v = decode(static_cast<uint8_t>(c));
    if (!std::isfinite(v) || v > max) continue;
    const double err = std::fabs(static_cast<double>(v) - a);
    if (best < 0 || err < best_err || (err == best_err && (c & 1) == 0)) {
      best = c;
      best_err = err;
    }
  }
  return static_cast<uint8_t>(best | (std::signbit(f) ? 0x80 : 0));
}

TEST(Fp8, EveryFiniteCodeRoundTrips) {
  for (int c = 0; c < 256; ++c) {
    const auto b = static_cast<uint8_t>(c);
    const float e4 = fp8_e4m3_to_fp32(b), e5 = fp8_e5m2_to_fp32(b);
    if (std::isfinite(e4)) {
      EXPECT_EQ(fp32_to_fp8_e4m3(e4), b) << "e4m3 code " << c;
    }
    if (std::isfinite(e5)) {
      EXPECT_EQ(fp32_to_fp8_e5m2(e5), b) << "e5m2 code " << c;
    }
  }
}

TEST(Fp8, RoundsToTheNearestCodeTiesToEvenAndSaturates) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mant(-1.0f, 1.0f);
  std::uniform_int_distribution<int> ex(-22, 18);
  for (int i = 0; i < 200000; ++i) {
    const float f = std::ldexp(mant(rng), ex(rng));
    ASSERT_EQ(fp32_to_fp8_e4m3(f), nearest_code(f, fp8_e4m3_to_fp32, kFp8E4M3Max)) << f;
    ASSERT_EQ(fp32_to_fp8_e5m2(f), nearest_code(f, fp8_e5m2_to_fp32, kFp8E5M2Max)) << f;
  }
  // exact midpoints between neighbouring codes go to the even one
  for (int c = 0; c < 0x7d; ++c) {
    const float mid = 0.5f * (fp8_e4m3_to_fp32(static_cast<uint8_t>(c)) + fp8_e4m3_to_fp32(static_cast<uint8_t>(c + 1)));
    EXPECT_EQ(fp32_to_fp8_e4m3(mid), (c & 1) ? c + 1 : c) << "between e4m3 codes " << c << " and " << c + 1;
    EXPECT_EQ(fp32_to_fp8_e4m3(-mid), ((c & 1) ? c + 1 : c) | 0x80);
  }
  EXPECT_EQ(fp32_to_fp8_e4m3(464.0f), 0x7e);  // past 448 (the next step would be the NaN code): saturated
  EXPECT_EQ(fp32_to_fp8_e4m3(-1e30f), 0xfe);
  EXPECT_EQ(fp32_to_fp8_e4m3(INFINITY), 0x7e);
  EXPECT_EQ(fp32_to_fp8_e5m2(1e9f), 0x7b);
  EXPECT_EQ(fp32_to_fp8_e4m3(NAN), 0x7f);
  EXPECT_EQ(fp32_to_fp8_e4m3(1e-40f), 0x00);  // an FP32 subnormal
  EXPECT_EQ(fp32_to_fp8_e4m3(-0.0f), 0x80);
  EXPECT_EQ(fp32_to_fp8_e4m3(std::ldexp(1.0f, -10)), 0x00);  // half the smallest subnormal: tie to 0
  EXPECT_EQ(fp32_to_fp8_e4m3(std::ldexp(1.5f, -10)), 0x01);
}

TEST(Fp8, Fp16PatternsWidenToTheCodesValues) {
  for (int c = 0; c < 256; ++c) {
    const auto b = static_cast<uint8_t>(c);
    const float e4 = fp8_e4m3_to_fp32(b);
    if (std::isfinite(e4)) {
      EXPECT_EQ(fp16_to_fp32(fp8_e4m3_f16_bits_div256(b)) * 256.0f, e4) << "e4m3 code " << c;
    }
    const float e5 = fp8_e5m2_to_fp32(b);
    if (!std::isnan(e5)) {
      EXPECT_EQ(fp16_to_fp32(fp8_e5m2_f16_bits(b)), e5) << "e5m2 code " << c;
    }
  }
}

TEST(Fp8, KvOnlyTypesAreNotFileTypes) {
  EXPECT_STREQ(dtype_name(DType::F8_E4M3), "F8_E4M3");
  EXPECT_EQ(dtype_info(DType::F8_E5M2).type_size, 1);
  EXPECT_EQ(dtype_info(static_cast<uint32_t>(DType::F8_E4M3)), nullptr);  // a GGUF tensor claiming it is refused
  EXPECT_FALSE(dtype_from_name("F8_E4M3").has_value());                    // nor a quantization target
}

}  // namespace
}  // namespace tmill
