// Generation loop: prefill the prompt, then decode one token per step until max_new_tokens or
// an end-of-generation token. Each decode step is one forward (one GPU submission) of one token.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "models/model.h"
#include "runtime/sampler.h"

namespace wgllm {

class Tokenizer;

struct GenerateOptions {
  uint32_t max_new_tokens = 128;
  SamplerConfig sampler;
  bool stop_at_eog = true;  // stop after an end-of-generation token (not included in the output)
};

struct GenerateStats {
  uint32_t n_prompt = 0, n_generated = 0;
  uint32_t n_decode_steps = 0;  // forwards of one token after the prefill
  double ttft_ms = 0;       // from the start of prefill to the first sampled token
  double decode_ms = 0;     // time of the decode steps (after the first token)
  bool context_full = false;  // generation stopped because the sequence's context was full
  // With max_new_tokens == 0: ttft_ms is the prefill's time (to its logits, which are not sampled).
  double decode_tokens_per_s() const { return n_decode_steps ? n_decode_steps / (decode_ms / 1000.0) : 0; }
  double prefill_tokens_per_s() const { return ttft_ms > 0 ? n_prompt / (ttft_ms / 1000.0) : 0; }
};

/// Called with each new token; return false to stop.
using TokenCallback = std::function<bool(int32_t)>;

/// Appends `prompt` to `seq` and generates. Returns the generated ids. Afterwards seq holds the
/// prompt and every generated token except the last one (which was sampled but not yet fed), so
/// a caller can continue the sequence. `earlier`: the tokens seq already holds before `prompt`
/// (a conversation's history), seen by the repetition penalty like the prompt (only the last
/// repeat_last_n matter).
std::vector<int32_t> generate(Model& model, Sequence& seq, const Tokenizer& tok, std::span<const int32_t> prompt,
                              const GenerateOptions& opt, const TokenCallback& on_token = nullptr,
                              GenerateStats* stats = nullptr, std::span<const int32_t> earlier = {});
/// The same with the end-of-generation test given as a predicate (the overload above passes
/// tok.is_eog; tests stop at chosen tokens).
std::vector<int32_t> generate(Model& model, Sequence& seq, const std::function<bool(int32_t)>& is_eog,
                              std::span<const int32_t> prompt, const GenerateOptions& opt,
                              const TokenCallback& on_token = nullptr, GenerateStats* stats = nullptr,
                              std::span<const int32_t> earlier = {});

}  // namespace wgllm
