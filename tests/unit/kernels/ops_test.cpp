// Row operations with per-ISA versions (kernels/ops.h): every ISA against plain scalar formulas.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/cpu.h"
#include "core/fp16.h"
#include "isa_levels.h"
#include "kernels/ops.h"

using namespace tmill;
using tmill::test::available_isas;
using tmill::test::IsaGuard;

TEST(Ops, ArgmaxIsTheFirstLargestElementOnEveryIsa) {
  IsaGuard guard;
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.0f, 4.0f);
  std::vector<int64_t> lengths;
  for (int64_t n = 1; n <= 70; ++n) lengths.push_back(n);
  lengths.push_back(151936);  // Qwen2 vocabulary
  lengths.push_back(32000);
  for (int64_t n : lengths) {
    for (int variant = 0; variant < 4; ++variant) {
      std::vector<float> x(static_cast<size_t>(n));
      for (auto& v : x) v = nd(rng);
      if (variant == 1) {  // ties: the maximum appears several times, the first one must win
        const float m = *std::max_element(x.begin(), x.end()) + 1.0f;
        for (int k = 0; k < 3; ++k) x[rng() % x.size()] = m;
      } else if (variant == 2) {  // masked logits: -inf everywhere but a few
        for (auto& v : x) v = -std::numeric_limits<float>::infinity();
        x[rng() % x.size()] = nd(rng);
      } else if (variant == 3) {  // all -inf: index 0
        for (auto& v : x) v = -std::numeric_limits<float>::infinity();
      }
      const int64_t want = std::max_element(x.begin(), x.end()) - x.begin();
      for (Isa isa : available_isas()) {
        set_isa_limit(isa);
        ASSERT_EQ(argmax(x.data(), n), want) << "n " << n << " variant " << variant << " isa " << isa_name(isa);
      }
    }
  }
}

TEST(Ops, SiluMulAndExpMatchTheFormulaOnEveryIsa) {
  IsaGuard guard;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> ud(-20.0f, 20.0f);
  for (int64_t n : {1, 7, 16, 17, 100, 4864}) {
    std::vector<float> g(static_cast<size_t>(n)), u(g.size());
    for (auto& v : g) v = ud(rng);
    for (auto& v : u) v = ud(rng);
    for (Isa isa : available_isas()) {
      set_isa_limit(isa);
      std::vector<float> got = g;
      silu_mul(got.data(), u.data(), n);
      std::vector<float> e(g.size());
      exp_shift_scale(g.data(), 3.0f, 0.5f, e.data(), n);
      for (size_t i = 0; i < g.size(); ++i) {
        const double want = g[i] / (1.0 + std::exp(-static_cast<double>(g[i]))) * u[i];
        ASSERT_NEAR(got[i], want, 2e-6 * (1 + std::abs(want))) << isa_name(isa) << " i " << i;
        const double we = std::exp((static_cast<double>(g[i]) - 3.0) * 0.5);
        ASSERT_NEAR(e[i], we, 2e-6 * we + 1e-30) << isa_name(isa) << " i " << i;
      }
    }
  }
}

// GeGLU's gelu (tanh approximation, as ggml) times up, and soft-capping, against the formulas in double.
TEST(Ops, GeluMulAndSoftcapMatchTheFormulaOnEveryIsa) {
  IsaGuard guard;
  std::mt19937 rng(6);
  std::uniform_real_distribution<float> ud(-12.0f, 12.0f);
  for (int64_t n : {1, 7, 16, 17, 100, 6912}) {
    std::vector<float> g(static_cast<size_t>(n)), u(g.size());
    for (auto& v : g) v = ud(rng);
    for (auto& v : u) v = ud(rng);
    for (Isa isa : available_isas()) {
      set_isa_limit(isa);
      std::vector<float> got = g, capped = g;
      gelu_mul(got.data(), u.data(), n);
      softcap_inplace(capped.data(), n, 5.0f);
      for (size_t i = 0; i < g.size(); ++i) {
        const double x = g[i];
        const double want = 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))) * u[i];
        ASSERT_NEAR(got[i], want, 2e-6 * (1 + std::abs(want))) << isa_name(isa) << " i " << i;
        ASSERT_NEAR(capped[i], 5.0 * std::tanh(x / 5.0), 2e-6) << isa_name(isa) << " i " << i;
      }
    }
  }
}

TEST(Ops, RmsnormRowsMatchesTheFormulaInDouble) {
  IsaGuard guard;
  for (Isa isa : available_isas()) {
    set_isa_limit(isa);
    std::mt19937 rng(9);
    std::uniform_real_distribution<float> ud(-3.0f, 3.0f);
    for (int64_t n : {1, 5, 16, 17, 64, 172, 896}) {
      const int64_t rows = 3, ldx = n + 3, ldo = n + 1;  // strided rows
      std::vector<float> x(static_cast<size_t>(rows * ldx)), w(static_cast<size_t>(n));
      std::vector<float> out(static_cast<size_t>(rows * ldo));
      for (auto& v : x) v = ud(rng);
      for (auto& v : w) v = ud(rng);
      const float eps = 1e-6f;
      rmsnorm_rows(x.data(), ldx, w.data(), out.data(), ldo, rows, n, eps);
      for (int64_t r = 0; r < rows; ++r) {
        double ss = 0;
        for (int64_t j = 0; j < n; ++j) ss += static_cast<double>(x[r * ldx + j]) * x[r * ldx + j];
        const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
        for (int64_t j = 0; j < n; ++j) {
          const double want = w[j] * inv * x[r * ldx + j];
          ASSERT_NEAR(out[r * ldo + j], want, 2e-6 * (1 + std::abs(want)))
              << isa_name(isa) << " n " << n << " r " << r << " j " << j;
        }
      }
    }
    // In place (out == x), as the q/k norms use it.
    std::vector<float> x = {3.0f, -4.0f};
    const std::vector<float> w = {1.0f, 2.0f};
    rmsnorm_rows(x.data(), 2, w.data(), x.data(), 2, 1, 2, 0.0f);
    EXPECT_NEAR(x[0], 3.0 / std::sqrt(12.5), 1e-6);
    EXPECT_NEAR(x[1], -8.0 / std::sqrt(12.5), 1e-6);
  }
}

// The residual stream's operations must not depend on the ISA a machine happens to have: a model
// served on an AVX2 host gives the same greedy output as on AVX-512. The SIMD versions keep the
// generic loops' operation order, so the bits are equal, not just close.
TEST(Ops, RmsnormAddAxpyAndRopeGiveTheSameBitsOnEveryIsa) {
  IsaGuard guard;
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  auto fill = [&](std::vector<float>& v) {
    for (auto& e : v) e = nd(rng);
  };
  for (int64_t n : {1, 5, 8, 15, 16, 17, 31, 33, 64, 172, 896, 4864}) {
    const int64_t rows = 3, ldx = n + 3, ldo = n + 1;
    std::vector<float> x(static_cast<size_t>(rows * ldx)), w(static_cast<size_t>(n)), y(x.size());
    fill(x);
    fill(w);
    fill(y);
    std::vector<float> want_norm, want_inplace, want_add, want_axpy;
    for (Isa isa : available_isas()) {
      set_isa_limit(isa);
      std::vector<float> out(static_cast<size_t>(rows * ldo), -1.0f);
      rmsnorm_rows(x.data(), ldx, w.data(), out.data(), ldo, rows, n, 1e-6f);
      std::vector<float> inplace = x;
      rmsnorm_rows(inplace.data(), ldx, w.data(), inplace.data(), ldx, rows, n, 1e-5f);
      std::vector<float> sum = y;
      add_inplace(sum.data(), x.data(), static_cast<int64_t>(x.size()) - (n % 3));
      std::vector<float> ax = y;
      axpy(ax.data(), x.data(), 0.37f, static_cast<int64_t>(x.size()) - (n % 3));
      if (isa == Isa::Scalar) {
        want_norm = out;
        want_inplace = inplace;
        want_add = sum;
        want_axpy = ax;
        continue;
      }
      ASSERT_EQ(0, std::memcmp(ax.data(), want_axpy.data(), ax.size() * 4)) << "axpy n " << n << " " << isa_name(isa);
      ASSERT_EQ(0, std::memcmp(out.data(), want_norm.data(), out.size() * 4)) << "n " << n << " " << isa_name(isa);
      ASSERT_EQ(0, std::memcmp(inplace.data(), want_inplace.data(), inplace.size() * 4)) << "n " << n;
      ASSERT_EQ(0, std::memcmp(sum.data(), want_add.data(), sum.size() * 4)) << "n " << n << " " << isa_name(isa);
    }
    EXPECT_EQ(want_add[0], y[0] + x[0]);
    EXPECT_EQ(want_axpy[0], y[0] + 0.37f * x[0]);
    EXPECT_EQ(want_axpy.back(), n % 3 ? y.back() : y.back() + 0.37f * x.back());
  }
  // RoPE: NeoX pairs (i, i + half) take the vector path, interleaved pairs the generic one; partial
  // rotation (n_rot < head_dim) leaves the other dims alone.
  for (int64_t hd : {2, 6, 16, 64, 80, 128}) {
    for (int64_t n_rot : {hd, hd / 2}) {
      if (n_rot % 2) continue;
      const int64_t heads = 3, half = n_rot / 2;
      std::vector<float> x(static_cast<size_t>(heads * hd)), cs(static_cast<size_t>(half)), sn(cs.size());
      fill(x);
      for (int64_t i = 0; i < half; ++i) {
        cs[i] = std::cos(0.37f * static_cast<float>(i + 1));
        sn[i] = std::sin(0.37f * static_cast<float>(i + 1));
      }
      for (bool neox : {true, false}) {
        std::vector<float> want;
        for (Isa isa : available_isas()) {
          set_isa_limit(isa);
          std::vector<float> got = x;
          rope_heads_cs(got.data(), heads, hd, n_rot, cs.data(), sn.data(), neox);
          if (isa == Isa::Scalar) {
            want = got;
            // spot check against the formula: head 1, pair 0
            const int64_t a = hd, b = neox ? hd + half : hd + 1;
            EXPECT_EQ(got[a], x[a] * cs[0] - x[b] * sn[0]);
            EXPECT_EQ(got[b], x[a] * sn[0] + x[b] * cs[0]);
            for (int64_t d = n_rot; d < hd; ++d) EXPECT_EQ(got[hd + d], x[hd + d]);
            continue;
          }
          ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * 4))
              << "hd " << hd << " n_rot " << n_rot << " neox " << neox << " " << isa_name(isa);
        }
      }
    }
  }
}

// f32 -> f16 on every ISA is bitwise the software conversion (core/fp16.h) the KV cache used before:
// random values over the whole range, ties at the rounding point, the overflow edge, subnormals,
// zeros, infinities and NaNs (quiet and signalling, with payloads), at lengths around the vector width.
TEST(Ops, F32ToF16IsBitwiseTheSoftwareConversionOnEveryIsa) {
  IsaGuard guard;
  std::mt19937 rng(13);
  std::vector<float> x;
  for (int i = 0; i < 4000; ++i) {  // random bit patterns: every exponent, sign and mantissa
    uint32_t b = static_cast<uint32_t>(rng());
    float f;
    std::memcpy(&f, &b, 4);
    x.push_back(f);
  }
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (int i = 0; i < 1000; ++i) x.push_back(nd(rng));
  for (uint32_t b : {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0x7f800001u, 0xffc12345u,
                     0x7fbfffffu, 0x477fe000u, 0x477ff000u, 0x477fefffu, 0x47800000u, 0x38800000u, 0x387fffffu,
                     0x33000000u, 0x33000001u, 0x32ffffffu, 0x3f801000u, 0x3f803000u, 0x3f801001u, 0x00000001u}) {
    float f;
    std::memcpy(&f, &b, 4);
    x.push_back(f);
  }
  std::vector<uint16_t> want(x.size());
  for (size_t i = 0; i < x.size(); ++i) want[i] = fp32_to_fp16(x[i]);
  for (Isa isa : available_isas()) {
    set_isa_limit(isa);
    for (int64_t n : {int64_t{1}, int64_t{7}, int64_t{15}, int64_t{16}, int64_t{17}, int64_t{33},
                      static_cast<int64_t>(x.size())}) {
      std::vector<uint16_t> got(static_cast<size_t>(n) + 1, 0xabcd);
      f32_to_f16(x.data() + x.size() - static_cast<size_t>(n), got.data(), n);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(got[static_cast<size_t>(i)], want[x.size() - static_cast<size_t>(n) + static_cast<size_t>(i)])
            << isa_name(isa) << " n " << n << " i " << i;
      EXPECT_EQ(got[static_cast<size_t>(n)], 0xabcd) << "wrote past n";
    }
  }
}

// The recurrent layers' steps (a gated delta net's head, a Mamba-2 scan row) on every ISA against the
// formulas in double, over several tokens so the state carries the error forward.
TEST(Ops, DeltaRuleAndSsmScanMatchTheFormulasOnEveryIsa) {  // (and Mamba-1's scan row)
  IsaGuard guard;
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (int64_t d : {1, 5, 16, 23, 128}) {
    std::vector<std::vector<float>> q(4), k(4), v(4);
    for (int t = 0; t < 4; ++t) {
      for (auto* vec : {&q[t], &k[t], &v[t]}) {
        vec->resize(static_cast<size_t>(d));
        for (auto& x : *vec) x = nd(rng) / std::sqrt(static_cast<float>(d));
      }
    }
    for (Isa isa : available_isas()) {
      set_isa_limit(isa);
      std::vector<float> S(static_cast<size_t>(d * d)), o(static_cast<size_t>(d));
      std::vector<double> W(S.size());
      for (size_t i = 0; i < S.size(); ++i) W[i] = S[i] = nd(rng) * 0.1f;
      for (int t = 0; t < 4; ++t) {
        const float decay = 0.9f - 0.1f * static_cast<float>(t), beta = 0.3f + 0.2f * static_cast<float>(t), scale = 0.5f;
        delta_rule_step(S.data(), q[t].data(), k[t].data(), v[t].data(), decay, beta, scale, o.data(), d);
        for (int64_t j = 0; j < d; ++j) {  // the formula in double
          double sk = 0;
          for (int64_t i = 0; i < d; ++i) sk += (W[j * d + i] *= decay) * k[t][i];
          const double dj = (v[t][j] - sk) * beta;
          double sq = 0;
          for (int64_t i = 0; i < d; ++i) sq += (W[j * d + i] += dj * k[t][i]) * q[t][i];
          ASSERT_NEAR(o[j], sq * scale, 1e-5) << isa_name(isa) << " d " << d << " t " << t << " j " << j;
        }
        for (size_t i = 0; i < S.size(); ++i) ASSERT_NEAR(S[i], W[i], 1e-5) << isa_name(isa) << " d " << d << " i " << i;
      }
      std::vector<float> s(static_cast<size_t>(d));
      std::vector<double> w(s.size());
      for (size_t i = 0; i < s.size(); ++i) w[i] = s[i] = nd(rng);
      for (int t = 0; t < 3; ++t) {
        const float dA = 0.8f, xdt = 0.3f * static_cast<float>(t + 1);
        const float got = ssm_scan_row(s.data(), k[t].data(), q[t].data(), dA, xdt, d);
        double want = 0;
        for (int64_t i = 0; i < d; ++i) want += (w[i] = w[i] * dA + k[t][i] * xdt) * q[t][i];
        ASSERT_NEAR(got, want, 1e-5) << isa_name(isa) << " d " << d;
        for (int64_t i = 0; i < d; ++i) ASSERT_NEAR(s[i], w[i], 1e-5) << isa_name(isa) << " d " << d;
      }
      // Mamba-1's row: a decay exp(dt A_i) per element (A negative, as -exp(A_log))
      std::vector<float> A(static_cast<size_t>(d));
      for (auto& a : A) a = -std::exp(nd(rng));
      for (size_t i = 0; i < s.size(); ++i) w[i] = s[i] = nd(rng);
      for (int t = 0; t < 3; ++t) {
        const float dt = 0.05f + 0.2f * static_cast<float>(t), xdt = 0.3f * static_cast<float>(t + 1);
        const float got = ssm_scan_row_decay(s.data(), A.data(), k[t].data(), q[t].data(), dt, xdt, d);
        double want = 0;
        for (int64_t i = 0; i < d; ++i) want += (w[i] = w[i] * std::exp(static_cast<double>(dt) * A[i]) + k[t][i] * xdt) * q[t][i];
        ASSERT_NEAR(got, want, 1e-5) << isa_name(isa) << " d " << d;
        for (int64_t i = 0; i < d; ++i) ASSERT_NEAR(s[i], w[i], 1e-5) << isa_name(isa) << " d " << d;
      }
    }
  }
}
