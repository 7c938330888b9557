// End-to-end LFM2 on the tiny random model of tests/fixtures/lfm2_tiny (tools/fixtures/make_lfm2_fixtures.py:
// 4 layers conv/attention/conv/attention, hidden 72, 3 query heads / 1 KV head of 24, conv L 3,
// FFN 136, vocab 300), loaded from the HF directory and from the GGUF copy, on both backends:
//   - last-token logits vs transformers (float64) for 3 prompts (T = 1, 27, 150)
//   - WebGPU vs CPU reference; HF loader vs GGUF loader
//   - greedy tokens identical to transformers for 64 steps
//   - for every T in 1..130: full prefill == prefill(T-1) + decode(1) == prefill split at random points
//     (and a WebGPU model with prefill_chunk 16, which splits internally)
//   - state sizes reported by memory(); truncate() refused; malformed configs / missing tensors
// Tolerances are absolute on logits of magnitude <= ~8. Measured (lavapipe, 2026-11-29):
// |cpu - transformers fp64| <= 6.2e-6, |webgpu - cpu| <= 6.2e-6, HF vs GGUF loader 0 (same f32
// weights), splits 0 on both backends (each token's row is computed the same way whatever T is).
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <random>

#include "core/error.h"
#include "models/lfm2.h"
#include "parity_util.h"
#include "tiny_gguf_util.h"

using namespace wgllm;
using namespace wgllm::test;

namespace {

constexpr float kTolCpuVsRef = 1e-4f;  // f32 engine vs float64 transformers
constexpr float kTolGpuVsCpu = 1e-4f;  // WebGPU f32 vs CPU f32 (summation order, FMA)
constexpr float kTolSplit = 1e-4f;     // same backend, different chunking of one sequence

std::string hf_dir() { return fixture("lfm2_tiny/hf"); }
std::string gguf_path() { return fixture("lfm2_tiny/lfm2_tiny.f32.gguf"); }

struct Fixture {
  std::unique_ptr<ModelSource> hf, gguf;
  nlohmann::json ref;
  std::unique_ptr<Model> cpu_hf, cpu_gguf, gpu_hf, gpu_gguf, gpu_chunked;
  Fixture() {
    hf = ModelSource::open(hf_dir());
    gguf = ModelSource::open(gguf_path());
    ref = read_json(fixture("lfm2_tiny/ref.json"));
    ModelOptions o;
    o.context_length = 256;
    o.backend = BackendKind::CPU;
    cpu_hf = create_model(*hf, o);
    cpu_gguf = create_model(*gguf, o);
    o.backend = BackendKind::WebGPU;
    gpu_hf = create_model(*hf, o);
    gpu_gguf = create_model(*gguf, o);
    o.prefill_chunk = 16;
    gpu_chunked = create_model(*gguf, o);
  }
};
Fixture& fx() {
  static Fixture f;
  return f;
}

/// Last logits after feeding ids in pieces ending at the given cut points.
std::vector<float> logits_split(Model& m, const std::vector<int32_t>& ids, const std::vector<size_t>& cuts) {
  auto seq = m.new_sequence();
  std::vector<float> l;
  size_t s = 0;
  for (size_t c : cuts) {
    if (c <= s || c >= ids.size()) continue;
    m.forward(*seq, std::span<const int32_t>(ids.data() + s, c - s), nullptr);
    s = c;
  }
  m.forward(*seq, std::span<const int32_t>(ids.data() + s, ids.size() - s), &l);
  return l;
}

}  // namespace

TEST(Lfm2Parity, ConfigFromBothLayouts) {
  auto& f = fx();
  for (const ModelSource* s : {f.hf.get(), f.gguf.get()}) {
    const ModelConfig& c = s->config;
    EXPECT_EQ(c.arch, "lfm2");
    EXPECT_EQ(c.n_layers, 4u);
    EXPECT_EQ(c.d_model, 72u);
    EXPECT_EQ(c.n_heads, 3u);
    EXPECT_EQ(c.n_kv_heads, 1u);
    EXPECT_EQ(c.head_dim, 24u);
    EXPECT_EQ(c.ffn_dim, 136u);  // int(2 * 204 / 3) rounded up to a multiple of 8
    EXPECT_EQ(c.vocab, 300u);
    EXPECT_TRUE(c.rope_neox);
    EXPECT_TRUE(c.tied_embeddings);
    EXPECT_NEAR(c.rms_eps, 1e-5f, 1e-12f);
    EXPECT_EQ(c.rope_base, 10000.0);
    Lfm2Params p = lfm2_params(*s);
    EXPECT_EQ(p.attn, (std::vector<bool>{false, true, false, true}));
    EXPECT_EQ(p.conv_L, 3u);
  }
}

TEST(Lfm2Parity, LastLogitsVsTransformersBothLoadersBothBackends) {
  auto& f = fx();
  for (auto& p : f.ref["prompts"]) {
    const std::string name = p["name"];
    auto ids = ids_of(p);
    auto want = p["logits"].get<std::vector<float>>();
    auto ch = last_logits(*f.cpu_hf, ids), cg = last_logits(*f.cpu_gguf, ids);
    auto gh = last_logits(*f.gpu_hf, ids), gg = last_logits(*f.gpu_gguf, ids), gc = last_logits(*f.gpu_chunked, ids);
    Diff d_ref = diff(ch, want), d_loader = diff(cg, ch), d_gpu = diff(gh, ch), d_gg = diff(gg, cg), d_gc = diff(gc, cg);
    std::printf("%-6s T=%3zu |cpu-ref| %.2e |gguf-hf| %.2e |gpu-cpu| %.2e (gguf %.2e, chunk16 %.2e) max|logit| %.1f\n",
                name.c_str(), ids.size(), d_ref.max_abs, d_loader.max_abs, d_gpu.max_abs, d_gg.max_abs, d_gc.max_abs,
                d_ref.ref_max);
    EXPECT_LE(d_ref.max_abs, kTolCpuVsRef) << name;
    EXPECT_LE(diff(cg, want).max_abs, kTolCpuVsRef) << name;
    EXPECT_EQ(d_loader.max_abs, 0.0f) << name << ": same f32 weights from both layouts";
    for (const Diff& d : {d_gpu, d_gg, d_gc}) {
      EXPECT_LE(d.max_abs, kTolGpuVsCpu) << name;
      EXPECT_EQ(d.argmax_a, d.argmax_b) << name;
    }
    EXPECT_EQ(d_ref.argmax_a, d_ref.argmax_b) << name;
  }
}

// The embedding and the head in row blocks on the GPU (GpuModel::embedding(), for tables over one
// storage binding) on the tiny model through the binding cap.
TEST(Lfm2Parity, OversizedEmbeddingAndHeadPaths) {
  auto& f = fx();
  expect_oversized_embedding_paths(*f.gguf, *f.gpu_gguf, *f.cpu_gguf, f.gguf->config.vocab, kTolGpuVsCpu);
}

TEST(Lfm2Parity, Greedy64TokensIdentical) {
  auto& f = fx();
  for (auto& p : f.ref["prompts"]) {
    const std::string name = p["name"];
    auto want = p["greedy"].get<std::vector<int32_t>>();
    auto ids = ids_of(p);
    EXPECT_EQ(greedy(*f.cpu_hf, ids, 64), want) << "cpu (hf) vs transformers: " << name;
    EXPECT_EQ(greedy(*f.cpu_gguf, ids, 64), want) << "cpu (gguf) vs transformers: " << name;
    EXPECT_EQ(greedy(*f.gpu_gguf, ids, 64), want) << "webgpu (gguf) vs transformers: " << name;
    if (name == "long") {
      EXPECT_EQ(greedy(*f.gpu_hf, ids, 64), want) << "webgpu (hf) vs transformers: " << name;
    }
  }
}

// For every prompt length T in 1..130: the last-token logits of one prefill equal those of
// prefill(T-1) + one decode step, and those of 1-3 prefill calls split at random points.
void split_consistency(Model& m, const char* what) {
  auto& f = fx();
  std::vector<int32_t> ids;
  for (auto& p : f.ref["prompts"])
    if (p["name"] == "long") ids = ids_of(p);
  ASSERT_GE(ids.size(), 130u);
  std::mt19937 rng(7);
  float worst_dec = 0, worst_split = 0;
  for (size_t T = 1; T <= 130; ++T) {
    std::vector<int32_t> pre(ids.begin(), ids.begin() + T);
    auto full = last_logits(m, pre);
    auto dec = logits_split(m, pre, {T - 1});
    std::vector<size_t> cuts;
    for (int k = int(rng() % 3) + 1; k > 0; --k) cuts.push_back(1 + rng() % std::max<size_t>(1, T));
    std::sort(cuts.begin(), cuts.end());
    auto spl = logits_split(m, pre, cuts);
    const float dd = diff(dec, full).max_abs, ds = diff(spl, full).max_abs;
    worst_dec = std::max(worst_dec, dd);
    worst_split = std::max(worst_split, ds);
    ASSERT_LE(dd, kTolSplit) << what << " T=" << T << " prefill(T-1)+decode";
    ASSERT_LE(ds, kTolSplit) << what << " T=" << T << " split";
  }
  std::printf("%s: T=1..130 max |prefill - (prefill+decode)| %.2e, max |prefill - split| %.2e\n", what, worst_dec,
              worst_split);
}

TEST(Lfm2Parity, PrefillEqualsDecodeAndSplitsCpu) { split_consistency(*fx().cpu_gguf, "cpu"); }
TEST(Lfm2Parity, PrefillEqualsDecodeAndSplitsWebGPU) { split_consistency(*fx().gpu_hf, "webgpu"); }
TEST(Lfm2Parity, PrefillEqualsDecodeAndSplitsWebGPUChunk16) { split_consistency(*fx().gpu_chunked, "webgpu chunk16"); }

// fuse_conv_state keeps the summation order: the ShortConv layers' one-dispatch conv gives the
// same logits bits as the two-dispatch form over a prefill and 12 decode steps (and a 5-token
// forward, also fused), both within tolerance of the CPU reference.
TEST(Lfm2Parity, FusedConvStateGivesIdenticalBits) {
  auto& f = fx();
  auto ids = ids_of(f.ref["prompts"][1]);
  std::vector<int32_t> five(ids.begin(), ids.begin() + 5);
  auto want = decode_trace(*f.cpu_gguf, ids, 12), want5 = decode_trace(*f.cpu_gguf, five, 2);
  std::vector<std::vector<float>> got, got5;
  for (bool fused : {false, true}) {
    ModelOptions o;
    o.context_length = 256;
    o.kernels.fuse_conv_state = fused;
    o.kernels.fuse_conv_in = false;  // (on hardware GPUs decode steps would take the conv-in epilogue instead)
    auto m = create_model(*f.gguf, o);
    got.push_back(decode_trace(*m, ids, 12));
    got5.push_back(decode_trace(*m, five, 2));
    EXPECT_LE(diff(got.back(), want).max_abs, kTolGpuVsCpu) << "fused " << fused;
    EXPECT_LE(diff(got5.back(), want5).max_abs, kTolGpuVsCpu) << "fused " << fused;
  }
  EXPECT_EQ(0, std::memcmp(got[0].data(), got[1].data(), got[0].size() * 4));
  EXPECT_EQ(0, std::memcmp(got5[0].data(), got5[1].data(), got5[0].size() * 4));
}

// --fuse-conv-in (the conv in the in-projection's epilogue; one-token forwards on the matrix-vector
// kernel, both forced on here; default off): decode logits bit-identical with
// it off, and within the GPU tolerance of the CPU reference. Then --fused-decode (QK-norm, RoPE and
// KV store in the attention launch; not bit-exact): within the tolerance, greedy tokens identical.
TEST(Lfm2Parity, FusedConvInGivesIdenticalBitsAndFusedDecodeMatchesCpu) {
  auto& f = fx();
  auto ids = ids_of(f.ref["prompts"][1]);
  auto want = decode_trace(*f.cpu_gguf, ids, 12);
  std::vector<std::vector<float>> got;
  for (int v : {0, 1, 2}) {  // conv-in off, on, on + fused decode
    ModelOptions o;
    o.context_length = 256;
    o.kernels.matvec_subgroup = 1;
    o.kernels.fuse_conv_in = v >= 1;
    o.kernels.fused_decode = v == 2;
    auto m = create_model(*f.gguf, o);
    got.push_back(decode_trace(*m, ids, 12));
    EXPECT_LE(diff(got.back(), want).max_abs, kTolGpuVsCpu) << "variant " << v;
  }
  EXPECT_EQ(0, std::memcmp(got[0].data(), got[1].data(), got[0].size() * 4)) << "--fuse-conv-in changed bits";
  EXPECT_NE(0, std::memcmp(got[1].data(), got[2].data(), got[1].size() * 4)) << "--fused-decode was not taken";
}

TEST(Lfm2Parity, StateSizesAndNoTruncate) {
  auto& f = fx();
  const ModelConfig& c = f.hf->config;
  const Lfm2Params p = lfm2_params(*f.hf);
  EXPECT_EQ(p.conv_state_bytes(c), 2u * 72 * 4);
  EXPECT_EQ(Lfm2Params::kv_bytes(c, 100), 2u * 100 * 24 * 4);
  for (Model* m : {f.cpu_hf.get(), f.gpu_hf.get()}) {
    auto seq = m->new_sequence(100);
    MemoryReport r = seq->memory();
    EXPECT_EQ(r.kv_cache, 2 * Lfm2Params::kv_bytes(c, 100)) << m->backend_name();  // 2 attention layers
    EXPECT_EQ(r.recurrent, 2 * p.conv_state_bytes(c)) << m->backend_name();          // 2 conv layers
    std::vector<int32_t> ids = {5, 6, 7};
    m->forward(*seq, ids, nullptr);
    EXPECT_THROW(seq->truncate(1), Error);
    EXPECT_EQ(seq->n_past(), 3u);
  }
}

TEST(Lfm2Parity, SequencesAreIndependent) {
  auto& f = fx();
  for (Model* m : {f.cpu_gguf.get(), f.gpu_gguf.get()}) {
    std::vector<int32_t> a = {10, 20, 30, 40}, b = {7, 8};
    auto s1 = m->new_sequence(), s2 = m->new_sequence();
    std::vector<float> l1, l2;
    m->forward(*s1, std::span<const int32_t>(a.data(), 2), nullptr);
    m->forward(*s2, b, nullptr);  // interleaved: must not touch s1's conv state or KV
    m->forward(*s1, std::span<const int32_t>(a.data() + 2, 2), &l1);
    EXPECT_LE(diff(l1, last_logits(*m, a)).max_abs, kTolSplit) << m->backend_name();
  }
}

// Snapshot after a, run b, restore, run c == a + c; and a state exported on one backend and
// imported on the other continues identically (blob names/layouts are shared by both backends).
TEST(Lfm2Parity, SnapshotRestoreAndStateFilesAcrossBackends) {
  auto& f = fx();
  std::vector<int32_t> a = {11, 12, 13, 14, 15}, b = {99, 98, 97}, c = {21, 22};
  std::vector<int32_t> ac = a;
  ac.insert(ac.end(), c.begin(), c.end());
  for (Model* m : {f.cpu_hf.get(), f.gpu_hf.get()}) {
    auto seq = m->new_sequence();
    m->forward(*seq, a, nullptr);
    auto snap = seq->snapshot();
    EXPECT_EQ(snap->bytes(), 2u * 2 * 72 * 4) << m->backend_name();
    m->forward(*seq, b, nullptr);
    seq->restore(*snap);
    std::vector<float> got;
    m->forward(*seq, c, &got);
    EXPECT_LE(diff(got, last_logits(*m, ac)).max_abs, kTolSplit) << m->backend_name();
  }
  for (auto [from, to] : {std::pair{f.cpu_gguf.get(), f.gpu_gguf.get()}, std::pair{f.gpu_gguf.get(), f.cpu_gguf.get()}}) {
    auto s1 = from->new_sequence();
    from->forward(*s1, a, nullptr);
    auto blobs = s1->export_state();
    EXPECT_EQ(blobs.size(), 2u + 2 * 2);  // 2 conv states, K and V of 2 attention layers
    auto s2 = to->new_sequence();
    s2->import_state(uint32_t(a.size()), blobs);
    std::vector<float> got;
    to->forward(*s2, c, &got);
    EXPECT_LE(diff(got, last_logits(*to, ac)).max_abs, kTolGpuVsCpu) << from->backend_name() << " -> " << to->backend_name();
    blobs.pop_back();
    EXPECT_THROW(to->new_sequence()->import_state(uint32_t(a.size()), blobs), Error);
  }
}

// ---- malformed inputs ----

namespace {

namespace fs = std::filesystem;

/// A copy of the HF fixture dir with config.json edited by `edit`.
std::string hf_variant(const std::string& tag, const std::function<void(nlohmann::json&)>& edit) {
  const fs::path d = fs::temp_directory_path() / ("wgllm_lfm2_" + tag + "_" + std::to_string(::getpid()));
  fs::create_directories(d);
  fs::copy_file(fs::path(hf_dir()) / "model.safetensors", d / "model.safetensors", fs::copy_options::overwrite_existing);
  nlohmann::json j = read_json(hf_dir() + "/config.json");
  edit(j);
  std::ofstream(d / "config.json") << j.dump();
  return d.string();
}

/// A copy of the GGUF fixture with the first occurrence of `from` replaced by `to` (same length).
std::string gguf_variant(const std::string& tag, const std::string& from, const std::string& to) {
  std::ifstream in(gguf_path(), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t at = bytes.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  EXPECT_EQ(from.size(), to.size());
  if (at != std::string::npos) bytes.replace(at, from.size(), to);
  const fs::path p = fs::temp_directory_path() / ("wgllm_lfm2_" + tag + "_" + std::to_string(::getpid()) + ".gguf");
  std::ofstream(p, std::ios::binary) << bytes;
  return p.string();
}

/// Opening (and loading on the CPU) must throw wgllm::Error whose message contains `needle`.
void expect_error(const std::string& path, const std::string& needle) {
  try {
    auto src = ModelSource::open(path);
    ModelOptions o;
    o.backend = BackendKind::CPU;
    create_model(*src, o);
    ADD_FAILURE() << path << ": no error, expected one mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message: " << e.what();
  }
}

}  // namespace

TEST(Lfm2Errors, MalformedHfConfigs) {
  expect_error(hf_variant("nohidden", [](auto& j) { j.erase("hidden_size"); }), "hidden_size");
  expect_error(hf_variant("lt_len", [](auto& j) { j["layer_types"].erase(0); }), "layer_types");
  expect_error(hf_variant("lt_kind", [](auto& j) { j["layer_types"][2] = "mamba"; }), "mamba");
  expect_error(hf_variant("lt_type", [](auto& j) { j["layer_types"] = 3; }), "layer_types");
  expect_error(hf_variant("idx", [](auto& j) { j.erase("layer_types"); j["full_attn_idxs"] = {1, 9}; }),
               "full_attn_idxs");
  expect_error(hf_variant("L1", [](auto& j) { j["conv_L_cache"] = 1; }), "conv_L_cache");
  expect_error(hf_variant("Lstr", [](auto& j) { j["conv_L_cache"] = "3"; }), "conv_L_cache");
  expect_error(hf_variant("bias", [](auto& j) { j["conv_bias"] = true; }), "conv_bias");
  expect_error(hf_variant("rope", [](auto& j) { j["rope_parameters"]["rope_type"] = "yarn"; }), "rope_type");
  // Valid configs that do not match the tensors: clear tensor errors.
  expect_error(hf_variant("pattern", [](auto& j) { j["layer_types"][0] = "full_attention"; }),
               "missing tensor 'model.layers.0.self_attn.q_proj.weight'");
  expect_error(hf_variant("ffn", [](auto& j) { j["block_auto_adjust_ff_dim"] = false; }),
               "'model.layers.0.feed_forward.w1.weight' has shape {72, 136}, expected {72, 204}");
  // full_attn_idxs (older configs) gives the same pattern as layer_types.
  auto src = ModelSource::open(hf_variant("idx_ok", [](auto& j) { j.erase("layer_types"); j["full_attn_idxs"] = {1, 3}; }));
  EXPECT_EQ(lfm2_params(*src).attn, (std::vector<bool>{false, true, false, true}));
}

TEST(Lfm2Errors, MalformedGguf) {
  expect_error(gguf_variant("qnorm", "blk.1.attn_q_norm.weight", "blk.1.attn_q_nrrm.weight"),
               "missing tensor 'blk.1.attn_q_norm.weight'");
  expect_error(gguf_variant("conv", "blk.2.shortconv.conv.weight", "blk.2.shortconv.cnnv.weight"),
               "missing tensor 'blk.2.shortconv.conv.weight'");
  expect_error(gguf_variant("lcache", "lfm2.shortconv.l_cache", "lfm2.shortconv.x_cache"), "lfm2.shortconv.l_cache");
  expect_error(gguf_variant("outnorm", "token_embd_norm.weight", "token_embd_nrrm.weight"),
               "missing tensor 'token_embd_norm.weight'");
}

TEST(Lfm2Parity, PrefillMatmulTiledOnAndOffMatchCpu) {
  // kernels/matmul_tiled.h: the prefill matmul's tiled kernel on and off.
  auto& f = fx();
  for (auto& p : f.ref["prompts"]) {
    auto ids = ids_of(p);
    if (ids.size() <= 8) continue;  // prefill only
    auto want = last_logits(*f.cpu_gguf, ids);
    for (bool tiled : {false, true}) {
      ModelOptions o;
      o.context_length = 256;
      o.kernels.matmul_tiled = tiled ? 1 : 0;
      auto m = create_model(*f.gguf, o);
      Diff d = diff(last_logits(*m, ids), want);
      std::printf("T=%zu matmul_tiled %d: |gpu-cpu| %.2e\n", ids.size(), int(tiled), d.max_abs);
      EXPECT_LE(d.max_abs, kTolGpuVsCpu) << "matmul_tiled " << tiled;
    }
  }
}
