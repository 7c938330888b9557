// Helpers for parity tests of tiny random-weight GGUF models written at test time (qwen2, gemma3):
// the file in a temporary directory, the model on both backends, random prompts, last logits.
#pragma once
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "formats/gguf_test_doc.h"
#include "formats/st_test_writer.h"
#include "models/model.h"
#include "models/registry.h"
#include "models/source.h"
#include "decode_pipeline_util.h"
#include "parity_util.h"
#include "tokenizer/tokenizer.h"

namespace wgllm::test {

/// Writes d to a temporary directory (one per process, removed at exit) and returns the file's path.
inline std::string write_tiny_gguf(const std::string& name, const GgufDoc& d) {
  static struct Dir {
    std::string path;
    Dir() {
      char t[] = "/tmp/wgllm_arch_XXXXXX";
      path = mkdtemp(t);
    }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } dir;
  const std::string p = dir.path + "/" + name;
  const std::vector<uint8_t> b = d.bytes();
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  return p;
}

/// n / 32 random Q8_0 blocks: f16 scale 0.25 / 127 x (1, 2 or 3 by block), int8 quants in
/// [-127, 127].
inline std::vector<uint8_t> q8_0_random(uint64_t n, std::mt19937& rng, float scale = 1.0f) {
  std::vector<uint8_t> b;
  for (uint64_t i = 0; i < n / 32; ++i) {
    const uint16_t d = f32_to_f16(scale * 0.25f / 127.0f * float(1 + i % 3));
    b.push_back(uint8_t(d & 0xff));
    b.push_back(uint8_t(d >> 8));
    for (int j = 0; j < 32; ++j) b.push_back(uint8_t(int8_t(int(rng() % 255) - 127)));
  }
  return b;
}

/// n weights (a multiple of 256) as random Q6_K super-blocks (ggml block_q6_K: ql[128], qh[64],
/// int8 scales[16], f16 d; w = d * scale * (q - 32)), |w| up to ~0.35.
inline std::vector<uint8_t> q6_k_random(uint64_t n, std::mt19937& rng, float scale = 1.0f) {
  std::vector<uint8_t> b;
  for (uint64_t i = 0; i < n / 256; ++i) {
    for (int j = 0; j < 128 + 64; ++j) b.push_back(uint8_t(rng()));
    for (int j = 0; j < 16; ++j) b.push_back(uint8_t(int8_t(int(rng() % 31) - 15)));
    const uint16_t d = f32_to_f16(scale * 0.00075f * float(1 + i % 3));
    b.push_back(uint8_t(d & 0xff));
    b.push_back(uint8_t(d >> 8));
  }
  return b;
}

/// The shape and weights of a tiny llama-family model (tiny_llama_family_doc).
struct TinyLlamaSpec {
  uint32_t d = 64, heads = 4, kv_heads = 2, head_dim = 16, ffn = 96, vocab = 128, layers = 2;
  uint32_t context = 4096;
  uint32_t sliding_window = 8;  // gemma3: on every other layer
  bool q8_projections = false;  // Q8_0 attention / FFN projections (q8_0_random); else f32 N(0, sd)
  bool f32_last_v = false;      // with q8_projections: the last layer's attn_v stays f32 (a layer of
                                // mixed types, as the Q6_K V layers of Q4_K_M files)
  bool q6k_last_v = false;      // with q8_projections: the last layer's attn_v in Q6_K (d a multiple of 256),
                                // as Q4_K_M files keep it
  float q8_scale = 1.0f;        // the Q8_0 (and Q6_K) projections' weights times this
  uint32_t seed = 7;
};

/// A tiny random GGUF of architecture "llama", "qwen2" (with Q/K/V biases) or "gemma3" (q/k
/// norms, post norms, sliding window on every other layer, tied output): norms N(1, 0.1..0.3),
/// embeddings N(0, 1) (gemma3 0.15), f32 projections N(0, 0.15..0.3) or Q8_0.
inline GgufDoc tiny_llama_family_doc(const std::string& arch, const TinyLlamaSpec& s) {
  GgufDoc d;
  const std::string a = arch + ".";
  d.set_str("general.architecture", arch).set_str("general.name", "tiny-" + arch);
  d.set_u32(a + "block_count", s.layers).set_u32(a + "embedding_length", s.d).set_u32(a + "feed_forward_length", s.ffn);
  d.set_u32(a + "attention.head_count", s.heads).set_u32(a + "attention.head_count_kv", s.kv_heads);
  d.set_u32(a + "context_length", s.context).set_f32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
  d.set_f32(a + "rope.freq_base", 10000.0f);
  if (arch == "gemma3" || s.heads * s.head_dim != s.d)
    d.set_u32(a + "attention.key_length", s.head_dim).set_u32(a + "attention.value_length", s.head_dim);
  if (arch == "gemma3")
    d.set_u32(a + "attention.sliding_window", s.sliding_window).set_u32(a + "attention.sliding_window_pattern", 2);
  std::mt19937 rng(s.seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto t = [&](const std::string& name, std::vector<uint64_t> shape, float base, float sd, bool proj = false) {
    uint64_t n = 1;
    for (uint64_t x : shape) n *= x;
    if (proj && s.q8_projections) return void(d.add_tensor(name, DType::Q8_0, std::move(shape), q8_0_random(n, rng, s.q8_scale)));
    std::vector<float> v(n);
    for (float& x : v) x = base + sd * nd(rng);
    d.add_tensor(name, DType::F32, std::move(shape), bytes_of(v));
  };
  const uint64_t D = s.d, Q = uint64_t(s.heads) * s.head_dim, KV = uint64_t(s.kv_heads) * s.head_dim, F = s.ffn;
  t("token_embd.weight", {D, s.vocab}, 0.0f, arch == "gemma3" ? 0.15f : 1.0f);
  t("output_norm.weight", {D}, 1.0f, 0.1f);
  if (arch != "gemma3") t("output.weight", {D, s.vocab}, 0.0f, 0.3f);
  for (uint32_t l = 0; l < s.layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    t(p + "attn_norm.weight", {D}, 1.0f, 0.1f);
    t(p + "attn_q.weight", {D, Q}, 0.0f, 0.2f, true);
    t(p + "attn_k.weight", {D, KV}, 0.0f, 0.2f, true);
    if (s.q8_projections && s.q6k_last_v && l + 1 == s.layers)
      d.add_tensor(p + "attn_v.weight", DType::Q6_K, {D, KV}, q6_k_random(D * KV, rng, s.q8_scale));
    else
      t(p + "attn_v.weight", {D, KV}, 0.0f, 0.2f, !(s.f32_last_v && l + 1 == s.layers));
    if (arch == "qwen2") {
      t(p + "attn_q.bias", {Q}, 0.0f, 0.5f);
      t(p + "attn_k.bias", {KV}, 0.0f, 0.5f);
      t(p + "attn_v.bias", {KV}, 0.0f, 0.5f);
    }
    if (arch == "gemma3") {
      t(p + "attn_q_norm.weight", {s.head_dim}, 1.0f, 0.3f);
      t(p + "attn_k_norm.weight", {s.head_dim}, 1.0f, 0.3f);
      t(p + "post_attention_norm.weight", {D}, 1.0f, 0.2f);
      t(p + "post_ffw_norm.weight", {D}, 1.0f, 0.2f);
    }
    t(p + "attn_output.weight", {Q, D}, 0.0f, 0.15f, true);
    t(p + "ffn_norm.weight", {D}, 1.0f, 0.1f);
    t(p + "ffn_gate.weight", {D, F}, 0.0f, 0.2f, true);
    t(p + "ffn_up.weight", {D, F}, 0.0f, 0.2f, true);
    t(p + "ffn_down.weight", {F, D}, 0.0f, 0.15f, true);
  }
  return d;
}

/// One model file loaded on the CPU reference and on WebGPU (context_length positions).
struct TinyModels {
  std::unique_ptr<ModelSource> src;
  std::unique_ptr<Model> cpu, gpu;
  TinyModels(const std::string& path, uint32_t context_length) {
    src = ModelSource::open(path);
    ModelOptions o;
    o.context_length = context_length;
    o.backend = BackendKind::CPU;
    cpu = create_model(*src, o);
    o.backend = BackendKind::WebGPU;
    gpu = create_model(*src, f32_activations(o));
  }
};

/// T token ids uniform in [0, vocab), reproducible from seed.
inline std::vector<int32_t> random_prompt(size_t T, uint32_t seed, uint32_t vocab) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(T);
  for (auto& x : ids) x = int32_t(rng() % vocab);
  return ids;
}

/// src on WebGPU with storage bindings capped at max_bytes (ScopedBindingCap): the
/// oversized-weight paths.
inline std::unique_ptr<Model> create_gpu_with_binding_cap(const ModelSource& src, uint32_t context_length,
                                                          const char* max_bytes) {
  const ScopedBindingCap cap(max_bytes);
  ModelOptions o;
  o.context_length = context_length;
  o.backend = BackendKind::WebGPU;
  return create_model(src, f32_activations(o));
}

/// A one-token forward of m (created under a binding cap) runs the embedding and the output head
/// in several dispatches each (row blocks, GpuModel::embedding()).
inline void expect_split_dispatches(Model& m) {
  m.set_profiling(true);
  auto seq = m.new_sequence(8);
  const std::vector<int32_t> one{1};
  std::vector<float> logits;
  m.forward(*seq, one, &logits);
  const auto ds = m.last_dispatches();
  m.set_profiling(false);
  auto count = [&](const char* label) {
    return std::count_if(ds.begin(), ds.end(), [&](const gpu::KernelTime& k) { return k.label == label; });
  };
  EXPECT_GE(count("output"), 2) << "the head should run in row blocks";
  EXPECT_GE(count("embed"), 2) << "the embedding should run in row blocks";
}

/// The WebGPU paths for weights over one storage binding (GpuModel::embedding(): the embedding and
/// the output head in row blocks, one binding each; the 150k-262k vocabularies in lavapipe's and
/// browsers' 128 MiB bindings) on a tiny model through the binding cap of
/// create_gpu_with_binding_cap(): the paths are taken (several "embed" and "output" dispatches in a
/// step), last logits within tol of `gpu` (the same model without the cap) at a few lengths, greedy
/// tokens equal to `cpu`'s, and pipelined decoding (the ids stay on the device) identical to the
/// plain loop under the cap (expect_pipeline_identical).
inline void expect_oversized_embedding_paths(const ModelSource& src, Model& gpu, Model& cpu, uint32_t vocab,
                                             float tol) {
  const std::unique_ptr<Model> split = create_gpu_with_binding_cap(src, 128, "8192");
  expect_split_dispatches(*split);
  for (uint32_t T : {1u, 9u, 24u}) {
    const auto ids = random_prompt(T, 40 + T, vocab);
    const auto g = last_logits(gpu, ids), s = last_logits(*split, ids);
    const Diff d = diff(s, g);
    std::printf("T=%u |split-gpu| %.2e\n", T, d.max_abs);
    EXPECT_LE(d.max_abs, tol) << "T=" << T;
    EXPECT_EQ(d.argmax_a, d.argmax_b) << "T=" << T;
  }
  const auto ids = random_prompt(5, 9, vocab);
  EXPECT_EQ(greedy(*split, ids, 8), greedy(cpu, ids, 8));
  expect_pipeline_identical(src, ids, 64, 9, "8192");
}

/// A real model file in the cache (slow; opt-in with WGLLM_REAL_MODEL_TESTS=1, skipped when not
/// installed): the CPU and WebGPU greedy continuations of a raw prompt (n tokens) are identical.
inline void expect_real_file_greedy_agree(const std::string& cache_rel, const std::string& text, int n) {
  const std::string path = cache_file(cache_rel);
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "not installed: " << path;
  if (env_or("WGLLM_REAL_MODEL_TESTS", "") != "1") GTEST_SKIP() << "set WGLLM_REAL_MODEL_TESTS=1 (slow)";
  auto src = ModelSource::open(path);
  auto tok = Tokenizer::from_gguf(*src->gguf);
  const auto ids = tok->encode_prompt(text);
  ModelOptions o;
  o.context_length = 128;
  o.backend = BackendKind::WebGPU;
  const auto g = greedy(*create_model(*src, f32_activations(o)), ids, n);
  std::printf("webgpu: %s\n", tok->decode(g).c_str());
  o.backend = BackendKind::CPU;
  const auto c = greedy(*create_model(*src, o), ids, n);
  std::printf("cpu:    %s\n", tok->decode(c).c_str());
  EXPECT_EQ(g, c);
}

}  // namespace wgllm::test
