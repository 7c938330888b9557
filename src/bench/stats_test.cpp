#include "bench/stats.h"

#include <gtest/gtest.h>

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
