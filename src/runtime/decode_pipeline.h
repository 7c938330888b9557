// Greedy decoding with one step of lag (ModelOptions::decode_pipeline, --decode-pipeline).
//
// Without it a decode step is: record + submit step i, wait for its 4-byte id, then record step
// i+1 (the host records nothing while the GPU runs, the GPU idles while the host records). With
// it the argmax id stays on the device, the next step's embedding reads it there
// (Model::forward_argmax_async with no tokens), and step i+1 is recorded and submitted before step
// i's id is read: host recording overlaps GPU execution.
//
// Stops (end-of-generation token, a callback's stop string, max tokens) are known only when the
// id is read, so one step may have been submitted past the stop. That step is taken back:
// Sequence::undo() restores n_past, the KV row clocks and every copied recurrent state from the
// copies Sequence::prepare_undo() recorded at the start of that step (for LFM2 ShortConv and
// Qwen3.5 DeltaNet the step rewrites conv and delta state in place, so "forget the last row" is
// not enough). The copies cost one state-sized GPU copy per step on recurrent models (e.g. the
// tiny fixtures' few KiB; 18 MiB a step for a 0.8B Qwen3.5: ~10 us at H200 copy bandwidth) and
// nothing on KV-only models. Alternatives rejected: speculating only where no stop is possible
// (an EOG can come at any step: nothing would be pipelined), double-buffered recurrent state
// (every conv/delta kernel would take two state bindings). Steps known to be the last (max tokens,
// full context) are never speculated. Greedy tokens and the final sequence state are
// bit-identical to the non-pipelined loop (tests/e2e/decode_pipeline_test.cpp).
#pragma once
#include <cstdint>
#include <optional>
#include <span>

#include "models/model.h"

namespace wgllm {

class GreedyDecoder {
 public:
  /// Pipelined when m.async_argmax() (the switch is on and the model supports it), else each
  /// next() is one Model::forward_argmax.
  GreedyDecoder(Model& m, Sequence& seq);
  /// Takes back a forward still in flight (cancel(); errors swallowed: call cancel() to see them).
  ~GreedyDecoder();
  GreedyDecoder(const GreedyDecoder&) = delete;
  GreedyDecoder& operator=(const GreedyDecoder&) = delete;

  bool pipelined() const { return pipe_; }
  /// Feeds `toks` (a prompt, or the one token next() last returned) and returns the greedy token
  /// after them, waiting for it. `speculate`: the caller may feed the returned token next; when
  /// pipelined (and the context has room) that forward is submitted before this one's id is read.
  /// Throws wgllm::Error when a speculated forward is in flight and toks is not that one token.
  int32_t next(std::span<const int32_t> toks, bool speculate);
  /// Tokens the sequence holds as the caller sees it: seq.n_past() less a speculated forward.
  uint32_t n_past() const { return seq_.n_past() - (pending_ ? 1 : 0); }
  /// Takes back the speculated forward, if any (the caller feeds no further token): waits for it
  /// and undoes it (Sequence::undo). Afterwards the sequence is as the non-pipelined loop leaves it.
  void cancel();

 private:
  Model& m_;
  Sequence& seq_;
  bool pipe_ = false;
  std::optional<uint64_t> pending_;  // ticket of the speculated forward of last_
  int32_t last_ = -1;                // the token next() last returned
};

}  // namespace wgllm
