#include "runtime/decode_pipeline.h"

#include "core/error.h"

namespace wgllm {

GreedyDecoder::GreedyDecoder(Model& m, Sequence& seq) : m_(m), seq_(seq), pipe_(m.async_argmax()) {}

GreedyDecoder::~GreedyDecoder() {
  try {
    cancel();
  } catch (...) {
  }
}

int32_t GreedyDecoder::next(std::span<const int32_t> toks, bool speculate) {
  if (!pipe_) return last_ = m_.forward_argmax(seq_, toks);
  uint64_t ticket = 0;
  if (pending_) {
    if (toks.size() != 1 || toks[0] != last_)
      throw Error("GreedyDecoder: the forward of token " + std::to_string(last_) +
                  " is in flight; feed that token or cancel() first");
    ticket = *pending_;
    pending_.reset();
  } else {
    ticket = m_.forward_argmax_async(seq_, toks, false);
  }
  if (speculate && seq_.n_past() < seq_.context_length()) pending_ = m_.forward_argmax_async(seq_, {}, true);
  return last_ = m_.argmax_result(ticket);
}

void GreedyDecoder::cancel() {
  if (!pending_) return;
  const uint64_t t = *pending_;
  pending_.reset();
  m_.argmax_result(t);  // frees its readback; the id is not wanted
  seq_.undo();
}

}  // namespace wgllm
