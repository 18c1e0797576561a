#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "loadgen/arrivals.h"

namespace tmill::loadgen {
namespace {

struct GapStats {
  double mean = 0, cv2 = 0;  // squared coefficient of variation = var / mean^2
};
GapStats gap_stats(const std::vector<double>& t) {
  std::vector<double> g;
  double prev = 0;
  for (double x : t) {
    g.push_back(x - prev);
    prev = x;
  }
  GapStats s;
  for (double x : g) s.mean += x;
  s.mean /= g.size();
  double var = 0;
  for (double x : g) var += (x - s.mean) * (x - s.mean);
  var /= g.size();
  s.cv2 = var / (s.mean * s.mean);
  return s;
}

TEST(Arrivals, PoissonMeanRateWithinTolerance) {
  ArrivalConfig c{10.0, 1.0, 42, /*normalize=*/false};
  auto t = arrival_times(20000, c);
  ASSERT_EQ(t.size(), 20000u);
  for (size_t i = 1; i < t.size(); ++i) ASSERT_GE(t[i], t[i - 1]);
  auto s = gap_stats(t);
  EXPECT_NEAR(1.0 / s.mean, 10.0, 10.0 * 0.03);  // rate within 3%
  EXPECT_NEAR(s.cv2, 1.0, 0.05);                 // exponential gaps: CV^2 = 1
}

TEST(Arrivals, GammaBurstinessShapesVariance) {
  // Gamma(shape k): mean 1/rate whatever k, CV^2 = 1/k.
  for (double k : {0.25, 4.0}) {
    auto t = arrival_times(20000, {5.0, k, 7, false});
    auto s = gap_stats(t);
    EXPECT_NEAR(1.0 / s.mean, 5.0, 5.0 * 0.05) << "burstiness " << k;
    EXPECT_NEAR(s.cv2, 1.0 / k, 0.12 / k) << "burstiness " << k;
  }
}

TEST(Arrivals, NormalizedLastArrivalIsNOverRate) {
  auto t = arrival_times(50, {4.0, 1.0, 3, true});
  EXPECT_NEAR(t.back(), 50 / 4.0, 1e-9);
}

TEST(Arrivals, DeterministicForSeed) {
  EXPECT_EQ(arrival_times(100, {3.0, 1.0, 9, true}), arrival_times(100, {3.0, 1.0, 9, true}));
  EXPECT_NE(arrival_times(100, {3.0, 1.0, 9, true}), arrival_times(100, {3.0, 1.0, 10, true}));
}

TEST(Arrivals, InfiniteRateAllAtOnceAndInfiniteBurstinessIsUniform) {
  const double inf = std::numeric_limits<double>::infinity();
  for (double x : arrival_times(10, {inf, 1.0, 0, true})) EXPECT_EQ(x, 0.0);
  auto t = arrival_times(4, {2.0, inf, 0, false});
  EXPECT_NEAR(t[0], 0.5, 1e-12);
  EXPECT_NEAR(t[3], 2.0, 1e-12);
}

}  // namespace
}  // namespace tmill::loadgen
