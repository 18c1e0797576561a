#include <gtest/gtest.h>

#include <cmath>

#include "loadgen/stats.h"

namespace tmill::loadgen {
namespace {

TEST(Percentile, MatchesNumpyLinearInterpolation) {
  // numpy.percentile([1, 2, 3, 4, 10], [0, 25, 50, 90, 99, 100]) = 1, 2, 3, 7.6, 9.76, 10
  std::vector<double> a = {1, 2, 3, 4, 10};
  EXPECT_DOUBLE_EQ(percentile_sorted(a, 0), 1.0);
  EXPECT_DOUBLE_EQ(percentile_sorted(a, 25), 2.0);
  EXPECT_DOUBLE_EQ(percentile_sorted(a, 50), 3.0);
  EXPECT_NEAR(percentile_sorted(a, 90), 7.6, 1e-12);
  EXPECT_NEAR(percentile_sorted(a, 99), 9.76, 1e-12);
  EXPECT_DOUBLE_EQ(percentile_sorted(a, 100), 10.0);
  // Even count: numpy.percentile([10, 20, 30, 40], 50) = 25; p95 = 38.5 (rank 2.85).
  std::vector<double> b = {10, 20, 30, 40};
  EXPECT_DOUBLE_EQ(percentile_sorted(b, 50), 25.0);
  EXPECT_NEAR(percentile_sorted(b, 95), 38.5, 1e-12);
}

TEST(Percentile, EdgeCases) {
  EXPECT_EQ(percentile_sorted({}, 50), 0.0);
  EXPECT_EQ(percentile_sorted({7}, 99), 7.0);
}

TEST(Summary, MeanPopulationStdAndPercentiles) {
  // Unsorted input; numpy: mean 5, std (ddof=0) 2, median 4.5, max 9, p90 = 7.6 (rank 6.3 of sorted).
  auto s = summarize({9, 2, 4, 4, 5, 5, 4, 7});
  EXPECT_EQ(s.count, 8u);
  EXPECT_DOUBLE_EQ(s.mean, 5.0);
  EXPECT_DOUBLE_EQ(s.std, 2.0);
  EXPECT_DOUBLE_EQ(s.p50, 4.5);
  EXPECT_NEAR(s.p90, 7.6, 1e-12);
  EXPECT_DOUBLE_EQ(s.max, 9.0);
  EXPECT_DOUBLE_EQ(s.min, 2.0);
  auto e = summarize({});
  EXPECT_EQ(e.count, 0u);
  EXPECT_EQ(e.mean, 0.0);
  EXPECT_EQ(e.p99, 0.0);
}

TEST(Goodput, CountsRequestsMeetingAllSlos) {
  std::vector<LatencySample> s = {
      {100, 10, 1000},  // good on all
      {600, 10, 1000},  // TTFT too slow
      {100, 60, 1000},  // TPOT too slow
      {100, 0, 5000},   // single-token request (TPOT 0), E2E too slow
      {500, 50, 3000},  // exactly on every limit: good (<=)
  };
  SloConfig slo;
  slo.ttft_ms = 500;
  slo.tpot_ms = 50;
  EXPECT_EQ(count_good(s, slo), 3u);  // 0, 3, 4
  slo.e2el_ms = 3000;
  EXPECT_EQ(count_good(s, slo), 2u);  // 0, 4
  EXPECT_EQ(count_good(s, SloConfig{}), 0u);
}

TEST(Goodput, ParsesSloItems) {
  auto a = parse_slo({"ttft:500", "tpot:50"});
  ASSERT_TRUE(a.ok()) << a.error();
  EXPECT_EQ(*a->ttft_ms, 500);
  EXPECT_EQ(*a->tpot_ms, 50);
  EXPECT_FALSE(a->e2el_ms.has_value());
  auto b = parse_slo({"ttft:250.5 e2el:9000"});
  ASSERT_TRUE(b.ok());
  EXPECT_DOUBLE_EQ(*b->ttft_ms, 250.5);
  EXPECT_DOUBLE_EQ(*b->e2el_ms, 9000);
  EXPECT_FALSE(parse_slo({"ttft"}).ok());
  EXPECT_FALSE(parse_slo({"itl:5"}).ok());
  EXPECT_FALSE(parse_slo({"ttft:-3"}).ok());
  EXPECT_FALSE(parse_slo({"ttft:5x"}).ok());
}

}  // namespace
}  // namespace tmill::loadgen
