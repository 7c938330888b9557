// Pipelined greedy decoding (ModelOptions::decode_pipeline, runtime/decode_pipeline.h) against
// the plain loop on one model file: the same generate() calls on two WebGPU models (switch off /
// on) must give the same tokens and leave the sequence in the same state (n_past and every byte of
// export_state(): KV rows [0, n_past), conv and delta states), for each way a generation ends:
// max tokens, a callback's stop (stop strings), an end-of-generation token (detected one step
// late: the speculated step is taken back), a full context, and a continuation of a stopped
// sequence (the state left behind is the one the next turn builds on).
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/model.h"
#include "models/source.h"
#include "parity_util.h"
#include "runtime/generate.h"

namespace wgllm::test {

struct PipelineRun {
  std::vector<int32_t> tokens, tokens2;  // the generation, and a continuation (when asked)
  uint32_t n_past = 0;
  std::vector<StateBlob> state;
};

/// One generate() on a new sequence of ctx positions; with `cont` > 0 then a second generate() of
/// `cont` tokens fed with the last token of the first (the token sampled but not yet fed).
inline PipelineRun pipeline_run(Model& m, uint32_t ctx, const std::vector<int32_t>& prompt, uint32_t max_new,
                                const std::function<bool(int32_t)>& is_eog, int stop_after, uint32_t cont) {
  auto seq = m.new_sequence(ctx);
  GenerateOptions g;
  g.max_new_tokens = max_new;
  int n = 0;
  PipelineRun r;
  r.tokens = generate(m, *seq, is_eog, prompt, g, [&](int32_t) { return stop_after <= 0 || ++n < stop_after; });
  if (cont && !r.tokens.empty()) {
    GenerateOptions g2;
    g2.max_new_tokens = cont;
    const std::vector<int32_t> last{r.tokens.back()};
    r.tokens2 = generate(m, *seq, [](int32_t) { return false; }, last, g2);
  }
  r.n_past = seq->n_past();
  r.state = seq->export_state();
  return r;
}

inline void expect_same_run(const PipelineRun& a, const PipelineRun& b, const std::string& what) {
  EXPECT_EQ(a.tokens, b.tokens) << what;
  EXPECT_EQ(a.tokens2, b.tokens2) << what;
  EXPECT_EQ(a.n_past, b.n_past) << what;
  ASSERT_EQ(a.state.size(), b.state.size()) << what;
  for (size_t i = 0; i < a.state.size(); ++i) {
    EXPECT_EQ(a.state[i].name, b.state[i].name) << what;
    EXPECT_TRUE(a.state[i].data == b.state[i].data) << what << ": state '" << a.state[i].name << "' differs";
  }
}

/// The comparison on src: generations of n >= 4 tokens (ctx >= prompt + n + 8 positions). With
/// binding_cap, both models are created under ScopedBindingCap(binding_cap) (weights in row blocks).
inline void expect_pipeline_identical(const ModelSource& src, const std::vector<int32_t>& prompt, uint32_t ctx,
                                      uint32_t n = 9, const char* binding_cap = nullptr) {
  ModelOptions o;
  o.backend = BackendKind::WebGPU;
  o.context_length = ctx;
  std::unique_ptr<Model> plain, piped;
  {
    const ScopedBindingCap cap(binding_cap);
    o.decode_pipeline = false;  // the plain loop (the switch is on by default)
    plain = create_model(src, o);
    o.decode_pipeline = true;
    piped = create_model(src, o);
  }
  ASSERT_FALSE(plain->async_argmax());
  ASSERT_TRUE(piped->async_argmax()) << "the pipelined path is not taken";
  const auto never = [](int32_t) { return false; };
  const uint32_t P = uint32_t(prompt.size());
  // max tokens (nothing speculated past the last step) with a continuation
  const PipelineRun ref = pipeline_run(*plain, ctx, prompt, n, never, 0, 4);
  ASSERT_EQ(ref.tokens.size(), n);
  expect_same_run(ref, pipeline_run(*piped, ctx, prompt, n, never, 0, 4), "max tokens");
  // a callback stop after 3 tokens (a stop string): one step speculated past it, taken back
  expect_same_run(pipeline_run(*plain, ctx, prompt, n, never, 3, 4), pipeline_run(*piped, ctx, prompt, n, never, 3, 4),
                  "callback stop");
  // an end-of-generation token: the 4th generated token of the reference
  const int32_t eog = ref.tokens[3];
  const auto is_eog = [eog](int32_t t) { return t == eog; };
  expect_same_run(pipeline_run(*plain, ctx, prompt, n, is_eog, 0, 3), pipeline_run(*piped, ctx, prompt, n, is_eog, 0, 3),
                  "end of generation");
  // a full context: the sequence holds prompt + 4 positions
  expect_same_run(pipeline_run(*plain, P + 4, prompt, n + 8, never, 0, 0),
                  pipeline_run(*piped, P + 4, prompt, n + 8, never, 0, 0), "full context");
}

}  // namespace wgllm::test
