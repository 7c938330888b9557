#include "runtime/generate.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "runtime/decode_pipeline.h"
#include "tokenizer/tokenizer.h"

namespace wgllm {

std::vector<int32_t> generate(Model& model, Sequence& seq, const Tokenizer& tok, std::span<const int32_t> prompt,
                              const GenerateOptions& opt, const TokenCallback& on_token, GenerateStats* stats,
                              std::span<const int32_t> earlier) {
  return generate(model, seq, [&tok](int32_t t) { return tok.is_eog(t); }, prompt, opt, on_token, stats, earlier);
}

std::vector<int32_t> generate(Model& model, Sequence& seq, const std::function<bool(int32_t)>& is_eog,
                              std::span<const int32_t> prompt, const GenerateOptions& opt, const TokenCallback& on_token,
                              GenerateStats* stats, std::span<const int32_t> earlier) {
  using clock = std::chrono::steady_clock;
  if (prompt.empty()) throw Error("generate: empty prompt");
  Sampler sampler(opt.sampler);
  // The penalty window may reach back into `earlier`; older tokens are never looked at.
  const size_t back = std::min<size_t>(earlier.size(), opt.sampler.repeat_last_n);
  std::vector<int32_t> history(earlier.end() - back, earlier.end()), out;
  history.insert(history.end(), prompt.begin(), prompt.end());
  std::vector<float> logits;
  const bool dev = opt.sampler.device_argmax_ok();
  // Greedy: the argmax on the device, pipelined with --decode-pipeline (runtime/decode_pipeline.h:
  // `more` says the next token may be wanted, so its forward may be submitted before this one's
  // id is read; a forward past a stop is taken back by dec.cancel()).
  GreedyDecoder dec(model, seq);
  auto step = [&](std::span<const int32_t> in, bool more) {
    if (dev) return dec.next(in, more);
    model.forward(seq, in, &logits);
    return sampler.sample(logits, history);
  };
  GenerateStats st;
  st.n_prompt = uint32_t(prompt.size());
  const auto t0 = clock::now();
  if (opt.max_new_tokens == 0) {
    model.forward(seq, prompt, &logits);  // the logits read back: the prefill has finished
    st.ttft_ms = std::chrono::duration<double, std::milli>(clock::now() - t0).count();
    if (stats) *stats = st;
    return out;
  }
  int32_t next = step(prompt, false);  // not speculated: the time to the first token stays as it was
  const auto t1 = clock::now();
  st.ttft_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  auto t_last = t1;
  while (true) {
    if (opt.stop_at_eog && is_eog(next)) break;
    out.push_back(next);
    history.push_back(next);
    if (on_token && !on_token(next)) break;
    if (out.size() >= opt.max_new_tokens) break;
    if (dec.n_past() + 1 > seq.context_length()) {  // context full: stop, documented
      st.context_full = true;
      break;
    }
    next = step(std::span<const int32_t>(&next, 1), out.size() + 1 < opt.max_new_tokens);
    t_last = clock::now();
    ++st.n_decode_steps;
  }
  dec.cancel();  // a forward speculated past the stop: the sequence as without pipelining
  st.n_generated = uint32_t(out.size());
  st.decode_ms = std::chrono::duration<double, std::milli>(t_last - t1).count();
  if (stats) *stats = st;
  return out;
}

}  // namespace wgllm
