// Perplexity of a token sequence under a model (the standard language-model metric, as computed
// by e.g. transformers' `loss` on one window or llama.cpp's llama-perplexity on one chunk).
#pragma once
#include <cstdint>
#include <functional>
#include <span>

#include "models/model.h"

namespace wgllm {

struct PerplexityResult {
  double mean_nll = 0;   // mean negative log-likelihood, nats per scored token
  double ppl = 0;        // exp(mean_nll)
  uint32_t scored = 0;   // tokens scored: ids.size() - 1
};

/// Scores ids[1..N-1], each given all earlier ids, in one window starting at position 0 of a new
/// sequence (no BOS is added: put it in ids if the model wants one). NLL of token t+1 =
/// logsumexp(logits_t) - logits_t[ids[t+1]], accumulated in double from the model's f32 logits.
/// The model's forward returns the last position's logits only, so this runs one forward per
/// token (prefill(T) + decode == prefill(T+1) is tested for every model). progress(done, total)
/// is called after each token when given. Throws wgllm::Error for fewer than 2 ids or more than
/// the model's context length, and whatever forward() throws (ids out of range, device loss).
PerplexityResult perplexity(Model& m, std::span<const int32_t> ids,
                            const std::function<void(uint32_t, uint32_t)>& progress = {});

}  // namespace wgllm
