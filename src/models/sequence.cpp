#include "core/error.h"
#include "models/model.h"

namespace wgllm {

void Sequence::truncate(uint32_t n) {
  if (n > n_past_)
    throw Error("truncate to " + std::to_string(n) + " tokens: the sequence has only " + std::to_string(n_past_));
  if (memory().recurrent > 0)
    throw Error("a sequence with recurrent state cannot be truncated; restore a snapshot instead");
  n_past_ = n;
}

void check_forward(const Sequence& seq, std::span<const int32_t> toks, uint32_t vocab) {
  if (toks.empty()) throw Error("forward: no tokens");
  if (uint64_t(seq.n_past()) + toks.size() > seq.context_length())
    throw Error("context length exceeded: " + std::to_string(seq.n_past()) + " + " + std::to_string(toks.size()) +
                " tokens > " + std::to_string(seq.context_length()));
  for (int32_t t : toks)
    if (t < 0 || uint32_t(t) >= vocab) throw Error("token id " + std::to_string(t) + " out of range [0, " + std::to_string(vocab) + ")");
}

}  // namespace wgllm
