#include "runtime/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "core/error.h"

using namespace wgllm;

TEST(Sampler, GreedyIsArgmaxLowestOnTies) {
  Sampler s({});
  std::vector<float> l = {0.1f, 3.0f, -1.0f, 3.0f, NAN};
  EXPECT_EQ(s.sample(l, {}), 1);
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDiffers) {
  std::vector<float> l(100);
  for (int i = 0; i < 100; ++i) l[i] = std::sin(i * 0.37f) * 2.0f;
  auto run = [&](uint64_t seed) {
    SamplerConfig c;
    c.temperature = 1.0f;
    c.seed = seed;
    Sampler s(c);
    std::vector<int32_t> out;
    for (int i = 0; i < 50; ++i) out.push_back(s.sample(l, {}));
    return out;
  };
  EXPECT_EQ(run(7), run(7));
  EXPECT_NE(run(7), run(8));
}

TEST(Sampler, FrequenciesFollowSoftmax) {
  std::vector<float> l = {1.0f, 2.0f, 0.0f, 1.5f};
  SamplerConfig c;
  c.temperature = 0.7f;
  c.seed = 1;
  Sampler s(c);
  std::map<int, int> n;
  const int N = 40000;
  for (int i = 0; i < N; ++i) n[s.sample(l, {})]++;
  double z = 0;
  for (float v : l) z += std::exp(v / 0.7);
  for (int i = 0; i < 4; ++i) {
    const double p = std::exp(l[i] / 0.7) / z;
    EXPECT_NEAR(double(n[i]) / N, p, 4 * std::sqrt(p * (1 - p) / N) + 1e-3) << i;
  }
}

TEST(Sampler, TruncationsKeepOnlyAllowedTokens) {
  std::vector<float> l = {2.0f, 1.9f, 0.0f, -5.0f, 1.0f};
  for (int trial = 0; trial < 3; ++trial) {
    SamplerConfig c;
    c.temperature = 1.0f;
    c.seed = trial;
    if (trial == 0) c.top_k = 2;    // {0, 1}
    if (trial == 1) c.top_p = 0.5f; // p0 ~ 0.43 < 0.5 -> {0, 1}
    if (trial == 2) c.min_p = 0.8f; // p1/p0 = e^-0.1 ~ 0.905 -> {0, 1}
    Sampler s(c);
    for (int i = 0; i < 500; ++i) {
      int t = s.sample(l, {});
      EXPECT_TRUE(t == 0 || t == 1) << "trial " << trial << " got " << t;
    }
  }
}

TEST(Sampler, RepetitionPenaltyChangesGreedyChoice) {
  SamplerConfig c;
  c.repeat_penalty = 1.5f;
  Sampler s(c);
  std::vector<float> l = {2.0f, 1.5f, -1.0f};
  std::vector<int32_t> hist = {0, 0, 2};
  EXPECT_EQ(s.sample(l, hist), 1);  // 2.0 / 1.5 = 1.33 < 1.5
  EXPECT_EQ(Sampler({}).sample(l, hist), 0);
}

TEST(Sampler, RejectsInvalidConfig) {
  SamplerConfig c;
  c.top_p = 0.0f;
  EXPECT_THROW(Sampler{c}, Error);
  c = {};
  c.temperature = -1.0f;
  EXPECT_THROW(Sampler{c}, Error);
}

TEST(Sampler, GenerationSeedsAreFreshPerGenerationAndReproducible) {
  // Generation 0 is the seed itself; later ones differ from it, from each other and across seeds,
  // and are a pure function of (seed, index).
  EXPECT_EQ(generation_seed(7, 0), 7u);
  std::set<uint64_t> seen;
  for (uint64_t seed : {0ull, 1ull, 7ull})
    for (uint64_t k = 0; k < 100; ++k) {
      EXPECT_EQ(generation_seed(seed, k), generation_seed(seed, k));
      seen.insert(generation_seed(seed, k));
    }
  EXPECT_EQ(seen.size(), 300u);
}
