// Pipelined greedy decoding == the plain loop (tests/e2e/decode_pipeline_util.h) on SmolLM2-135M
// Q4_1 (llama), the tiny LFM2 fixture (ShortConv state) and the tiny Qwen3.5 fixture (DeltaNet
// conv and recurrent state); the tiny qwen2 and gemma3 models are checked in their parity tests.
// Also: the one-step undo itself (Sequence::prepare_undo / undo), and the switch's refusals.
#include "core/error.h"
#include "decode_pipeline_util.h"
#include "parity_util.h"
#include "runtime/decode_pipeline.h"

using namespace wgllm;
using namespace wgllm::test;

namespace {

std::vector<int32_t> prompt_for(uint32_t vocab) {
  std::vector<int32_t> p;
  for (int i = 0; i < 5; ++i) p.push_back(int32_t((i * 37 + 11) % std::min<uint32_t>(vocab, 280)));
  return p;
}

void check(const std::string& path, uint32_t n = 9) {
  auto src = ModelSource::open(path);
  expect_pipeline_identical(*src, prompt_for(src->config.vocab), 64, n);
}

}  // namespace

TEST(DecodePipeline, Smollm2) { check(cache_file("models/SmolLM2-135M-Instruct.Q4_1.gguf"), 5); }  // fewer steps: 135M on lavapipe
TEST(DecodePipeline, Lfm2) { check(fixture("lfm2_tiny/lfm2_tiny.f32.gguf")); }
TEST(DecodePipeline, Qwen35) { check(fixture("qwen35_tiny")); }

// Undo after a speculated forward restores the recurrent state exactly, and refuses anything but
// exactly one forward since prepare_undo().
TEST(DecodePipeline, UndoRestoresRecurrentState) {
  auto src = ModelSource::open(fixture("qwen35_tiny"));
  ModelOptions o;
  o.context_length = 64;
  o.decode_pipeline = true;
  auto m = create_model(*src, o);
  auto seq = m->new_sequence();
  const auto p = prompt_for(src->config.vocab);
  const int32_t t0 = m->argmax_result(m->forward_argmax_async(*seq, p, false));
  const auto before = seq->export_state();
  const uint32_t n = seq->n_past();
  const uint64_t ticket = m->forward_argmax_async(*seq, {}, true);  // reads t0 on the device
  const int32_t t1 = m->argmax_result(ticket);
  EXPECT_EQ(seq->n_past(), n + 1);
  seq->undo();
  EXPECT_EQ(seq->n_past(), n);
  const auto after = seq->export_state();
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(before[i].data == after[i].data) << before[i].name;
  EXPECT_THROW(seq->undo(), Error);  // nothing left to take back
  // The device-token forward equals a host-token forward of t0.
  auto seq2 = m->new_sequence();
  m->forward_argmax(*seq2, p);
  EXPECT_EQ(m->forward_argmax(*seq2, std::span<const int32_t>(&t0, 1)), t1);
}

TEST(DecodePipeline, RefusedWhenOffOrWithoutDeviceId) {
  auto src = ModelSource::open(fixture("lfm2_tiny/lfm2_tiny.f32.gguf"));
  ModelOptions o;
  o.context_length = 64;
  o.decode_pipeline = false;
  auto off = create_model(*src, o);
  auto seq = off->new_sequence();
  const auto p = prompt_for(src->config.vocab);
  EXPECT_THROW(off->forward_argmax_async(*seq, p, false), Error);
  EXPECT_EQ(seq->n_past(), 0u);
  o.decode_pipeline = true;
  auto on = create_model(*src, o);
  auto s2 = on->new_sequence();
  on->forward(*s2, p, nullptr);  // no argmax on the device yet
  EXPECT_THROW(on->forward_argmax_async(*s2, {}, true), Error);
  EXPECT_EQ(s2->n_past(), uint32_t(p.size()));
  // GreedyDecoder falls back to plain forwards when the switch is off.
  auto s3 = off->new_sequence();
  GreedyDecoder d(*off, *s3);
  EXPECT_FALSE(d.pipelined());
  const int32_t t = d.next(p, true);
  EXPECT_EQ(s3->n_past(), uint32_t(p.size()));
  (void)t;
}

// --decode-submit-chunk: a pipelined one-token step cut into submissions of 3 dispatches (prompts in
// 5) gives the plain loop's tokens and final state, like whole steps (the default, 0) do.
// (Where a step is cut must not matter: the chained argmax id and the undo copies recorded at the
// step's start travel in its first submission.)
TEST(DecodePipeline, DecodeSubmitChunkKeepsTokensAndState) {
  auto src = ModelSource::open(fixture("lfm2_tiny/lfm2_tiny.f32.gguf"));
  const auto prompt = prompt_for(src->config.vocab);
  ModelOptions o;
  o.backend = BackendKind::WebGPU;
  o.context_length = 64;
  o.decode_pipeline = false;
  auto plain = create_model(*src, o);
  o.decode_pipeline = true;
  o.submit_chunk = 5;
  const auto never = [](int32_t) { return false; };
  const PipelineRun ref = pipeline_run(*plain, 64, prompt, 9, never, 0, 4);
  for (uint32_t chunk : {0u, 3u}) {
    o.decode_submit_chunk = chunk;
    auto piped = create_model(*src, o);
    ASSERT_TRUE(piped->async_argmax());
    expect_same_run(ref, pipeline_run(*piped, 64, prompt, 9, never, 0, 4), "decode_submit_chunk=" + std::to_string(chunk));
  }
}
