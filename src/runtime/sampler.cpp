#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_set>

#include "core/error.h"
#include "kernels/ref.h"

namespace wgllm {

uint64_t generation_seed(uint64_t seed, uint64_t index) {
  if (index == 0) return seed;
  // splitmix64 (Steele, Lea, Flood 2014) of the index-th step after `seed`: consecutive indices
  // give decorrelated 64-bit seeds (a 10-line mixer; no library dependency for it).
  uint64_t z = seed + index * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

Sampler::Sampler(const SamplerConfig& cfg) : cfg_(cfg), rng_(cfg.seed) {
  if (!(cfg.temperature >= 0.0f) || !std::isfinite(cfg.temperature)) throw Error("temperature must be >= 0");
  if (!(cfg.top_p > 0.0f && cfg.top_p <= 1.0f)) throw Error("top-p must be in (0, 1]");
  if (!(cfg.min_p >= 0.0f && cfg.min_p <= 1.0f)) throw Error("min-p must be in [0, 1]");
  if (!(cfg.repeat_penalty > 0.0f) || !std::isfinite(cfg.repeat_penalty)) throw Error("repeat penalty must be > 0");
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  const uint32_t V = uint32_t(logits.size());
  if (V == 0) throw Error("sampler: empty logits");
  work_.assign(logits.begin(), logits.end());
  if (cfg_.repeat_penalty != 1.0f && cfg_.repeat_last_n > 0) {
    std::unordered_set<int32_t> seen;
    const size_t n = std::min<size_t>(history.size(), cfg_.repeat_last_n);
    for (size_t i = history.size() - n; i < history.size(); ++i) {
      const int32_t t = history[i];
      if (t < 0 || uint32_t(t) >= V || !seen.insert(t).second) continue;
      float& l = work_[t];
      l = l > 0 ? l / cfg_.repeat_penalty : l * cfg_.repeat_penalty;
    }
  }
  if (cfg_.greedy()) return int32_t(kernels::ref::argmax(work_.data(), V));

  for (float& l : work_) l /= cfg_.temperature;
  // Candidates sorted by logit, descending (stable: lower id first on ties).
  idx_.resize(V);
  std::iota(idx_.begin(), idx_.end(), 0u);
  uint32_t keep = V;
  auto by_logit = [&](uint32_t a, uint32_t b) {
    const float la = std::isnan(work_[a]) ? -INFINITY : work_[a], lb = std::isnan(work_[b]) ? -INFINITY : work_[b];
    return la > lb || (la == lb && a < b);
  };
  if (cfg_.top_k > 0 && cfg_.top_k < V) {
    keep = cfg_.top_k;
    std::partial_sort(idx_.begin(), idx_.begin() + keep, idx_.end(), by_logit);
  } else {
    std::sort(idx_.begin(), idx_.end(), by_logit);
  }
  // Softmax over the kept candidates in double.
  const double mx = work_[idx_[0]];
  std::vector<double> p(keep);
  double sum = 0;
  for (uint32_t i = 0; i < keep; ++i) sum += (p[i] = std::exp(double(work_[idx_[i]]) - mx));
  for (auto& v : p) v /= sum;
  if (cfg_.top_p < 1.0f) {
    double c = 0;
    uint32_t n = 0;
    while (n < keep) {
      c += p[n++];
      if (c >= cfg_.top_p) break;
    }
    keep = std::max(1u, n);
  }
  if (cfg_.min_p > 0.0f) {
    const double thr = cfg_.min_p * p[0];
    uint32_t n = 1;
    while (n < keep && p[n] >= thr) ++n;
    keep = n;
  }
  double total = 0;
  for (uint32_t i = 0; i < keep; ++i) total += p[i];
  // 53 random bits -> [0, 1): identical on every platform (std::uniform_real_distribution isn't).
  const double u = double(rng_() >> 11) * (1.0 / 9007199254740992.0) * total;
  double c = 0;
  for (uint32_t i = 0; i < keep; ++i) {
    c += p[i];
    if (u < c) return int32_t(idx_[i]);
  }
  return int32_t(idx_[keep - 1]);
}

}  // namespace wgllm
