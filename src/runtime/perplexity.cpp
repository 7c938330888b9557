#include "runtime/perplexity.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"

namespace wgllm {

PerplexityResult perplexity(Model& m, std::span<const int32_t> ids, const std::function<void(uint32_t, uint32_t)>& progress) {
  if (ids.size() < 2) throw Error("perplexity needs at least 2 tokens, got " + std::to_string(ids.size()));
  auto seq = m.new_sequence(uint32_t(std::min<size_t>(ids.size(), UINT32_MAX)));
  if (seq->context_length() < ids.size())
    throw Error("perplexity: " + std::to_string(ids.size()) + " tokens exceed the context length " +
                std::to_string(seq->context_length()));
  const uint32_t n = uint32_t(ids.size()) - 1;
  std::vector<float> logits;
  double sum = 0;
  for (uint32_t t = 0; t < n; ++t) {
    m.forward(*seq, ids.subspan(t, 1), &logits);
    const int32_t next = ids[t + 1];
    if (next < 0 || size_t(next) >= logits.size())
      throw Error("perplexity: token id " + std::to_string(next) + " out of range [0, " + std::to_string(logits.size()) + ")");
    const float mx = *std::max_element(logits.begin(), logits.end());
    double z = 0;
    for (float l : logits) z += std::exp(double(l) - mx);
    sum += (std::log(z) + mx) - double(logits[size_t(next)]);
    if (progress) progress(t + 1, n);
  }
  PerplexityResult r;
  r.scored = n;
  r.mean_nll = sum / n;
  r.ppl = std::exp(r.mean_nll);
  return r;
}

}  // namespace wgllm
