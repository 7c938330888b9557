// --sparse-attn end to end (kernels/sparse_attention.h) on the tiny LFM2 and Qwen3.5 fixtures
// (attention layers of 3 query heads and 1 KV head; head dims 24 and 24):
//   - below --sparse-threshold the dense path runs unchanged: with the switch on, logits are
//     BIT-IDENTICAL to the switch off (WebGPU and CPU), and no sparse kernel is dispatched;
//   - past a lowered threshold (blocks of 8 keys, top-2 blocks, window 2, threshold 44 keys) the
//     sparse kernels run (in prefill chunks and decode) and WebGPU matches the CPU reference's sparse
//     path within the parity tests' tolerance, while the logits differ from dense attention;
//   - the warm-up compiles the sparse pipelines: no pipeline is compiled by a later sparse forward;
//   - the per-sequence block-means cache gives a fresh sequence's bits after a snapshot restore
//     and after a session import.
// Shapes are small so that the binary runs in seconds on lavapipe.
#include <algorithm>
#include <memory>
#include <string>

#include "parity_util.h"
#include "runtime/warmup.h"

using namespace wgllm;
using namespace wgllm::test;

namespace {

constexpr float kTolGpuVsCpu = 1e-4f;  // as the parity tests: WebGPU f32 vs CPU f32 (summation order)

std::string path_of(const std::string& model) {
  if (model == "lfm2") return fixture("lfm2_tiny/lfm2_tiny.f32.gguf");
  return fixture("qwen35_tiny");
}

ModelOptions options(BackendKind b, bool sparse, uint32_t threshold) {
  ModelOptions o;
  o.backend = b;
  o.context_length = 256;
  o.prefill_chunk = 20;  // several prefill chunks (not block-aligned: block 7 spans two), the later past the threshold
  o.kernels.sparse_attn = sparse;
  o.kernels.sparse_block = 8;
  o.kernels.sparse_top_k = 2;
  o.kernels.sparse_window = 2;
  o.kernels.sparse_threshold = threshold;
  return o;
}

struct RunResult {
  std::vector<float> logits;  // last logits of the prefill, then of each decode step
  bool sparse_dispatched = false;
  size_t pipelines_after_warmup = 0, pipelines_at_end = 0;
};

// Prefill of n_prompt tokens (chunks of 20; the CPU backend groups its attention rows the same way)
// with logits, then 4 greedy decode steps.
RunResult run(ModelSource& src, const ModelOptions& o, uint32_t n_prompt, bool warm = false) {
  auto m = create_model(src, o);
  RunResult r;
  if (warm) {
    warm_up(*m);
    r.pipelines_after_warmup = m->pipeline_count();
  }
  const uint32_t vocab = m->config().vocab;
  std::vector<int32_t> prompt;
  for (uint32_t i = 0; i < n_prompt; ++i) prompt.push_back(int32_t((i * 37 + 11) % std::min<uint32_t>(vocab, 280)));
  auto seq = m->new_sequence(256);
  m->set_profiling(true);
  std::vector<float> l;
  m->forward(*seq, prompt, &l);
  auto saw_sparse = [&] {
    for (const auto& d : m->last_dispatches()) r.sparse_dispatched |= d.label.find("sparse") != std::string::npos;
  };
  saw_sparse();
  r.logits = l;
  for (int i = 0; i < 4; ++i) {
    int32_t t = int32_t(std::max_element(l.begin(), l.end()) - l.begin());
    m->forward(*seq, std::span<const int32_t>(&t, 1), &l);
    saw_sparse();
    r.logits.insert(r.logits.end(), l.begin(), l.end());
  }
  r.pipelines_at_end = m->pipeline_count();
  return r;
}

class SparseE2E : public ::testing::TestWithParam<std::string> {};

TEST_P(SparseE2E, BelowThresholdBitIdenticalToOff) {
  auto src = ModelSource::open(path_of(GetParam()));
  for (BackendKind b : {BackendKind::WebGPU, BackendKind::CPU}) {
    const RunResult off = run(*src, options(b, false, 8192), 40);
    const RunResult on = run(*src, options(b, true, 8192), 40);  // context 44 < 8192
    EXPECT_EQ(on.logits, off.logits) << GetParam() << (b == BackendKind::CPU ? " cpu" : " webgpu");
    EXPECT_FALSE(on.sparse_dispatched) << GetParam();
  }
}

TEST_P(SparseE2E, PastThresholdGpuMatchesCpuSparse) {
  auto src = ModelSource::open(path_of(GetParam()));
  const RunResult gpu = run(*src, options(BackendKind::WebGPU, true, 44), 70, /*warm=*/true);
  const RunResult cpu = run(*src, options(BackendKind::CPU, true, 44), 70);
  const RunResult dense = run(*src, options(BackendKind::CPU, false, 44), 70);
  EXPECT_TRUE(gpu.sparse_dispatched) << GetParam();
  const Diff d = diff(gpu.logits, cpu.logits), dd = diff(cpu.logits, dense.logits);
  std::printf("%s: sparse webgpu vs cpu max |diff| %.3g; cpu sparse vs dense %.3g\n", GetParam().c_str(), d.max_abs,
              dd.max_abs);
  EXPECT_LE(d.max_abs, kTolGpuVsCpu) << GetParam();
  EXPECT_GT(dd.max_abs, 10 * kTolGpuVsCpu) << GetParam() << ": the sparse path must change what is attended";
  EXPECT_EQ(gpu.pipelines_at_end, gpu.pipelines_after_warmup) << GetParam() << ": the warm-up must compile the sparse kernels";
}

TEST_P(SparseE2E, BlockMeansCacheSurvivesRollbackAndImport) {
  // Each KvState keeps its layer's block means (kernels::SparseMeansCache) across forwards; a
  // snapshot restore (rollback by length) and a session import must leave it giving the bits a
  // fresh sequence gives: decode 12 tokens after a 70-token prompt (blocks complete at 72 and 80),
  // restore to 70 and decode the same tokens again, import the 70-token state into a sequence that
  // ran another text and decode them there, and run everything in a fresh sequence.
  auto src = ModelSource::open(path_of(GetParam()));
  auto m = create_model(*src, options(BackendKind::WebGPU, true, 44));
  const uint32_t vocab = m->config().vocab;
  std::vector<int32_t> prompt;
  for (uint32_t i = 0; i < 70; ++i) prompt.push_back(int32_t((i * 37 + 11) % std::min<uint32_t>(vocab, 280)));
  std::vector<int32_t> gen;
  auto decode = [&](Sequence& seq, std::vector<float> l) {
    std::vector<float> all;
    for (size_t i = 0; i < 12; ++i) {
      if (gen.size() <= i) gen.push_back(int32_t(std::max_element(l.begin(), l.end()) - l.begin()));
      m->forward(seq, std::span<const int32_t>(&gen[i], 1), &l);
      all.insert(all.end(), l.begin(), l.end());
    }
    return all;
  };
  auto a = m->new_sequence(256);
  std::vector<float> l0;
  m->forward(*a, prompt, &l0);
  auto snap = a->snapshot();
  const std::vector<float> first = decode(*a, l0);
  a->restore(*snap);
  EXPECT_EQ(decode(*a, l0), first) << GetParam() << ": after a restore";
  a->restore(*snap);
  const auto blobs = a->export_state();
  auto c = m->new_sequence(256);
  std::vector<int32_t> other;  // another text first: c's block means are then those of other keys
  for (uint32_t i = 0; i < 80; ++i) other.push_back(int32_t((i * 53 + 5) % std::min<uint32_t>(vocab, 280)));
  m->forward(*c, other, nullptr);
  c->import_state(70, blobs);
  EXPECT_EQ(decode(*c, l0), first) << GetParam() << ": after an import";
  auto d = m->new_sequence(256);
  std::vector<float> l1;
  m->forward(*d, prompt, &l1);
  EXPECT_EQ(l1, l0);
  EXPECT_EQ(decode(*d, l1), first) << GetParam() << ": a fresh sequence";
}

INSTANTIATE_TEST_SUITE_P(Models, SparseE2E, ::testing::Values("lfm2", "qwen35"));

}  // namespace
