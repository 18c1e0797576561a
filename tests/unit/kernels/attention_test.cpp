// Paged attention: every SIMD kernel against the scalar oracle (each ISA forced), the scalar oracle
// against a plain softmax(QK^T)V on the dequantized cache, and KV store/load round trips.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/cpu.h"
#include "core/fp16.h"
#include "core/fp8.h"
#include "kernels/attention.h"
#include "paged_cache.h"

using namespace tmill;
using tmill::test::PagedCache;
using tmill::test::make_paged_cache;
using tmill::test::naive_attention;

namespace {

struct Shape {
  int64_t hd, group, n_head_kv, bs;
};

}  // namespace

TEST(Attention, KernelsMatchTheOracleOnEveryIsa) {
  std::mt19937 rng(7);
  const Shape shapes[] = {{64, 7, 2, 16}, {128, 4, 2, 16}, {16, 1, 1, 16}, {64, 2, 3, 16}, {32, 3, 2, 8},
                         {8, 2, 4, 16}, {40, 3, 1, 16}, {24, 5, 2, 16}, {256, 16, 1, 16},
                         // groups wider than a SIMD kernel takes (Falcon-7B: 71 query heads on one KV head) and
                         // than the scalar kernel's stack state (80): both go in chunks
                         {64, 71, 1, 16}, {32, 80, 2, 16}, {64, 20, 2, 8},
                         // gemma4's 512-wide heads: 8 query heads per SIMD call, wider groups in chunks of 8
                         {512, 8, 1, 16}, {512, 4, 2, 16}, {512, 16, 1, 16}, {320, 12, 1, 16}};
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I8, DType::Q4_0, DType::F8_E4M3, DType::F8_E5M2}) {
    for (const Shape& sh : shapes) {
      for (int64_t n_ctx : {1, 15, 16, 17, 100}) {
        PagedCache c = make_paged_cache(t, sh.n_head_kv, sh.hd, sh.bs, n_ctx, rng);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        std::vector<float> q(static_cast<size_t>(sh.group * sh.hd));
        for (auto& x : q) x = nd(rng);
        const float scale = 1.0f / std::sqrt(static_cast<float>(sh.hd));
        const int64_t head = sh.n_head_kv - 1;
        std::vector<float> want(q.size()), got(q.size());
        paged_attention_group_reference(q.data(), sh.group, head, c.view, c.table.data(), n_ctx, scale, want.data());
        // the oracle itself against a float64 softmax over the stored values
        auto exact = naive_attention(c, q.data(), sh.group, head, n_ctx, scale);
        for (size_t i = 0; i < q.size(); ++i) ASSERT_NEAR(want[i], exact[i], 1e-4) << dtype_name(t);
        for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
          if (isa > detected_isa()) continue;
          set_isa_limit(isa);
          paged_attention_group(q.data(), sh.group, head, c.view, c.table.data(), n_ctx, scale, got.data());
          for (size_t i = 0; i < q.size(); ++i)
            ASSERT_NEAR(got[i], want[i], 2e-5 * (1 + std::abs(want[i])))
                << dtype_name(t) << " isa " << isa_name(isa) << " hd " << sh.hd << " group " << sh.group << " n_ctx "
                << n_ctx << " i " << i;
        }
        set_isa_limit(Isa::Avx512);
      }
    }
  }
}

// paged_attention_heads (a run of adjacent KV heads in one call, as the forward pass batches them)
// gives every head bitwise what paged_attention_group gives it alone, on every ISA: with windows,
// soft-capping, sinks, and runs too long for one kernel call (group * n_kv > 16 is split).
TEST(Attention, SeveralKvHeadsInOneCallAreEachHeadAlone) {
  std::mt19937 rng(11);
  struct Case {
    int64_t hd, group, n_head_kv, kv_head, n_kv;
  };
  const Case cases[] = {{128, 1, 16, 0, 16}, {128, 1, 16, 4, 8}, {64, 2, 8, 1, 5}, {64, 7, 2, 0, 2},
                        {40, 3, 4, 1, 3},    {64, 4, 8, 0, 8},   {16, 1, 20, 2, 18},
                        {512, 4, 4, 0, 4}};  // (gemma4's wide heads: a run of 2 x 4 query heads per call)
  for (DType t : {DType::F16, DType::F32, DType::BF16, DType::I8, DType::Q4_0, DType::F8_E4M3, DType::F8_E5M2}) {
    for (const Case& k : cases) {
      for (int64_t n_ctx : {1, 17, 100}) {
        PagedCache c = make_paged_cache(t, k.n_head_kv, k.hd, 16, n_ctx, rng);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        const int64_t heads = k.group * k.n_kv;
        std::vector<float> q(static_cast<size_t>(heads * k.hd)), sinks(static_cast<size_t>(heads));
        for (auto& x : q) x = nd(rng);
        for (auto& x : sinks) x = nd(rng);
        const float scale = 1.0f / std::sqrt(static_cast<float>(k.hd));
        for (int variant = 0; variant < 3; ++variant) {
          AttnMask mask;
          if (variant == 1) mask.begin = n_ctx > 5 ? n_ctx - 5 : 0;  // a sliding window
          if (variant == 2) mask.sinks = sinks.data();
          for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
            if (isa > detected_isa()) continue;
            set_isa_limit(isa);
            std::vector<float> want(q.size()), got(q.size(), -1.0f);
            for (int64_t j = 0; j < k.n_kv; ++j) {
              AttnMask mj = mask;
              if (mj.sinks) mj.sinks += j * k.group;
              paged_attention_group(q.data() + j * k.group * k.hd, k.group, k.kv_head + j, c.view, c.table.data(), n_ctx,
                                    scale, want.data() + j * k.group * k.hd, mj);
            }
            paged_attention_heads(q.data(), k.group, k.kv_head, k.n_kv, c.view, c.table.data(), n_ctx, scale, got.data(),
                                  mask);
            for (size_t i = 0; i < q.size(); ++i)
              ASSERT_EQ(got[i], want[i]) << dtype_name(t) << " isa " << isa_name(isa) << " hd " << k.hd << " group "
                                         << k.group << " n_kv " << k.n_kv << " n_ctx " << n_ctx << " variant " << variant
                                         << " i " << i;
          }
          set_isa_limit(Isa::Avx512);
        }
      }
    }
  }
}

// Sliding windows (the first block entered part-way, or at its start) and soft-capped scores: the
// oracle against float64, every ISA's kernel against the oracle (soft-capping takes the scalar kernel).
TEST(Attention, SlidingWindowAndSoftcapMatchTheOracleOnEveryIsa) {
  std::mt19937 rng(11);
  const Shape shapes[] = {{64, 4, 2, 16}, {32, 3, 2, 8}, {40, 2, 1, 16}, {256, 8, 1, 16}};
  for (DType t : {DType::F32, DType::F16, DType::I8, DType::F8_E4M3}) {
    for (const Shape& sh : shapes) {
      const int64_t n_ctx = 75;
      PagedCache c = make_paged_cache(t, sh.n_head_kv, sh.hd, sh.bs, n_ctx, rng);
      std::normal_distribution<float> nd(0.0f, 2.0f);
      std::vector<float> q(static_cast<size_t>(sh.group * sh.hd));
      for (auto& x : q) x = nd(rng);
      const float scale = 1.0f / std::sqrt(static_cast<float>(sh.hd));
      const int64_t head = sh.n_head_kv - 1;
      for (int64_t begin : {0, 1, 7, 15, 16, 17, 40, 74}) {
        for (float softcap : {0.0f, 2.0f}) {
          const AttnMask mask{begin, softcap};
          std::vector<float> want(q.size()), got(q.size());
          paged_attention_group_reference(q.data(), sh.group, head, c.view, c.table.data(), n_ctx, scale, want.data(), mask);
          auto exact = naive_attention(c, q.data(), sh.group, head, n_ctx, scale, AttnMask{.begin = begin, .softcap = softcap});
          for (size_t i = 0; i < q.size(); ++i) ASSERT_NEAR(want[i], exact[i], 1e-4) << dtype_name(t) << " begin " << begin;
          for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
            if (isa > detected_isa()) continue;
            set_isa_limit(isa);
            paged_attention_group(q.data(), sh.group, head, c.view, c.table.data(), n_ctx, scale, got.data(), mask);
            for (size_t i = 0; i < q.size(); ++i)
              ASSERT_NEAR(got[i], want[i], 2e-5 * (1 + std::abs(want[i])))
                  << dtype_name(t) << " isa " << isa_name(isa) << " hd " << sh.hd << " begin " << begin << " softcap "
                  << softcap << " i " << i;
          }
          set_isa_limit(Isa::Avx512);
        }
      }
    }
  }
}

// Scores that climb far beyond any first-block maximum, drop, and spike late: the kernels keep a
// softmax reference that moves only when a score exceeds it by a margin, so these force every path
// (first block, repeated moves, blocks far below the reference, a single late winner).
TEST(Attention, SoftmaxStaysExactWhenScoresClimbDropAndSpike) {
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const int64_t hd = 64, group = 7, n_ctx = 300;
  for (DType t : {DType::F32, DType::F16, DType::Q4_0}) {
    PagedCache c = make_paged_cache(t, 1, hd, 16, 0, rng);
    const int64_t blocks = (n_ctx + 15) / 16;
    c.k.assign(kv_tile_bytes(t, hd, 16) * static_cast<size_t>(blocks), 0);
    c.v.assign(c.k.size(), 0);
    c.view.k = c.k.data();
    c.view.v = c.v.data();
    c.view.n_head_kv = 1;
    c.table.clear();
    for (int64_t b = 0; b < blocks; ++b) c.table.push_back(static_cast<int32_t>(blocks - 1 - b));
    std::vector<float> q(static_cast<size_t>(group * hd));
    for (auto& x : q) x = nd(rng);
    // keys along the first query head's direction with a chosen score (scaled units), plus noise
    const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
    double qq = 0;
    for (int64_t i = 0; i < hd; ++i) qq += double(q[i]) * q[i];
    std::vector<float> k(hd), v(hd);
    for (int64_t p = 0; p < n_ctx; ++p) {
      double target = p < 200 ? 0.4 * p : p < 280 ? -20.0 : 20.0;  // climb to 80, drop, then 20
      if (p == 290) target = 120.0;                                 // late spike
      for (int64_t i = 0; i < hd; ++i) k[i] = static_cast<float>(q[i] * target / (qq * scale)) + 0.01f * nd(rng);
      for (auto& x : v) x = nd(rng);
      paged_kv_store(c.view, c.table.data(), p, k.data(), v.data());
    }
    for (int64_t ctx : {int64_t{40}, int64_t{200}, int64_t{285}, n_ctx}) {
      const auto exact = naive_attention(c, q.data(), group, 0, ctx, scale);  // over the stored (dequantized) values
      std::vector<float> got(q.size());
      for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
        if (isa > detected_isa()) continue;
        set_isa_limit(isa);
        paged_attention_group(q.data(), group, 0, c.view, c.table.data(), ctx, scale, got.data());
        for (size_t i = 0; i < q.size(); ++i)
          ASSERT_NEAR(got[i], exact[i], 1e-4 * (1 + std::abs(exact[i])))
              << dtype_name(t) << " isa " << isa_name(isa) << " ctx " << ctx << " i " << i;
      }
      set_isa_limit(detected_isa());
    }
  }
}

TEST(Attention, StoreLoadRoundTrip) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I8, DType::Q4_0, DType::F8_E4M3, DType::F8_E5M2}) {
    PagedCache c = make_paged_cache(t, 2, 64, 16, 0, rng);
    c.k.assign(kv_tile_bytes(t, 64, 16) * 2 * 8, 0);
    c.v.assign(c.k.size(), 0);
    c.view.k = c.k.data();
    c.view.v = c.v.data();
    c.table = {5, 1, 3};
    std::vector<float> k(128), v(128), k2(64), v2(64);
    for (int64_t pos : {0, 7, 15, 16, 33}) {
      for (auto& x : k) x = nd(rng);
      for (auto& x : v) x = nd(rng);
      paged_kv_store(c.view, c.table.data(), pos, k.data(), v.data());
      for (int64_t h = 0; h < 2; ++h) {
        paged_kv_load(c.view, c.table.data(), pos, h, k2.data(), v2.data());
        float kmax = 0, vmax = 0;
        for (int i = 0; i < 64; ++i) {
          kmax = std::max(kmax, std::abs(k[h * 64 + i]));
          vmax = std::max(vmax, std::abs(v[h * 64 + i]));
        }
        for (int i = 0; i < 64; ++i) {
          const float kv = k[h * 64 + i], vv = v[h * 64 + i];
          // f32 exact; f16 11-bit and bf16 8-bit mantissas; int8: half a step of max/127
          const float ktol = t == DType::F32 ? 0 : t == DType::F16 ? std::abs(kv) / 2048 : t == DType::BF16 ? std::abs(kv) / 256 : kmax / 254 * 1.0001f;
          const float vtol = t == DType::F32 ? 0 : t == DType::F16 ? std::abs(vv) / 2048 : t == DType::BF16 ? std::abs(vv) / 256 : vmax / 254 * 1.0001f;
          if (t == DType::Q4_0) {
            // half a step of d = (group max) / 8 (the group: 32 dimensions; d in f16), except at the
            // clamp: the extreme value gets code 0 (-8 d), so values of the other sign near the
            // maximum magnitude get code 15 (7 d), a whole step away
            float kg = 0, vg = 0;
            for (int j = i / 32 * 32; j < i / 32 * 32 + 32; ++j) {
              kg = std::max(kg, std::abs(k[h * 64 + j]));
              vg = std::max(vg, std::abs(v[h * 64 + j]));
            }
            const bool kclamp = std::abs(kv) > 6.5f * kg / 8, vclamp = std::abs(vv) > 6.5f * vg / 8;
            ASSERT_LE(std::abs(k2[i] - kv), (kclamp ? kg / 8 : kg / 16) * 1.01f) << "q4 k " << i;
            ASSERT_LE(std::abs(v2[i] - vv), (vclamp ? vg / 8 : vg / 16) * 1.01f) << "q4 v " << i;
            continue;
          }
          if (t == DType::F8_E4M3 || t == DType::F8_E5M2) {
            // half a step of the code nearest x / scale (scale = max / the largest code): 2^-4 (E4M3)
            // or 2^-3 (E5M2) of the value, or half the smallest subnormal step (2^-10, 2^-17) times scale
            const bool e4 = t == DType::F8_E4M3;
            const float rel = e4 ? 1.0f / 16 : 1.0f / 8, sub = e4 ? 1.0f / 1024 / 448 : 1.0f / 131072 / 57344;
            ASSERT_LE(std::abs(k2[i] - kv), std::max(std::abs(kv) * rel, kmax * sub) * 1.001f) << dtype_name(t) << " k " << i;
            ASSERT_LE(std::abs(v2[i] - vv), std::max(std::abs(vv) * rel, vmax * sub) * 1.001f) << dtype_name(t) << " v " << i;
            continue;
          }
          ASSERT_LE(std::abs(k2[i] - kv), ktol) << dtype_name(t);
          ASSERT_LE(std::abs(v2[i] - vv), vtol) << dtype_name(t);
        }
      }
    }
  }
}

TEST(Attention, Int8HoldsAboutTwiceTheTokensOfF16) {
  const double ratio = double(kv_tile_bytes(DType::F16, 64, 16)) / kv_tile_bytes(DType::I8, 64, 16);
  EXPECT_GT(ratio, 1.85);
  EXPECT_EQ(kv_tile_bytes(DType::F16, 128, 16), 128u * 16 * 2);
}

// --kv-cache-dtype fp8_e4m3 / fp8_e5m2: INT8's tile (a byte per value, an f32 scale per token), the
// value of largest magnitude mapped to the format's largest code, each value to core/fp8.h's nearest
// code of x / scale.
TEST(Attention, Fp8StoresScaledNearestCodesInInt8sLayout) {
  EXPECT_EQ(kv_tile_bytes(DType::F8_E4M3, 64, 16), kv_tile_bytes(DType::I8, 64, 16));
  EXPECT_EQ(kv_tile_bytes(DType::F8_E5M2, 128, 16), 128u * 16 + 16 * 4);
  EXPECT_TRUE(kv_type_supported(DType::F8_E4M3) && kv_type_supported(DType::F8_E5M2));
  const float x[8] = {-4.0f, 1.0f, 0.5f, 0.0f, -1.0f, 2.0f, 3.9f, -0.003f};
  for (DType t : {DType::F8_E4M3, DType::F8_E5M2}) {
    std::vector<uint8_t> k(kv_tile_bytes(t, 8, 16)), v(k.size());
    PagedKvView view{k.data(), v.data(), t, 1, 16, 8};
    const int32_t table[] = {0};
    paged_kv_store(view, table, 3, x, x);
    const float top = t == DType::F8_E4M3 ? 448.0f : 57344.0f, s = 4.0f / top, inv = 1.0f / s;
    float ks, vs;
    std::memcpy(&ks, k.data() + 8 * 16 + 3 * 4, 4);
    std::memcpy(&vs, v.data() + 8 * 16 + 3 * 4, 4);
    EXPECT_EQ(ks, s);
    EXPECT_EQ(vs, s);
    std::vector<float> k2(8), v2(8);
    paged_kv_load(view, table, 3, 0, k2.data(), v2.data());
    for (int d = 0; d < 8; ++d) {
      const uint8_t code = t == DType::F8_E4M3 ? fp32_to_fp8_e4m3(x[d] * inv) : fp32_to_fp8_e5m2(x[d] * inv);
      EXPECT_EQ(k[d * 16 + 3], code) << d;  // K: [d][t]
      EXPECT_EQ(v[3 * 8 + d], code) << d;   // V: [t][d]
      const float want = s * (t == DType::F8_E4M3 ? fp8_e4m3_to_fp32(code) : fp8_e5m2_to_fp32(code));
      EXPECT_EQ(k2[d], want) << d;
      EXPECT_EQ(v2[d], want) << d;
    }
    EXPECT_EQ(k[0 * 16 + 3], t == DType::F8_E4M3 ? 0xfe : 0xfb);  // -4 -> -448 / -57344: the largest code
  }
  // by hand: 1.0 * 448 / 4 = 112 = 1.75 * 2^6 -> E4M3 exponent 6 + 7 = 13, mantissa 6: 0x6e
  EXPECT_EQ(fp32_to_fp8_e4m3(1.0f * (1.0f / (4.0f / 448.0f))), 0x6e);
}

// Why fp8 rather than int8 at the same bytes: a head whose token holds an outlier channel (as trained
// keys do) keeps its small values' relative precision in fp8, where int8's step (max / 127) swallows
// them.
TEST(Attention, Fp8KeepsSmallValuesBesideAnOutlierBetterThanInt8) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(64);
  for (auto& e : x) e = nd(rng);
  x[17] = 60.0f;  // the outlier channel
  double err[2] = {0, 0};
  int i = 0;
  for (DType t : {DType::I8, DType::F8_E4M3}) {
    std::vector<uint8_t> k(kv_tile_bytes(t, 64, 16)), v(k.size());
    PagedKvView view{k.data(), v.data(), t, 1, 16, 64};
    const int32_t table[] = {0};
    paged_kv_store(view, table, 0, x.data(), x.data());
    std::vector<float> k2(64), v2(64);
    paged_kv_load(view, table, 0, 0, k2.data(), v2.data());
    for (int d = 0; d < 64; ++d)
      if (d != 17) err[i] += (k2[d] - x[d]) * (k2[d] - x[d]);
    ++i;
  }
  EXPECT_LT(err[1], err[0] / 2) << "int8 " << err[0] << " fp8 " << err[1];
}

TEST(Attention, Q4HoldsAboutThreeAndAHalfTimesTheTokensOfF16) {
  // 4-bit codes plus one f16 scale per 32 dimensions: 4.5 bits per value, as q4_0
  EXPECT_EQ(kv_tile_bytes(DType::Q4_0, 64, 16), 64u * 16 / 2 + 2 * 16 * 2);
  EXPECT_EQ(kv_tile_bytes(DType::Q4_0, 8, 16), 8u * 16 / 2 + 1 * 16 * 2);  // one group per head
  const double ratio = double(kv_tile_bytes(DType::F16, 128, 16)) / kv_tile_bytes(DType::Q4_0, 128, 16);
  EXPECT_NEAR(ratio, 16.0 / 4.5, 1e-9);
  EXPECT_TRUE(kv_type_supported(DType::Q4_0));
}

// The q4_0 rounding of one group, by hand: the value of largest magnitude maps to code 0 (-8 steps),
// d = max / -8, the others to min(15, x / d + 8.5).
TEST(Attention, Q4StoresQ4_0Codes) {
  std::vector<uint8_t> k(kv_tile_bytes(DType::Q4_0, 8, 16)), v(k.size());
  PagedKvView view{k.data(), v.data(), DType::Q4_0, 1, 16, 8};
  const int32_t table[] = {0};
  const float x[8] = {-4.0f, 1.0f, 0.5f, 0.0f, -1.0f, 2.0f, 3.9f, -0.24f};  // d = -4 / -8 = 0.5
  paged_kv_store(view, table, 3, x, x);  // token 3: the high nibbles of K's bytes
  // codes: x / 0.5 + 8.5 -> 0, 10, 9, 8, 6, 12, 15 (16.3 clamped), 8 (8.02)
  const int codes[8] = {0, 10, 9, 8, 6, 12, 15, 8};
  for (int d = 0; d < 8; ++d) {
    EXPECT_EQ(k[d * 8 + 1] >> 4, codes[d]) << d;                           // K: [d][t/2], t odd: high
    EXPECT_EQ(d % 2 ? v[3 * 4 + d / 2] >> 4 : v[3 * 4 + d / 2] & 15, codes[d]) << d;  // V: [t][d/2]
  }
  std::vector<float> k2(8), v2(8);
  paged_kv_load(view, table, 3, 0, k2.data(), v2.data());
  for (int d = 0; d < 8; ++d) {
    EXPECT_EQ(k2[d], 0.5f * (codes[d] - 8));
    EXPECT_EQ(v2[d], 0.5f * (codes[d] - 8));
  }
  // the neighbour token's nibbles are untouched
  paged_kv_store(view, table, 2, x, x);
  paged_kv_load(view, table, 3, 0, k2.data(), v2.data());
  EXPECT_EQ(k2[6], 0.5f * 7);
}
