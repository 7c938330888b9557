#include "runtime/generate.h"

#include <algorithm>
#include <chrono>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace wgllm {

std::vector<int32_t> generate(Model& model, Sequence& seq, const Tokenizer& tok, std::span<const int32_t> prompt,
                              const GenerateOptions& opt, const TokenCallback& on_token, GenerateStats* stats,
                              std::span<const int32_t> earlier) {
  using clock = std::chrono::steady_clock;
  if (prompt.empty()) throw Error("generate: empty prompt");
  Sampler sampler(opt.sampler);
  // The penalty window may reach back into `earlier`; older tokens are never looked at.
  const size_t back = std::min<size_t>(earlier.size(), opt.sampler.repeat_last_n);
  std::vector<int32_t> history(earlier.end() - back, earlier.end()), out;
  history.insert(history.end(), prompt.begin(), prompt.end());
  std::vector<float> logits;
  const bool dev = opt.sampler.device_argmax_ok();
  auto step = [&](std::span<const int32_t> in) {
    if (dev) return model.forward_argmax(seq, in);
    model.forward(seq, in, &logits);
    return sampler.sample(logits, history);
  };
  GenerateStats st;
  st.n_prompt = uint32_t(prompt.size());
  const auto t0 = clock::now();
  if (opt.max_new_tokens == 0) {
    model.forward(seq, prompt, nullptr);
    if (stats) *stats = st;
    return out;
  }
  int32_t next = step(prompt);
  const auto t1 = clock::now();
  st.ttft_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  auto t_last = t1;
  while (true) {
    if (opt.stop_at_eog && tok.is_eog(next)) break;
    out.push_back(next);
    history.push_back(next);
    if (on_token && !on_token(next)) break;
    if (out.size() >= opt.max_new_tokens) break;
    if (seq.n_past() + 1 > seq.context_length()) break;  // context full: stop, documented
    next = step(std::span<const int32_t>(&next, 1));
    t_last = clock::now();
    ++st.n_decode_steps;
  }
  st.n_generated = uint32_t(out.size());
  st.decode_ms = std::chrono::duration<double, std::milli>(t_last - t1).count();
  if (stats) *stats = st;
  return out;
}

}  // namespace wgllm
