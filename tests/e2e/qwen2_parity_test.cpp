// Qwen2 (models/qwen2.h) on a tiny random model written here (2 layers, d 64, 4 query / 2 KV heads
// of 16, FFN 96, vocab 128, Q/K/V biases, untied output; attn_q and ffn_up stored as Q8_0, the
// rest f32), on both backends:
//   - config: arch qwen2, NeoX RoPE, theta from qwen2.rope.freq_base, untied / tied output
//   - WebGPU vs CPU reference last-token logits (T = 1, 9, 40)
//   - greedy tokens identical for 32 steps
//   - prefill(T) == prefill(T-1) + decode(1) on both backends
//   - the biases are used (zeroing them changes the logits on both backends, identically)
//   - a missing bias tensor is a load error naming it
// And on the real Qwen2.5-Coder-1.5B-Instruct Q4_K_M file when it is installed and
// WGLLM_REAL_MODEL_TESTS=1 (slow: ~6 GB of f32 weights on the CPU; not run by CI): CPU and
// WebGPU greedy continuations of a raw prompt agree.
// Tolerances are absolute on logits of magnitude <= ~10, as in the other parity tests.
#include <cstring>
#include <filesystem>
#include <random>
#include <set>

#include "core/error.h"
#include "core/half.h"
#include "formats/gguf_test_doc.h"
#include "formats/st_test_writer.h"
#include <fstream>
#include <stdlib.h>
#include "parity_util.h"
#include "decode_pipeline_util.h"
#include "tiny_gguf_util.h"
#include "runtime/perplexity.h"
#include "tokenizer/tokenizer.h"

using namespace wgllm;
using namespace wgllm::test;

namespace {

constexpr float kTolGpuVsCpu = 1e-4f;  // WebGPU f32 vs CPU f32 (summation order, FMA)
constexpr float kTolSplit = 1e-4f;     // same backend, different chunking of one sequence

constexpr uint32_t kD = 64, kH = 4, kKV = 2, kHD = 16, kF = 96, kV = 128, kL = 2;

/// Q8_0 blocks (ggml block_q8_0: f16 d, 32 x int8) of n random values.
std::vector<uint8_t> q8_0_random(uint64_t n, std::mt19937& rng) {
  std::vector<uint8_t> b;
  std::uniform_int_distribution<int> q(-127, 127);
  for (uint64_t i = 0; i < n / 32; ++i) {
    const uint16_t d = f32_to_f16(0.2f / 127.0f * float(1 + i % 3));
    b.push_back(uint8_t(d & 0xff));
    b.push_back(uint8_t(d >> 8));
    for (int j = 0; j < 32; ++j) b.push_back(uint8_t(int8_t(q(rng))));
  }
  return b;
}

/// The tiny qwen2 model. zero_bias: all Q/K/V biases 0; tied: no output.weight;
/// drop: a tensor name to leave out.
GgufDoc qwen2_doc(bool zero_bias = false, bool tied = false, const std::string& drop = "") {
  GgufDoc d;
  d.set_str("general.architecture", "qwen2").set_str("general.name", "tiny-qwen2");
  d.set_u32("qwen2.block_count", kL).set_u32("qwen2.embedding_length", kD).set_u32("qwen2.feed_forward_length", kF);
  d.set_u32("qwen2.attention.head_count", kH).set_u32("qwen2.attention.head_count_kv", kKV);
  d.set_u32("qwen2.context_length", 4096).set_f32("qwen2.attention.layer_norm_rms_epsilon", 1e-6f);
  d.set_f32("qwen2.rope.freq_base", 1000000.0f);
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto t = [&](const std::string& name, std::vector<uint64_t> shape, float base, float sd, bool q8 = false) {
    uint64_t n = 1;
    for (uint64_t s : shape) n *= s;
    if (name == drop) return;
    if (q8) {
      d.add_tensor(name, DType::Q8_0, std::move(shape), q8_0_random(n, rng));
      return;
    }
    std::vector<float> v(n);
    for (float& x : v) x = base + sd * nd(rng);
    d.add_tensor(name, DType::F32, std::move(shape), bytes_of(v));
  };
  t("token_embd.weight", {kD, kV}, 0.0f, 1.0f);
  t("output_norm.weight", {kD}, 1.0f, 0.1f);
  if (!tied) t("output.weight", {kD, kV}, 0.0f, 0.3f);
  const float bsd = zero_bias ? 0.0f : 0.5f;
  for (uint32_t l = 0; l < kL; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    t(p + "attn_norm.weight", {kD}, 1.0f, 0.1f);
    t(p + "attn_q.weight", {kD, kH * kHD}, 0.0f, 0.2f, true);
    t(p + "attn_k.weight", {kD, kKV * kHD}, 0.0f, 0.2f);
    t(p + "attn_v.weight", {kD, kKV * kHD}, 0.0f, 0.2f);
    t(p + "attn_q.bias", {kH * kHD}, 0.0f, bsd);
    t(p + "attn_k.bias", {kKV * kHD}, 0.0f, bsd);
    t(p + "attn_v.bias", {kKV * kHD}, 0.0f, bsd);
    t(p + "attn_output.weight", {kH * kHD, kD}, 0.0f, 0.15f);
    t(p + "ffn_norm.weight", {kD}, 1.0f, 0.1f);
    t(p + "ffn_gate.weight", {kD, kF}, 0.0f, 0.2f);
    t(p + "ffn_up.weight", {kD, kF}, 0.0f, 0.2f, true);
    t(p + "ffn_down.weight", {kF, kD}, 0.0f, 0.15f);
  }
  return d;
}

std::string write_doc(const std::string& name, const GgufDoc& d) { return write_tiny_gguf(name, d); }
using Models = TinyModels;
Models& fx() {
  static Models m(write_tiny_gguf("qwen2_tiny.gguf", qwen2_doc()), 256);
  return m;
}
std::vector<int32_t> prompt(size_t T, uint32_t seed) { return random_prompt(T, seed, kV); }
}  // namespace

TEST(Qwen2Parity, Config) {
  const ModelConfig& c = fx().src->config;
  EXPECT_EQ(c.arch, "qwen2");
  EXPECT_EQ(c.n_layers, kL);
  EXPECT_EQ(c.n_heads, kH);
  EXPECT_EQ(c.n_kv_heads, kKV);
  EXPECT_EQ(c.head_dim, kHD);
  EXPECT_EQ(c.rope_dims, kHD);
  EXPECT_TRUE(c.rope_neox);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_EQ(c.rope_base, 1e6);
  auto tied = ModelSource::open(write_doc("qwen2_tied.gguf", qwen2_doc(false, true)));
  EXPECT_TRUE(tied->config.tied_embeddings);
}

TEST(Qwen2Parity, GpuVsCpuLogits) {
  auto& f = fx();
  for (size_t T : {1, 9, 40}) {
    auto ids = prompt(T, uint32_t(T));
    auto c = last_logits(*f.cpu, ids), g = last_logits(*f.gpu, ids);
    const Diff d = diff(g, c);
    std::printf("T=%2zu |gpu-cpu| %.2e max|logit| %.2f\n", T, d.max_abs, d.ref_max);
    EXPECT_GT(d.ref_max, 0.5f) << "degenerate logits";
    EXPECT_LE(d.max_abs, kTolGpuVsCpu) << "T=" << T;
    EXPECT_EQ(d.argmax_a, d.argmax_b) << "T=" << T;
  }
}

TEST(Qwen2Parity, Greedy32Identical) {
  auto& f = fx();
  for (size_t T : {3, 21}) {
    auto ids = prompt(T, 100 + uint32_t(T));
    auto c = greedy(*f.cpu, ids, 32);
    EXPECT_EQ(greedy(*f.gpu, ids, 32), c) << "T=" << T;
    EXPECT_GT(std::set<int32_t>(c.begin(), c.end()).size(), 1u) << "a constant continuation tests little";
  }
}

TEST(Qwen2Parity, PrefillEqualsPrefillPlusDecode) {
  auto& f = fx();
  auto ids = prompt(33, 5);
  for (Model* m : {f.cpu.get(), f.gpu.get()}) {
    for (size_t T : {2, 17, 33}) {
      std::vector<int32_t> pre(ids.begin(), ids.begin() + std::ptrdiff_t(T));
      auto full = last_logits(*m, pre);
      auto seq = m->new_sequence();
      std::vector<float> l;
      m->forward(*seq, std::span<const int32_t>(pre.data(), T - 1), nullptr);
      m->forward(*seq, std::span<const int32_t>(pre.data() + T - 1, 1), &l);
      EXPECT_LE(diff(l, full).max_abs, kTolSplit) << m->backend_name() << " T=" << T;
    }
  }
}

TEST(Qwen2Parity, BiasesAreUsed) {
  Models z(write_doc("qwen2_zero_bias.gguf", qwen2_doc(true)), 256);
  auto ids = prompt(9, 9);
  auto c = last_logits(*fx().cpu, ids), cz = last_logits(*z.cpu, ids), gz = last_logits(*z.gpu, ids);
  EXPECT_GT(diff(cz, c).max_abs, 1e-2f) << "zeroing the Q/K/V biases must change the logits";
  EXPECT_LE(diff(gz, cz).max_abs, kTolGpuVsCpu);
}

TEST(Qwen2Parity, MissingBiasIsALoadError) {
  try {
    auto src = ModelSource::open(write_doc("qwen2_nobias.gguf", qwen2_doc(false, false, "blk.1.attn_k.bias")));
    ModelOptions o;
    o.backend = BackendKind::CPU;
    create_model(*src, o);
    FAIL() << "loaded without blk.1.attn_k.bias";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("blk.1.attn_k.bias"), std::string::npos) << e.what();
  }
}

// The real file (slow; opt-in): CPU and WebGPU greedy continuations of a raw prompt agree.
TEST(Qwen2RealFile, CpuAndGpuGreedyAgree) {
  expect_real_file_greedy_agree("models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "def fibonacci(n):", 16);
}

// The WebGPU paths for weights over one storage binding (embedding and output head in row blocks,
// one binding each; real vocabularies on lavapipe) on this tiny model, through the
// WGLLM_TEST_MAX_BINDING_BYTES hook: both run in several dispatches, same logits as the normal GPU
// model, the same GPU weight bytes (no copy kept on the host), pipelined decoding identical to
// the plain loop.
TEST(Qwen2Parity, OversizedEmbeddingAndHeadPaths) {
  auto& f = fx();  // made before the hook is set
  const std::unique_ptr<Model> split = create_gpu_with_binding_cap(*f.src, 64, "8192");
  EXPECT_EQ(split->memory().weights, fx().gpu->memory().weights) << "the weights' GPU bytes should not change";
  expect_split_dispatches(*split);
  for (size_t T : {1, 9}) {
    auto ids = prompt(T, 40 + uint32_t(T));
    auto g = last_logits(*fx().gpu, ids), s = last_logits(*split, ids);
    const Diff d = diff(s, g);
    std::printf("T=%zu |split-gpu| %.2e\n", T, d.max_abs);
    EXPECT_LE(d.max_abs, kTolGpuVsCpu) << "T=" << T;
    EXPECT_EQ(d.argmax_a, d.argmax_b);
  }
  auto ids = prompt(3, 9);
  EXPECT_EQ(greedy(*split, ids, 8), greedy(*fx().cpu, ids, 8));
  expect_pipeline_identical(*f.src, prompt(5, 9), 64, 9, "8192");
}

// --decode-pipeline: the same tokens and final state as the plain loop (tests/e2e/decode_pipeline_util.h).
TEST(Qwen2Parity, DecodePipelineIdentical) { expect_pipeline_identical(*fx().src, prompt(11, 7), 64); }

// Model::forward_nll on WebGPU (NLL computed on the device; kernels/nll.h) against the CPU
// default, with the whole head and with the head split in row blocks (the real vocabularies on
// lavapipe); and llama.cpp-method perplexity over chunks of a KV-only model (one sequence rolled
// back per chunk) equal on both backends.
TEST(Qwen2Parity, ForwardNllAndPerplexityChunks) {
  auto& f = fx();
  const std::unique_ptr<Model> split = create_gpu_with_binding_cap(*f.src, 64, "8192");
  const auto ids = prompt(40, 77);
  std::vector<int32_t> targets(40, -1);
  for (size_t t = 5; t < 39; ++t) targets[t] = ids[t + 1];
  auto nll = [&](Model& m) {
    auto seq = m.new_sequence(64);
    std::vector<float> v;
    m.forward_nll(*seq, ids, targets, &v);
    return v;
  };
  const auto c = nll(*f.cpu), g = nll(*f.gpu), s = nll(*split);
  const Diff dg = diff(g, c), ds = diff(s, c);
  std::printf("forward_nll |gpu-cpu| %.2e |split-cpu| %.2e max nll %.2f\n", dg.max_abs, ds.max_abs, dg.ref_max);
  EXPECT_GT(dg.ref_max, 1.0f) << "degenerate NLL";
  EXPECT_LE(dg.max_abs, kTolGpuVsCpu);
  EXPECT_LE(ds.max_abs, kTolGpuVsCpu);
  const auto toks = prompt(3 * 32, 78);
  PerplexityOptions o;
  o.n_ctx = 32;
  const PerplexityResult pc = perplexity_chunks(*f.cpu, toks, o), pg = perplexity_chunks(*f.gpu, toks, o);
  std::printf("ppl cpu %.6f gpu %.6f\n", pc.ppl, pg.ppl);
  EXPECT_EQ(pg.scored, 3u * 15u);
  EXPECT_NEAR(pg.ppl, pc.ppl, 1e-4 * pc.ppl);
}
