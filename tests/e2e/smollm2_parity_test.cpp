// End-to-end parity on the real default model (SmolLM2-135M-Instruct, GGUF Q4_1):
//   - CPU reference backend vs transformers (float64, fixtures from tools/fixtures/reference_logits.py)
//   - WebGPU backend vs CPU reference backend
//   - greedy tokens identical (64 steps) for WebGPU, CPU and transformers
//   - prefill(T) == prefill(T-1) + decode(1) and == arbitrary prefill splits, for a range of T
// Tolerances are on last-token logits (values up to ~30), absolute. Measured on the H200
// (2026-11-29): |cpu - transformers fp64| <= 7.8e-5, |webgpu - cpu| <= 7.7e-5 over the 4 prompts.
constexpr float kTolCpuVsRef = 5e-4f;   // f32 engine vs float64 transformers
constexpr float kTolGpuVsCpu = 5e-4f;   // WebGPU f32 vs CPU f32 (summation order, GPU FMA)
constexpr float kTolSplit = 5e-4f;      // same backend, different chunking of one sequence
#include "parity_util.h"
#include "core/error.h"

using namespace wgllm;
using namespace wgllm::test;

namespace {

struct Fixture {
  std::unique_ptr<ModelSource> src;
  nlohmann::json prompts, ref;
  std::unique_ptr<Model> cpu, gpu;
  Fixture() {
    src = ModelSource::open(cache_file("models/SmolLM2-135M-Instruct.Q4_1.gguf"));
    prompts = read_json(fixture("parity/smollm2_prompts.json"))["prompts"];
    ref = read_json(fixture("parity/smollm2_ref.json"));
    ModelOptions o;
    o.context_length = 1024;
    o.backend = BackendKind::CPU;
    cpu = create_model(*src, o);
    o.backend = BackendKind::WebGPU;
    gpu = create_model(*src, f32_activations(o));
  }
  const nlohmann::json& ref_of(const std::string& name) {
    for (auto& r : ref["prompts"])
      if (r["name"] == name) return r;
    throw std::runtime_error("no reference for " + name);
  }
};
Fixture& fx() {
  static Fixture f;
  return f;
}

}  // namespace

TEST(SmolLM2Parity, LastLogitsCpuVsTransformersVsWebGPU) {
  auto& f = fx();
  for (auto& p : f.prompts) {
    const std::string name = p["name"];
    auto ids = ids_of(p);
    auto ref = read_f32(fixture("parity/smollm2_" + name + ".f32"));
    auto c = last_logits(*f.cpu, ids), g = last_logits(*f.gpu, ids);
    Diff dc = diff(c, ref), dg = diff(g, c);
    std::printf("%-14s T=%3zu |cpu-ref| %.2e  |gpu-cpu| %.2e  (max |logit| %.1f)\n", name.c_str(), ids.size(),
                dc.max_abs, dg.max_abs, dc.ref_max);
    EXPECT_LE(dc.max_abs, kTolCpuVsRef) << name;
    EXPECT_LE(dg.max_abs, kTolGpuVsCpu) << name;
    EXPECT_EQ(dc.argmax_a, dc.argmax_b) << name;
    EXPECT_EQ(dg.argmax_a, dg.argmax_b) << name;
  }
}

TEST(SmolLM2Parity, Greedy64TokensIdentical) {
  auto& f = fx();
  for (auto& p : f.prompts) {
    const std::string name = p["name"];
    auto want = f.ref_of(name)["greedy"].get<std::vector<int32_t>>();
    auto ids = ids_of(p);
    auto c = greedy(*f.cpu, ids, 64);
    EXPECT_EQ(c, want) << "cpu vs transformers: " << name;
    if (name == "chat_capital" || name == "moby_dick") {  // GPU emulation is slow on CI: two prompts
      auto g = greedy(*f.gpu, ids, 64);
      EXPECT_EQ(g, c) << "webgpu vs cpu: " << name;
    }
  }
}

TEST(SmolLM2Parity, PrefillEqualsPrefillPlusDecodeForEveryLength) {
  auto& f = fx();
  auto ids = ids_of(f.prompts[2]);  // moby_dick
  Model& m = *f.gpu;
  auto seq = m.new_sequence();
  for (uint32_t T = 1; T <= 24; ++T) {
    std::vector<int32_t> pre(ids.begin(), ids.begin() + T);
    auto full = last_logits(m, pre);
    seq->truncate(0);  // reuses the same KV buffers: stale rows past n_past must not matter
    std::vector<float> step;
    if (T > 1) m.forward(*seq, std::span<const int32_t>(pre.data(), T - 1), nullptr);
    m.forward(*seq, std::span<const int32_t>(pre.data() + T - 1, 1), &step);
    Diff d = diff(step, full);
    EXPECT_LE(d.max_abs, kTolSplit) << "T=" << T;
    EXPECT_EQ(d.argmax_a, d.argmax_b) << "T=" << T;
  }
  // Arbitrary split points of one longer prompt.
  const std::vector<int32_t> pre(ids.begin(), ids.begin() + 61);
  auto full = last_logits(m, pre);
  for (std::vector<uint32_t> cuts : {std::vector<uint32_t>{1, 30}, {17, 18, 40}, {7, 8, 9, 33, 60}}) {
    seq->truncate(0);
    std::vector<float> l;
    uint32_t s = 0;
    cuts.push_back(61);
    for (uint32_t c : cuts) {
      m.forward(*seq, std::span<const int32_t>(pre.data() + s, c - s), c == 61 ? &l : nullptr);
      s = c;
    }
    EXPECT_LE(diff(l, full).max_abs, kTolSplit) << "split " << cuts.size();
  }
}

TEST(SmolLM2Parity, ContextOverflowIsAClearErrorAndChangesNothing) {
  auto& f = fx();
  Model& m = *f.gpu;
  auto seq = m.new_sequence(64);
  std::vector<int32_t> big(seq->context_length() + 1, 1);
  EXPECT_THROW(m.forward(*seq, big, nullptr), Error);
  EXPECT_EQ(seq->n_past(), 0u);
  std::vector<int32_t> bad = {1, int32_t(m.config().vocab)};
  EXPECT_THROW(m.forward(*seq, bad, nullptr), Error);
  EXPECT_EQ(seq->n_past(), 0u);
  EXPECT_THROW(seq->truncate(1), Error);
}

TEST(SmolLM2Parity, InterleavedSequencesDoNotLeak) {
  // Two sequences on one model advanced alternately give exactly what each gives alone.
  auto& f = fx();
  Model& m = *f.gpu;
  auto a_ids = ids_of(f.prompts[0]), b_ids = ids_of(f.prompts[2]);
  const auto a_alone = greedy(m, a_ids, 8), b_alone = greedy(m, b_ids, 8);
  auto sa = m.new_sequence(), sb = m.new_sequence();
  std::vector<int32_t> a, b;
  int32_t ta = m.forward_argmax(*sa, a_ids), tb = m.forward_argmax(*sb, b_ids);
  for (int i = 0; i < 8; ++i) {
    a.push_back(ta);
    b.push_back(tb);
    ta = m.forward_argmax(*sa, std::span<const int32_t>(&ta, 1));
    tb = m.forward_argmax(*sb, std::span<const int32_t>(&tb, 1));
  }
  EXPECT_EQ(a, a_alone);
  EXPECT_EQ(b, b_alone);
}

TEST(SmolLM2Parity, PrefillMatmulSwitchesMatchCpu) {
  // The prefill matmul's switches (kernels/matmul_tiled.h): per-row kernel, tiled kernel at the
  // adapter-default tile and at a different tile, and the f16 variant (when the adapter has
  // shader-f16: tolerance of f16 operands, measured 6.1e-2 on lavapipe (max |logit| 28.6); argmax must agree).
  auto& f = fx();
  struct V { const char* name; bool tiled; uint32_t bn, bt, rn, rt; bool f16; float tol; };
  const V vs[] = {{"per-row", false, 0, 0, 0, 0, false, kTolGpuVsCpu},
                  {"tiled", true, 0, 0, 0, 0, false, kTolGpuVsCpu},
                  {"tiled 64x32/8x4", true, 64, 32, 8, 4, false, kTolGpuVsCpu},
                  {"tiled f16", true, 0, 0, 0, 0, true, 0.2f}};
  const auto ids = ids_of(f.prompts[2]);  // moby_dick: 116 tokens
  const auto want = last_logits(*f.cpu, ids);
  for (const V& v : vs) {
    ModelOptions o;
    o.context_length = 256;
    o.kernels.matmul_tiled = v.tiled ? 1 : 0;
    o.kernels.matmul_tile_n = v.bn, o.kernels.matmul_tile_t = v.bt, o.kernels.matmul_reg_n = v.rn,
    o.kernels.matmul_reg_t = v.rt;
    o.kernels.matmul_tiled_f16 = v.f16;
    auto m = create_model(*f.src, f32_activations(o));
    Diff d = diff(last_logits(*m, ids), want);
    std::printf("%-16s |gpu-cpu| %.2e\n", v.name, d.max_abs);
    EXPECT_LE(d.max_abs, v.tol) << v.name;
    EXPECT_EQ(d.argmax_a, d.argmax_b) << v.name;
  }
}
