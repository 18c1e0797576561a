// Per-token NLL / KL divergence and the summary statistics, against values worked out by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "eval/divergence.h"

using namespace tmill::eval;

TEST(Divergence, TokenNllIsMinusLogSoftmax) {
  // softmax([0, ln 3]) = [1/4, 3/4]
  const float l[] = {0.0f, static_cast<float>(std::log(3.0))};
  EXPECT_NEAR(token_nll(l, 2, 0), std::log(4.0), 1e-7);
  EXPECT_NEAR(token_nll(l, 2, 1), std::log(4.0 / 3.0), 1e-7);
  // shift invariance, large logits stay finite
  const float big[] = {1000.0f, 1000.0f + static_cast<float>(std::log(3.0))};
  EXPECT_NEAR(token_nll(big, 2, 0), std::log(4.0), 1e-4);
  const float u[] = {2, 2, 2, 2, 2, 2, 2, 2};
  EXPECT_NEAR(token_nll(u, 8, 5), std::log(8.0), 1e-12);
}

TEST(Divergence, KlOfKnownDistributions) {
  // P = [1/2, 1/2], Q = [3/4, 1/4]: KL(P||Q) = 1/2 ln(2/3) + 1/2 ln 2 = 1/2 ln(4/3)
  const float p[] = {0.0f, 0.0f};
  const float q[] = {static_cast<float>(std::log(3.0)), 0.0f};
  TokenComparison c = compare_token(p, q, 2, 1);
  EXPECT_NEAR(c.kld, 0.5 * std::log(4.0 / 3.0), 1e-7);
  EXPECT_NEAR(c.nll_ref, std::log(2.0), 1e-7);
  EXPECT_NEAR(c.nll_model, std::log(4.0), 1e-7);
  EXPECT_TRUE(c.same_top1);  // tie in P resolves to index 0, Q's argmax is 0
  // the other direction: KL(Q||P) = 3/4 ln(3/2) + 1/4 ln(1/2)
  TokenComparison d = compare_token(q, p, 2, 0);
  EXPECT_NEAR(d.kld, 0.75 * std::log(1.5) + 0.25 * std::log(0.5), 1e-7);
  // different argmax
  const float r[] = {0.0f, 1.0f};
  EXPECT_FALSE(compare_token(q, r, 2, 0).same_top1);
}

TEST(Divergence, IdenticalRowsGiveExactlyZero) {
  std::vector<float> a(1000);
  for (size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.37f * static_cast<float>(i)) * 9.0f;
  TokenComparison c = compare_token(a.data(), a.data(), 1000, 17);
  EXPECT_EQ(c.kld, 0.0);
  EXPECT_TRUE(c.same_top1);
  EXPECT_EQ(c.nll_ref, c.nll_model);
}

TEST(Divergence, Summary) {
  SampleSummary s = summarize({4, 1, 3, 2, 5});
  EXPECT_EQ(s.n, 5);
  EXPECT_DOUBLE_EQ(s.mean, 3.0);
  EXPECT_DOUBLE_EQ(s.min, 1.0);
  EXPECT_DOUBLE_EQ(s.max, 5.0);
  EXPECT_DOUBLE_EQ(s.median, 3.0);
  EXPECT_DOUBLE_EQ(s.p90, 4.6);   // 0.9 * 4 = 3.6 -> 4 + 0.6 * (5 - 4)
  EXPECT_DOUBLE_EQ(s.p99, 4.96);
  // var = mean(x^2) - mean^2 = 11 - 9 = 2; stderr = sqrt(2 / 4)
  EXPECT_NEAR(s.stderr_mean, std::sqrt(0.5), 1e-12);
  EXPECT_EQ(summarize({}).n, 0);
  EXPECT_EQ(summarize({7}).stderr_mean, 0.0);
}

TEST(Divergence, PplStats) {
  PplStats p = ppl_stats({1.0, 2.0, 3.0});
  EXPECT_NEAR(p.mean_nll, 2.0, 1e-12);
  EXPECT_NEAR(p.ppl, std::exp(2.0), 1e-9);
  // var = 14/3 - 4 = 2/3, stderr = sqrt(2/3 / 2)
  EXPECT_NEAR(p.nll_stderr, std::sqrt(1.0 / 3.0), 1e-12);
  EXPECT_NEAR(p.ppl_stderr, std::exp(2.0) * std::sqrt(1.0 / 3.0), 1e-9);
}
