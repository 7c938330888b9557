// The decode fusions (KernelOptions::fuse_norm, fuse_rope_kv, fuse_silu, fuse_qkv_rope_kv, fuse_qk_norm,
// fuse_attn_gate, fuse_attn_combine, ModelOptions::fuse_qkv; docs/FLAGS.md) turned off one at a time, and all at once, on every
// architecture (fuse_qk_norm, fuse_attn_gate and fuse_qkv alone on the hybrids, whose attention layers they change): SmolLM2-135M Q4_1 (llama), a tiny
// qwen2 (Q/K/V biases in the decode QKV epilogue; its last layer's V of another weight type, so that
// layer's projection is two parts), the tiny LFM2 and Qwen3.5 fixtures. Each configuration runs a prefill longer than kernels::kFusedMaxTokens (the
// unfused path), a 5-token forward (fused, one token group of several tokens) and greedy decode
// steps (fused, T = 1), and must give
//   - the CPU reference's greedy tokens and last logits within the parity tests' tolerance, and
//   - logits BIT-IDENTICAL to the all-fusions-on configuration (every fusion keeps the order).
// Both matrix-vector kernels for T <= 8 are covered (KernelOptions::matvec_subgroup): the per-row
// matmul.wgsl (the software-adapter default) and matvec.wgsl (instantiations Matvec and
// MatvecCombine; all-on and all-off, each compared with matvec.wgsl's own all-on run, since its
// summation order differs; decode attention there splits every 8 keys, so that the attention merge
// folded into the output projection, fuse_attn_combine, runs).
// Also: naga's bounds checks on vs off (ModelOptions::shader_runtime_checks), bit-identical, and its
// loop bounding (shader_loop_bounding), within the parity tolerance.
// Checked to fail: qk_norm_rope_kv.wgsl's key norm as x * (scale * w) fails lfm2_off_qk_norm and
// qwen35_off_qk_norm (logits bits differ from all-on).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <tuple>

#include "models/switches.h"
#include "parity_util.h"
#include "tiny_gguf_util.h"

using namespace wgllm;
using namespace wgllm::test;

namespace {

std::string path_of(const std::string& model) {
  if (model == "smollm2") return cache_file("models/SmolLM2-135M-Instruct.Q4_1.gguf");
  if (model == "lfm2") return fixture("lfm2_tiny/lfm2_tiny.f32.gguf");
  if (model == "qwen2") {  // Q/K/V biases; layer 1's V of another type than its Q and K
    TinyLlamaSpec s;
    s.d = 128, s.head_dim = 32, s.q8_projections = true, s.f32_last_v = true;
    return write_tiny_gguf("qwen2_fusions.gguf", tiny_llama_family_doc("qwen2", s));
  }
  return fixture("qwen35_tiny");
}

struct RunResult {
  std::vector<int32_t> tokens;   // greedy tokens after the prompt and the 5-token forward
  std::vector<float> logits;     // last logits of the 5-token forward, then of the last decode step
};

constexpr int kDecodeSteps = 6;

RunResult run(Model& m, uint32_t vocab) {
  std::vector<int32_t> prompt, five;
  for (int i = 0; i < 13; ++i) prompt.push_back(int32_t((i * 37 + 11) % std::min<uint32_t>(vocab, 280)));
  for (int i = 0; i < 5; ++i) five.push_back(int32_t((i * 53 + 5) % std::min<uint32_t>(vocab, 280)));
  RunResult r;
  auto seq = m.new_sequence(256);
  m.forward(*seq, prompt, nullptr);
  std::vector<float> l;
  m.forward(*seq, five, &l);
  r.logits = l;
  int32_t t = int32_t(std::max_element(l.begin(), l.end()) - l.begin());
  for (int i = 0; i < kDecodeSteps; ++i) {
    r.tokens.push_back(t);
    m.forward(*seq, std::span<const int32_t>(&t, 1), &l);
    t = int32_t(std::max_element(l.begin(), l.end()) - l.begin());
  }
  r.tokens.push_back(t);
  r.logits.insert(r.logits.end(), l.begin(), l.end());
  return r;
}

struct Cache {
  std::map<std::string, std::unique_ptr<ModelSource>> src;
  std::map<std::string, RunResult> cpu, gpu_all_on;  // gpu_all_on keyed by model + kernel
  ModelSource& source(const std::string& m) {
    auto& s = src[m];
    if (!s) s = ModelSource::open(path_of(m));
    return *s;
  }
};
Cache& cache() {
  static Cache c;
  return c;
}

RunResult run_with(const std::string& model, BackendKind backend, const std::string& off, bool matvec = false,
                   int shader_checks = 0,  // bit 0: shader_runtime_checks, bit 1: shader_loop_bounding
                   uint32_t submit_chunk = ModelOptions{}.submit_chunk) {
  ModelSource& s = cache().source(model);
  ModelOptions o;
  o.context_length = 256;
  o.backend = backend;
  o.kernels.fuse_norm = off != "norm" && off != "all";
  o.kernels.fuse_rope_kv = off != "rope_kv" && off != "all";
  o.kernels.fuse_silu = off != "silu" && off != "all";
  o.kernels.fuse_qkv_rope_kv = off != "qkv_rope_kv" && off != "all";
  o.kernels.fuse_qk_norm = off != "qk_norm" && off != "all";
  o.kernels.fuse_attn_gate = off != "attn_gate" && off != "all";
  o.kernels.fuse_attn_combine = off != "attn_combine" && off != "all";
  o.fuse_qkv = off != "qkv" && off != "all";
  o.kernels.matvec_subgroup = matvec ? 1 : 0;
  if (matvec) {  // decode attention splits every 8 keys (software adapters: from 1024), so that
    o.kernels.attention_decode_split_min = 0;  // --fuse-attn-combine has partials to merge
    o.kernels.attention_decode_split_len = 8;
  }
  o.shader_runtime_checks = (shader_checks & 1) != 0;
  o.shader_loop_bounding = (shader_checks & 2) != 0;
  f32_activations(o);
  o.submit_chunk = submit_chunk;
  // Diagnostics (device recipes): more switches in the native CLI's spelling for every run of the
  // test, e.g. WGLLM_TEST_SWITCHES="--gdn-decode-row-split 1" to find which kernel a difference
  // comes from.
  if (const char* more = std::getenv("WGLLM_TEST_SWITCHES")) apply_switch_args(o, more);
  auto m = create_model(s, o);
  return run(*m, s.config.vocab);
}

}  // namespace

class FusionSwitches : public ::testing::TestWithParam<std::tuple<std::string, std::string, bool>> {};

TEST_P(FusionSwitches, MatchCpuAndBitIdenticalToAllOn) {
  const auto& [model, off, matvec] = GetParam();
  const std::string key = model + (matvec ? "/matvec" : "/matmul");
  auto& c = cache();
  if (!c.cpu.count(model)) c.cpu[model] = run_with(model, BackendKind::CPU, "none");
  if (!c.gpu_all_on.count(key)) c.gpu_all_on[key] = run_with(model, BackendKind::WebGPU, "none", matvec);
  const RunResult& cpu = c.cpu[model];
  const RunResult& on = c.gpu_all_on[key];
  const RunResult got = off == "none" ? on : run_with(model, BackendKind::WebGPU, off, matvec);
  const float tol = model == "smollm2" || model == "qwen2" ? 5e-4f : 1e-4f;  // the parity tests' |webgpu - cpu| tolerances
  EXPECT_EQ(got.tokens, cpu.tokens) << key << " off=" << off;
  const Diff d = diff(got.logits, cpu.logits);
  std::printf("%s off=%s: |webgpu - cpu| %.2e\n", key.c_str(), off.c_str(), d.max_abs);
  EXPECT_LE(d.max_abs, tol) << key << " off=" << off;
  ASSERT_EQ(got.logits.size(), on.logits.size());
  EXPECT_EQ(std::memcmp(got.logits.data(), on.logits.data(), on.logits.size() * 4), 0)
      << key << " off=" << off << ": logits differ from the all-fusions-on run";
}

// ModelOptions::shader_runtime_checks (--shader-checks): naga's bounds checks change no result while
// every access is in bounds: logits bit-identical with and without, on every architecture and both
// matrix-vector kernels. shader_loop_bounding (--shader-loop-bounding) adds a counter to every loop,
// which changes the code the driver's compiler optimises: on the H100 (2026-12-06) the fused
// DeltaNet decode step with its GPU default row split 2 then rounds differently (the driver's choice
// of fused multiply-adds, which WGSL allows; deterministic either way, bit-identical with
// --gdn-decode-row-split 1): greedy tokens identical and logits within the parity tolerance.
TEST(ShaderRuntimeChecks, BoundsBitIdenticalLoopBoundingWithinTolerance) {
  for (const std::string model : {"smollm2", "lfm2", "qwen35"})
    for (bool matvec : {false, true}) {
      const RunResult off = run_with(model, BackendKind::WebGPU, "none", matvec, 0);
      for (int checks : {1, 2, 3}) {  // bit 0: bounds checks, bit 1: loop bounding
        const RunResult on = run_with(model, BackendKind::WebGPU, "none", matvec, checks);
        const std::string what = model + " matvec=" + std::to_string(matvec) + " checks=" + std::to_string(checks);
        EXPECT_EQ(on.tokens, off.tokens) << what;
        ASSERT_EQ(on.logits.size(), off.logits.size());
        if (checks == 1) {
          EXPECT_EQ(std::memcmp(on.logits.data(), off.logits.data(), on.logits.size() * 4), 0)
              << what << ": logits differ with and without naga's bounds checks";
        } else {
          const float tol = model == "smollm2" ? 5e-4f : 1e-4f;  // the parity tests' |webgpu - cpu| tolerances
          EXPECT_LE(diff(on.logits, off.logits).max_abs, tol) << what << ": loop bounding moved the logits";
        }
      }
    }
}

// ModelOptions::submit_chunk (--submit-chunk): submitting a forward in pieces of N dispatches changes
// no result (queue order): logits bit-identical to one submission per forward, for chunks of 1
// (every dispatch its own submission, copies between chunks) and 7 (chunk ends inside layers).
TEST(SubmitChunk, BitIdenticalToOneSubmission) {
  for (const std::string model : {"smollm2", "lfm2", "qwen35"}) {
    const RunResult one = run_with(model, BackendKind::WebGPU, "none", true, 0, 0);
    for (uint32_t chunk : {1u, 7u}) {
      const RunResult got = run_with(model, BackendKind::WebGPU, "none", true, 0, chunk);
      EXPECT_EQ(got.tokens, one.tokens) << model << " chunk=" << chunk;
      ASSERT_EQ(got.logits.size(), one.logits.size());
      EXPECT_EQ(std::memcmp(got.logits.data(), one.logits.data(), one.logits.size() * 4), 0)
          << model << " chunk=" << chunk << ": logits differ from one submission per forward";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllModels, FusionSwitches,
                         ::testing::Combine(::testing::Values("smollm2", "qwen2", "lfm2", "qwen35"),
                                            ::testing::Values("none", "norm", "rope_kv", "silu", "qkv_rope_kv", "all"),
                                            ::testing::Values(false)),
                         [](const auto& i) { return std::get<0>(i.param) + "_off_" + std::get<1>(i.param); });
INSTANTIATE_TEST_SUITE_P(Hybrids, FusionSwitches,
                         ::testing::Combine(::testing::Values("lfm2", "qwen35"), ::testing::Values("qk_norm", "qkv", "attn_gate"),
                                            ::testing::Values(false)),
                         [](const auto& i) { return std::get<0>(i.param) + "_off_" + std::get<1>(i.param); });
INSTANTIATE_TEST_SUITE_P(Matvec, FusionSwitches,
                         ::testing::Combine(::testing::Values("smollm2", "qwen2", "lfm2", "qwen35"),
                                            ::testing::Values("none", "qkv", "all"), ::testing::Values(true)),
                         [](const auto& i) { return std::get<0>(i.param) + "_off_" + std::get<1>(i.param); });
INSTANTIATE_TEST_SUITE_P(MatvecCombine, FusionSwitches,
                         ::testing::Combine(::testing::Values("smollm2", "qwen2", "lfm2"), ::testing::Values("attn_combine"),
                                            ::testing::Values(true)),
                         [](const auto& i) { return std::get<0>(i.param) + "_off_" + std::get<1>(i.param); });
