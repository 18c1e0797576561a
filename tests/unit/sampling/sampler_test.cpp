#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "sampling/sampler.h"

using namespace tmill;

namespace {
std::vector<float> logits_from_probs(const std::vector<double>& p) {
  std::vector<float> l;
  for (double x : p) l.push_back(static_cast<float>(std::log(x)));
  return l;
}
}  // namespace

TEST(Sampler, GreedyPicksArgmaxAfterBias) {
  Sampler s;
  Rng rng(1);
  std::vector<float> l = {0.1f, 2.0f, 1.5f, -1.0f};
  SamplingParams p;
  p.temperature = 0;
  EXPECT_EQ(s.sample(l.data(), 4, p, {}, {}, rng).token, 1);
  p.logit_bias = {{2, 1.0f}};
  EXPECT_EQ(s.sample(l.data(), 4, p, {}, {}, rng).token, 2);
  p.logit_bias = {{1, -100.0f}, {2, -100.0f}};
  EXPECT_EQ(s.sample(l.data(), 4, p, {}, {}, rng).token, 0);
}

TEST(Sampler, FrequenciesFollowTheDistribution) {
  Sampler s;
  Rng rng(1234);
  const std::vector<double> probs = {0.5, 0.25, 0.125, 0.125};
  auto l = logits_from_probs(probs);
  SamplingParams p;  // temperature 1, no truncation
  std::vector<int> counts(4, 0);
  const int N = 40000;
  for (int i = 0; i < N; ++i) counts[s.sample(l.data(), 4, p, {}, {}, rng).token]++;
  for (int t = 0; t < 4; ++t) {
    const double expect = probs[t] * N, sd = std::sqrt(N * probs[t] * (1 - probs[t]));
    EXPECT_NEAR(counts[t], expect, 5 * sd) << "token " << t;
  }
}

TEST(Sampler, TemperatureSharpens) {
  Sampler s;
  Rng rng(7);
  auto l = logits_from_probs({0.6, 0.4});
  SamplingParams p;
  p.temperature = 0.5f;  // p ∝ q^2: 0.36 / 0.16 -> 0.692
  int first = 0;
  const int N = 40000;
  for (int i = 0; i < N; ++i) first += s.sample(l.data(), 2, p, {}, {}, rng).token == 0;
  EXPECT_NEAR(first / double(N), 0.36 / 0.52, 0.01);
}

TEST(Sampler, TopKTopPMinPTruncate) {
  Sampler s;
  Rng rng(3);
  auto l = logits_from_probs({0.1, 0.4, 0.3, 0.2});
  SamplingParams p;
  std::map<int, int> seen;
  p.top_k = 2;  // {1, 2}
  for (int i = 0; i < 2000; ++i) seen[s.sample(l.data(), 4, p, {}, {}, rng).token]++;
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_GT(seen[1], 0);
  EXPECT_GT(seen[2], 0);
  seen.clear();
  p.top_k = 0;
  p.top_p = 0.65f;  // 0.4 + 0.3 reaches 0.65 -> {1, 2}
  for (int i = 0; i < 2000; ++i) seen[s.sample(l.data(), 4, p, {}, {}, rng).token]++;
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen.count(0), 0u);
  seen.clear();
  p.top_p = 1.0f;
  p.min_p = 0.6f;  // keep p >= 0.6 * 0.4 = 0.24 -> {1, 2}
  for (int i = 0; i < 2000; ++i) seen[s.sample(l.data(), 4, p, {}, {}, rng).token]++;
  EXPECT_EQ(seen.size(), 2u);
  p.min_p = 0;
  p.top_k = 1;
  for (int i = 0; i < 50; ++i) EXPECT_EQ(s.sample(l.data(), 4, p, {}, {}, rng).token, 1);
}

TEST(Sampler, SameSeedSameSequence) {
  Sampler s;
  auto l = logits_from_probs({0.2, 0.2, 0.2, 0.2, 0.2});
  SamplingParams p;
  auto run = [&](uint64_t seed) {
    Rng rng(seed);
    std::vector<int> out;
    for (int i = 0; i < 64; ++i) out.push_back(s.sample(l.data(), 5, p, {}, {}, rng).token);
    return out;
  };
  EXPECT_EQ(run(42), run(42));
  EXPECT_NE(run(42), run(43));
}

TEST(Sampler, Penalties) {
  Sampler s;
  Rng rng(1);
  SamplingParams p;
  p.temperature = 0;
  std::vector<float> l = {2.0f, 1.9f, -1.0f, -1.1f};
  std::vector<int32_t> prompt = {0}, output = {2, 2};
  // repetition 2: token 0 (positive) 2.0 -> 1.0; token 2 (negative) -1.0 -> -2.0
  p.repetition_penalty = 2.0f;
  EXPECT_EQ(s.sample(l.data(), 4, p, prompt, output, rng).token, 1);
  // frequency 0.6 on token 2 (twice) and presence 0.1: 2.0 stays for token 0
  p.repetition_penalty = 1.0f;
  p.frequency_penalty = 0.6f;
  p.presence_penalty = 0.1f;
  std::vector<float> l2 = {0.0f, -0.5f, 1.0f, -2.0f};
  // token 2: 1.0 - 1.2 - 0.1 = -0.3 < token 0's 0.0
  EXPECT_EQ(s.sample(l2.data(), 4, p, {}, output, rng).token, 0);
  p.frequency_penalty = -1.0f;  // negative penalties encourage repetition
  p.presence_penalty = 0.0f;
  EXPECT_EQ(s.sample(l2.data(), 4, p, {}, output, rng).token, 2);
  // the scratch state does not leak into the next call
  SamplingParams plain;
  plain.temperature = 0;
  EXPECT_EQ(s.sample(l.data(), 4, plain, prompt, output, rng).token, 0);
}

TEST(Sampler, LogprobsAreRawLogSoftmax) {
  Sampler s;
  Rng rng(1);
  const std::vector<double> probs = {0.1, 0.6, 0.3};
  auto l = logits_from_probs(probs);
  SamplingParams p;
  p.temperature = 0;
  p.logprobs = 2;
  p.logit_bias = {{0, 50.0f}};  // changes the choice, not the reported distribution
  auto r = s.sample(l.data(), 3, p, {}, {}, rng);
  EXPECT_EQ(r.token, 0);
  EXPECT_NEAR(r.logprob, std::log(0.1), 1e-5);
  ASSERT_EQ(r.top.size(), 2u);
  EXPECT_EQ(r.top[0].token, 1);
  EXPECT_NEAR(r.top[0].logprob, std::log(0.6), 1e-5);
  EXPECT_EQ(r.top[1].token, 2);
}
