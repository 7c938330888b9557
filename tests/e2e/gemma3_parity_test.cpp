// Gemma 3 (models/gemma3.h) on a tiny random model written here (2 layers with
// sliding_window_pattern 2: layer 0 sliding (window 16, RoPE theta 10000), layer 1 global
// (theta 1e6); d 64, 2 query heads / 1 KV head of 48 (head_dim != d / heads), FFN 96, vocab 128,
// q/k norms, post-attention and post-FFN norms, tied embeddings; attn_q and ffn_gate stored as
// Q5_0, attn_v as Q8_0, the rest f32), on both backends:
//   - config and params read from the metadata
//   - WebGPU vs CPU reference last-token logits (T = 1, 9, 16, 40: past the window)
//   - greedy tokens identical (three 4-token prompts + 24 steps, past the window)
//   - prefill(T) == prefill(T-1) + decode(1) on both backends (T up to 30 > W)
//   - the sliding window is applied on both backends (T = 30 > W: a window of 1000 changes the
//     logits) and a WebGPU sequence is not capped at the window
//   - at Gemma 3's real head dim 256 (T = 40 > W): the product's prefill takes the flash kernel in
//     both layer types (wide heads, window) and matches the CPU reference; the tiled kernel without
//     those two switches
// And on the real gemma-3-270m Q4_K_M file when it is installed and WGLLM_REAL_MODEL_TESTS=1
// (not run by CI): CPU and WebGPU greedy continuations of a raw prompt agree.
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <set>

#include "core/error.h"
#include "core/half.h"
#include "formats/gguf_test_doc.h"
#include "formats/st_test_writer.h"
#include <fstream>
#include <stdlib.h>
#include "models/gemma3.h"
#include "parity_util.h"
#include "decode_pipeline_util.h"
#include "tiny_gguf_util.h"
#include "tokenizer/tokenizer.h"

using namespace wgllm;
using namespace wgllm::test;

namespace {

constexpr float kTolGpuVsCpu = 1e-4f;  // WebGPU f32 vs CPU f32 (summation order, FMA)
constexpr float kTolSplit = 1e-4f;

constexpr uint32_t kD = 64, kH = 2, kKV = 1, kHD = 48, kF = 96, kV = 128, kL = 2, kW = 16;

/// Q5_0 blocks (ggml block_q5_0: f16 d, u32 qh, 16 bytes of nibbles) of n random values.
std::vector<uint8_t> q5_0_random(uint64_t n, std::mt19937& rng) {
  std::vector<uint8_t> b;
  for (uint64_t i = 0; i < n / 32; ++i) {
    const uint16_t d = f32_to_f16(0.3f / 16.0f * float(1 + i % 3));
    b.push_back(uint8_t(d & 0xff));
    b.push_back(uint8_t(d >> 8));
    for (int j = 0; j < 20; ++j) b.push_back(uint8_t(rng()));
  }
  return b;
}
std::vector<uint8_t> q8_0_random(uint64_t n, std::mt19937& rng) {
  std::vector<uint8_t> b;
  for (uint64_t i = 0; i < n / 32; ++i) {
    const uint16_t d = f32_to_f16(0.3f / 127.0f);
    b.push_back(uint8_t(d & 0xff));
    b.push_back(uint8_t(d >> 8));
    for (int j = 0; j < 32; ++j) b.push_back(uint8_t(int8_t(int(rng() % 255) - 127)));
  }
  return b;
}

GgufDoc gemma3_doc(uint32_t window = kW, uint32_t hd = kHD) {
  GgufDoc d;
  d.set_str("general.architecture", "gemma3").set_str("general.name", "tiny-gemma3");
  d.set_u32("gemma3.block_count", kL).set_u32("gemma3.embedding_length", kD).set_u32("gemma3.feed_forward_length", kF);
  d.set_u32("gemma3.attention.head_count", kH).set_u32("gemma3.attention.head_count_kv", kKV);
  d.set_u32("gemma3.attention.key_length", hd).set_u32("gemma3.attention.value_length", hd);
  d.set_u32("gemma3.context_length", 4096).set_f32("gemma3.attention.layer_norm_rms_epsilon", 1e-6f);
  d.set_f32("gemma3.rope.freq_base", 1000000.0f).set_u32("gemma3.attention.sliding_window", window);
  d.set_u32("gemma3.attention.sliding_window_pattern", 2);
  std::mt19937 rng(23);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto t = [&](const std::string& name, std::vector<uint64_t> shape, float base, float sd, DType type = DType::F32) {
    uint64_t n = 1;
    for (uint64_t s : shape) n *= s;
    if (type == DType::Q5_0) return void(d.add_tensor(name, type, std::move(shape), q5_0_random(n, rng)));
    if (type == DType::Q8_0) return void(d.add_tensor(name, type, std::move(shape), q8_0_random(n, rng)));
    std::vector<float> v(n);
    for (float& x : v) x = base + sd * nd(rng);
    d.add_tensor(name, DType::F32, std::move(shape), bytes_of(v));
  };
  t("token_embd.weight", {kD, kV}, 0.0f, 0.15f);
  t("output_norm.weight", {kD}, 1.0f, 0.2f);
  for (uint32_t l = 0; l < kL; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    t(p + "attn_norm.weight", {kD}, 1.0f, 0.2f);
    t(p + "attn_q.weight", {kD, kH * hd}, 0.0f, 0.0f, DType::Q5_0);
    t(p + "attn_k.weight", {kD, kKV * hd}, 0.0f, 0.2f);
    t(p + "attn_v.weight", {kD, kKV * hd}, 0.0f, 0.0f, DType::Q8_0);
    t(p + "attn_q_norm.weight", {hd}, 1.0f, 0.3f);
    t(p + "attn_k_norm.weight", {hd}, 1.0f, 0.3f);
    t(p + "attn_output.weight", {kH * hd, kD}, 0.0f, 0.15f);
    t(p + "post_attention_norm.weight", {kD}, 1.0f, 0.2f);
    t(p + "ffn_norm.weight", {kD}, 1.0f, 0.2f);
    t(p + "ffn_gate.weight", {kD, kF}, 0.0f, 0.0f, DType::Q5_0);
    t(p + "ffn_up.weight", {kD, kF}, 0.0f, 0.2f);
    t(p + "ffn_down.weight", {kF, kD}, 0.0f, 0.15f);
    t(p + "post_ffw_norm.weight", {kD}, 1.0f, 0.2f);
  }
  return d;
}

std::string write_doc(const std::string& name, const GgufDoc& d) { return write_tiny_gguf(name, d); }
using Models = TinyModels;
Models& fx() {
  static Models m(write_tiny_gguf("gemma3_tiny.gguf", gemma3_doc()), 64);
  return m;
}
std::vector<int32_t> prompt(size_t T, uint32_t seed) { return random_prompt(T, seed, kV); }
}  // namespace

TEST(Gemma3Parity, ConfigAndParams) {
  const ModelConfig& c = fx().src->config;
  EXPECT_EQ(c.arch, "gemma3");
  EXPECT_EQ(c.head_dim, kHD);
  EXPECT_EQ(c.q_dim(), kH * kHD);
  EXPECT_TRUE(c.rope_neox);
  EXPECT_TRUE(c.tied_embeddings);
  const Gemma3Params p = gemma3_params(*fx().src);
  EXPECT_EQ(p.sliding_window, kW);
  EXPECT_TRUE(p.sliding(0));
  EXPECT_FALSE(p.sliding(1));
  EXPECT_EQ(p.rope_local_base, 10000.0);
  EXPECT_FLOAT_EQ(p.embed_scale, 8.0f);
  EXPECT_FLOAT_EQ(p.attn_scale, 1.0f / std::sqrt(48.0f));
  EXPECT_EQ(p.final_softcap, 0.0f);
}

TEST(Gemma3Parity, GpuVsCpuLogits) {
  auto& f = fx();
  for (size_t T : {1, 9, 16, 40}) {
    auto ids = prompt(T, uint32_t(T));
    auto c = last_logits(*f.cpu, ids), g = last_logits(*f.gpu, ids);
    const Diff d = diff(g, c);
    std::printf("T=%2zu |gpu-cpu| %.2e max|logit| %.2f\n", T, d.max_abs, d.ref_max);
    EXPECT_GT(d.ref_max, 0.5f) << "degenerate logits";
    EXPECT_LE(d.max_abs, kTolGpuVsCpu) << "T=" << T;
    EXPECT_EQ(d.argmax_a, d.argmax_b) << "T=" << T;
  }
}

TEST(Gemma3Parity, GreedyIdentical) {
  auto& f = fx();
  std::set<int32_t> seen;
  for (uint32_t seed : {77, 78, 79}) {
    auto ids = prompt(4, seed);
    auto c = greedy(*f.cpu, ids, 24);
    EXPECT_EQ(greedy(*f.gpu, ids, 24), c) << "seed " << seed;
    seen.insert(c.begin(), c.end());
  }
  EXPECT_GT(seen.size(), 1u) << "constant continuations test little";
}

TEST(Gemma3Parity, PrefillEqualsPrefillPlusDecode) {
  auto& f = fx();
  auto ids = prompt(30, 5);
  for (Model* m : {f.cpu.get(), f.gpu.get()}) {
    for (size_t T : {2, 11, 16, 30}) {
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

TEST(Gemma3Parity, SlidingWindowApplied) {
  auto ids = prompt(30, 3);
  auto wide_src = ModelSource::open(write_doc("gemma3_wide.gguf", gemma3_doc(1000)));
  for (BackendKind b : {BackendKind::CPU, BackendKind::WebGPU}) {
    ModelOptions o;
    o.context_length = 64;
    o.backend = b;
    auto wide = create_model(*wide_src, f32_activations(o));
    Model& narrow = b == BackendKind::CPU ? *fx().cpu : *fx().gpu;
    std::vector<int32_t> in_window(ids.begin(), ids.begin() + kW);
    const float tol = b == BackendKind::CPU ? 0.0f : kTolSplit;  // same kernels on the GPU, same keys
    EXPECT_LE(diff(last_logits(*wide, in_window), last_logits(narrow, in_window)).max_abs, tol) << "same keys within W";
    EXPECT_GT(diff(last_logits(*wide, ids), last_logits(narrow, ids)).max_abs, 1e-3f) << "T > W: the window must matter";
  }
}

// Gemma 3's real head dim (256) with the window (16) shorter than the prompt: the product's prefill
// takes the flash kernel in both layers (--attn-flash-wide-heads; the sliding layer also with
// --attn-flash-window, each on since 2026-12-07) and agrees with the CPU reference; without the two
// switches both layers take the tiled kernel, which agrees too.
TEST(Gemma3Parity, HeadDim256FlashPrefillAgreesWithCpu) {
  auto src = ModelSource::open(write_doc("gemma3_hd256.gguf", gemma3_doc(kW, 256)));
  ModelOptions o;
  o.context_length = 64;
  o.backend = BackendKind::CPU;
  auto cpu = create_model(*src, o);
  auto ids = prompt(40, 11);
  const auto want = last_logits(*cpu, ids);
  for (bool flash : {true, false}) {
    o.backend = BackendKind::WebGPU;
    o.kernels.attention_flash_wide = o.kernels.attention_flash_window = flash;
    auto gpu = create_model(*src, f32_activations(o));
    gpu->set_profiling(true);
    const auto got = last_logits(*gpu, ids);
    std::map<std::string, int> n;
    for (const auto& d : gpu->last_dispatches()) ++n[d.label];
    gpu->set_profiling(false);
    const Diff d = diff(got, want);
    // The flash kernel in either form (attention_flash_sg: --attn-flash-lanes, the default at head dim
    // 256 on hardware GPUs).
    const int n_flash = n["attention_flash"] + n["attention_flash_sg"];
    std::printf("head dim 256, T=40, window 16, flash %d: |gpu-cpu| %.2e max|logit| %.2f (attention_flash x%d, "
                "attention_flash_sg x%d, attention_tiled x%d)\n", flash, d.max_abs, d.ref_max, n["attention_flash"],
                n["attention_flash_sg"], n["attention_tiled"]);
    EXPECT_EQ(n_flash, flash ? int(kL) : 0) << "flash " << flash;
    EXPECT_EQ(n["attention_tiled"], flash ? 0 : int(kL)) << "flash " << flash;
    EXPECT_GT(d.ref_max, 0.5f) << "degenerate logits";
    EXPECT_LE(d.max_abs, kTolGpuVsCpu) << "flash " << flash;
    EXPECT_EQ(d.argmax_a, d.argmax_b);
  }
}

TEST(Gemma3Parity, WebGpuSequenceNotCappedAtWindow) {
  auto seq = fx().gpu->new_sequence(64);
  EXPECT_EQ(seq->context_length(), 64u);
}

TEST(Gemma3RealFile, CpuAndGpuGreedyAgree) {
  expect_real_file_greedy_agree("models/gemma-3-270m-q4_k_m.gguf", "The capital of France is", 16);
}

// The WebGPU paths for weights over one storage binding (embedding and output head in row blocks,
// one binding each; real vocabularies on lavapipe) on this tiny model, through the
// WGLLM_TEST_MAX_BINDING_BYTES hook: both run in several dispatches, same logits as the normal GPU
// model.
TEST(Gemma3Parity, OversizedEmbeddingAndHeadPaths) {
  auto& f = fx();  // made before the hook is set
  const std::unique_ptr<Model> split = create_gpu_with_binding_cap(*f.src, 64, "8192");
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
}

// --decode-pipeline: the same tokens and final state as the plain loop (tests/e2e/decode_pipeline_util.h).
TEST(Gemma3Parity, DecodePipelineIdentical) { expect_pipeline_identical(*fx().src, prompt(4, 7), 64); }  // sequences <= the 16-token window
