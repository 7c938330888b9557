// Token sampling from logits. Order follows transformers' generate() logits processors:
// repetition penalty -> temperature -> top-k -> top-p -> min-p -> draw.
//   repetition penalty (Keskar et al. 2019, CTRL): for each distinct recent token,
//     logit = logit > 0 ? logit / penalty : logit * penalty
//   top-p (Holtzman et al. 2019): keep the smallest set of most likely tokens with mass >= top_p
//   min-p (Nguyen et al. 2024): keep tokens with p >= min_p * p_max
// temperature == 0 means greedy (argmax, lowest id on ties). The draw uses std::mt19937_64 seeded
// with `seed` and a fixed conversion to [0, 1), so the same seed and config give the same tokens
// on every platform. A conversation (Session) samples generation k with generation_seed(seed, k),
// so every reply draws fresh randomness and the whole conversation is reproducible from `seed`.
#pragma once
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace wgllm {

struct SamplerConfig {
  float temperature = 0.0f;   // 0 = greedy
  uint32_t top_k = 0;         // 0 = off
  float top_p = 1.0f;         // 1 = off
  float min_p = 0.0f;         // 0 = off
  float repeat_penalty = 1.0f;  // 1 = off
  uint32_t repeat_last_n = 64;  // how many recent tokens the penalty looks at
  uint64_t seed = 0;
  bool greedy() const { return temperature <= 0.0f; }
  /// True when the next token depends only on argmax(logits): the backend may compute it on the
  /// device and skip reading back the logits.
  bool device_argmax_ok() const { return greedy() && repeat_penalty == 1.0f; }
};

/// The seed of generation `index` (0, 1, 2, ...) of a conversation whose sampling seed is `seed`.
/// Index 0 is `seed` itself (a one-reply conversation samples exactly like generate() with that
/// seed); later indices are splitmix64 mixes of (seed, index), so a regenerated reply or a repeated
/// message draws different random numbers while the same seed and inputs replay the same
/// conversation.
uint64_t generation_seed(uint64_t seed, uint64_t index);

class Sampler {
 public:
  /// Throws wgllm::Error for invalid values (negative temperature, top_p outside (0, 1], ...).
  explicit Sampler(const SamplerConfig& cfg);
  /// Picks the next token. `history` are the tokens so far (prompt + generated), for penalties.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);
  const SamplerConfig& config() const { return cfg_; }

 private:
  SamplerConfig cfg_;
  std::mt19937_64 rng_;
  std::vector<float> work_;
  std::vector<uint32_t> idx_;
};

}  // namespace wgllm
