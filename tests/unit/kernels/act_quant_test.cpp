// Activation quantizers (kernels/kernel_abi.h): the record layout against hand-computed values, and
// the SIMD versions byte for byte against the scalar one (same f32 operations, round to nearest even).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/cpu.h"
#include "kernels/dispatch.h"

using namespace tmill;
using namespace tmill::kern;

namespace {

std::vector<float> random_x(int T, int64_t ldx, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<float> x(static_cast<size_t>(T * ldx));
  for (auto& v : x) v = nd(rng);
  // block 0 of token 0: amax 127 (scale exactly 1) with exact ties 2.5 and -3.5; token 1: a zero block
  x[5] = 127.0f;
  x[6] = 2.5f;
  x[7] = -3.5f;
  for (int i = 32; i < 64 && T > 1; ++i) x[static_cast<size_t>(ldx) + i] = 0.0f;
  return x;
}

template <class V>
V at(const std::vector<uint8_t>& b, size_t off) {
  V v;
  std::memcpy(&v, b.data() + off, sizeof v);
  return v;
}

TEST(ActQuant, Q8RecordLayoutByHand) {
  // One token, one block: x[i] = i - 16 (amax 16): q = round(x * 127 / 16), d = 16/127.
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = static_cast<float>(i - 16);
  std::vector<uint8_t> rec(kQ8RecordBytes);
  quant_act_q8_scalar(x.data(), 32, 1, 32, 8, rec.data());
  int sum = 0;
  for (int i = 0; i < 32; ++i) {
    const int q = static_cast<int>(std::nearbyint((i - 16) * (127.0f / 16.0f)));
    EXPECT_EQ(static_cast<int8_t>(rec[i]), q) << i;
    sum += q;
  }
  EXPECT_EQ(at<float>(rec, 32), 16.0f / 127.0f);
  EXPECT_EQ(at<int32_t>(rec, 36), -8 * sum);
}

TEST(ActQuant, Q8KRecordLayoutByHand) {
  std::vector<float> x(256);
  for (int i = 0; i < 256; ++i) x[i] = static_cast<float>((i * 37) % 255 - 127);  // amax 127 -> q = x
  std::vector<uint8_t> rec(kQ8KRecordBytes);
  quant_act_q8k_scalar(x.data(), 256, 1, 256, rec.data());
  for (int i = 0; i < 256; ++i) EXPECT_EQ(static_cast<int8_t>(rec[i]), static_cast<int>(x[i])) << i;
  EXPECT_EQ(at<float>(rec, 256), 1.0f);
  for (int j = 0; j < 8; ++j) {
    int s = 0;
    for (int i = 0; i < 32; ++i) s += static_cast<int>(x[32 * j + i]);
    EXPECT_EQ(at<int16_t>(rec, 260 + 2 * j), s) << j;
  }
  for (int j = 0; j < 16; ++j) {
    int s = 0;
    for (int i = 0; i < 16; ++i) s += static_cast<int>(x[16 * j + i]);
    EXPECT_EQ(at<int32_t>(rec, 276 + 4 * j), -32 * s) << j;
  }
}

TEST(ActQuant, SimdMatchesScalarByteForByte) {
  const int64_t cols = 768, ldx = 770;
  for (int T = 1; T <= kTile; ++T) {
    const std::vector<float> x = random_x(T, ldx, static_cast<uint32_t>(T));
    const size_t q8 = static_cast<size_t>(cols / 32 * T * kQ8RecordBytes);
    const size_t q8k = static_cast<size_t>(cols / 256 * T * kQ8KRecordBytes);
    std::vector<uint8_t> ref(q8), ref_k(q8k);
    quant_act_q8_scalar(x.data(), ldx, T, cols, 128, ref.data());
    quant_act_q8k_scalar(x.data(), ldx, T, cols, ref_k.data());
    EXPECT_EQ(static_cast<int8_t>(ref[6]), 2);  // ties round to even
    EXPECT_EQ(static_cast<int8_t>(ref[7]), -4);
    for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
      if (isa > detected_isa()) continue;  // only Scalar where the CPU (or build) has no SIMD level
      const KernelTable& k = kernel_table(isa);
      std::vector<uint8_t> a(q8), ak(q8k);
      k.quant_act_q8(x.data(), ldx, T, cols, 128, a.data());
      k.quant_act_q8k(x.data(), ldx, T, cols, ak.data());
      EXPECT_EQ(a, ref) << isa_name(isa) << " T=" << T;
      EXPECT_EQ(ak, ref_k) << isa_name(isa) << " T=" << T;
    }
  }
}

}  // namespace
