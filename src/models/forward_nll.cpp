// Model::forward_nll's default (host logits, one token at a time over the scored range) and its
// argument checks; the WebGPU models override it (gpu_common.cpp).
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/nll.h"
#include "models/model.h"

namespace wgllm {

void check_nll_targets(std::span<const int32_t> tokens, std::span<const int32_t> targets, uint32_t vocab) {
  if (targets.size() != tokens.size())
    throw Error("forward_nll: " + std::to_string(targets.size()) + " targets for " + std::to_string(tokens.size()) +
                " tokens (one per position expected)");
  for (size_t t = 0; t < targets.size(); ++t)
    if (targets[t] >= int64_t(vocab))
      throw Error("forward_nll: target " + std::to_string(targets[t]) + " at position " + std::to_string(t) +
                  " out of range [0, " + std::to_string(vocab) + ")");
}

void Model::forward_nll(Sequence& seq, std::span<const int32_t> tokens, std::span<const int32_t> targets,
                        std::vector<float>* nll) {
  check_nll_targets(tokens, targets, config().vocab);
  const size_t T = tokens.size();
  size_t lo = 0, hi = T;
  while (lo < T && targets[lo] < 0) ++lo;
  while (hi > lo && targets[hi - 1] < 0) --hi;
  std::vector<float> out(T, 0.0f), logits;
  if (lo == hi) {
    forward(seq, tokens, nullptr);
  } else {
    if (lo > 0) forward(seq, tokens.first(lo), nullptr);
    for (size_t t = lo; t < hi; ++t) {
      forward(seq, tokens.subspan(t, 1), &logits);
      out[t] = float(ref::nll_row(logits.data(), uint32_t(logits.size()), targets[t]));
    }
    if (hi < T) forward(seq, tokens.subspan(hi), nullptr);
  }
  *nll = std::move(out);
}

}  // namespace wgllm
