// Row operations with per-ISA versions (kernels/ops.h): every ISA against plain scalar formulas.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "core/cpu.h"
#include "kernels/ops.h"

using namespace tmill;

namespace {

std::vector<Isa> isas() {
  std::vector<Isa> v;
  for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512})
    if (isa <= detected_isa()) v.push_back(isa);
  return v;
}

struct IsaGuard {
  ~IsaGuard() { set_isa_limit(detected_isa()); }
};

}  // namespace

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
      for (Isa isa : isas()) {
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
    for (Isa isa : isas()) {
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

TEST(Ops, RmsnormRowsMatchesTheFormulaInDouble) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> ud(-3.0f, 3.0f);
  for (int64_t n : {1, 5, 16, 17, 64, 172, 896}) {
    const int64_t rows = 3, ldx = n + 3, ldo = n + 1;  // strided rows
    std::vector<float> x(static_cast<size_t>(rows * ldx)), w(static_cast<size_t>(n)), out(static_cast<size_t>(rows * ldo));
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
        ASSERT_NEAR(out[r * ldo + j], want, 2e-6 * (1 + std::abs(want))) << "n " << n << " r " << r << " j " << j;
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
