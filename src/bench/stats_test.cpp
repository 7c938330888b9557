#include "bench/stats.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace wgllm::bench;

namespace {
std::vector<double> noisy(double mean, double rel_sd, int n, uint64_t seed) {
  std::mt19937_64 g(seed);
  std::normal_distribution<double> d(mean, mean * rel_sd);
  std::vector<double> v(n);
  for (auto& x : v) x = d(g);
  return v;
}
}  // namespace

TEST(BenchStats, Quantiles) {
  std::vector<double> v = {5, 1, 3, 2, 4};
  EXPECT_DOUBLE_EQ(median(v), 3);
  EXPECT_DOUBLE_EQ(quantile(v, 0), 1);
  EXPECT_DOUBLE_EQ(quantile(v, 1), 5);
  EXPECT_DOUBLE_EQ(quantile(v, 0.25), 2);
}

// Out-of-domain arguments give NaN (documented), never a read outside the samples: q < 0 used
// to index element SIZE_MAX, q > 1 past the end, NaN samples broke std::sort's ordering.
TEST(BenchStats, QuantileOutsideItsDomainIsNaN) {
  const std::vector<double> v = {5, 1, 3, 2, 4};
  for (double q : {-0.5, -1e300, 1.5, 1e300, double(NAN), double(INFINITY), -double(INFINITY)})
    EXPECT_TRUE(std::isnan(quantile(v, q))) << "q = " << q;
  EXPECT_TRUE(std::isnan(quantile({}, 0.5)));
  EXPECT_TRUE(std::isnan(median({1, NAN, 3})));
  std::vector<double> many(1000, 1.0);
  for (size_t i = 0; i < many.size(); i += 3) many[i] = NAN;
  EXPECT_TRUE(std::isnan(quantile(many, 0.9)));
  EXPECT_DOUBLE_EQ(quantile({7}, 0.99), 7);
}

TEST(BenchStats, EmptyArmsAreABrokenMeasurement) {
  const Verdict v = ab_verdict({}, {}, {});
  EXPECT_TRUE(v.broken);
  EXPECT_FALSE(v.detected);
  EXPECT_TRUE(std::isnan(v.ratio.mid));
}

TEST(BenchStats, PlantedTenPercentIsDetected) {
  auto v = ab_verdict(noisy(100, 0.02, 8, 1), noisy(100, 0.02, 8, 2), noisy(110, 0.02, 16, 3));
  EXPECT_FALSE(v.broken);
  EXPECT_TRUE(v.detected) << v.text;
  EXPECT_NEAR(v.ratio.mid, 1.10, 0.03);
}

TEST(BenchStats, NullChangeIsNotDetected) {
  for (uint64_t s = 0; s < 20; ++s) {
    auto v = ab_verdict(noisy(100, 0.02, 8, 3 * s + 1), noisy(100, 0.02, 8, 3 * s + 2), noisy(100, 0.02, 16, 3 * s + 3));
    EXPECT_FALSE(v.broken);
    EXPECT_FALSE(v.detected) << "seed " << s << ": " << v.text;
  }
}

TEST(BenchStats, ZeroNoiseIsReportedAsBroken) {
  std::vector<double> c(8, 42.0);
  auto v = ab_verdict(c, c, std::vector<double>(16, 50.0));
  EXPECT_TRUE(v.broken);
  EXPECT_FALSE(v.detected);
  EXPECT_NE(v.text.find("BROKEN"), std::string::npos);
}
