// Load-time checks of models (issue 12, "models are checked at load"), on malformed variants of
// the tiny fixtures built here (tests/fixtures/lfm2_tiny, qwen35_tiny, qwen35_trained, and a tiny
// random llama written from scratch):
//   - a declared context of 10M / 2^31-1 tokens runs with a small requested context on the CPU
//     and on WebGPU, with logits identical to the unmodified model; asking for the whole declared
//     context is a clear error naming the context and the bytes (not std::bad_alloc or a WebGPU
//     validation error); the RoPE table grows for a longer sequence without disturbing older ones;
//   - every hyper-parameter is checked finite and in range at load, for llama, lfm2 and qwen35,
//     from GGUF metadata and from config.json, with errors naming the key and the value;
//   - tensor data regions are checked against their type and shape (a relabelled type, two
//     overlapping tensors, a misaligned offset) and tensor shapes against the config.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <limits>
#include <random>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/gguf_test_doc.h"
#include "formats/st_test_writer.h"
#include "formats/test_util.h"
#include "gpu/context.h"
#include "models/model.h"
#include "models/source.h"

using namespace wgllm;
using test::GgufDoc;

namespace {

namespace fs = std::filesystem;

std::string fixture(const std::string& rel) {
  const char* e = std::getenv("WGLLM_SOURCE_DIR");
  return std::string(e && *e ? e : WGLLM_SOURCE_DIR) + "/tests/fixtures/" + rel;
}

test::TempDir& tmp() {
  static test::TempDir d;
  return d;
}

std::string write_tmp(const std::string& name, const std::vector<uint8_t>& b) {
  const std::string p = tmp() / name;
  test::write_file(p, b);
  return p;
}

GgufDoc lfm2_doc() { return GgufDoc::parse(test::read_file(fixture("lfm2_tiny/lfm2_tiny.f32.gguf"))); }
GgufDoc qwen35_doc() { return GgufDoc::parse(test::read_file(fixture("qwen35_trained/qwen35_trained.bf16.gguf"))); }

/// A tiny random llama (2 layers, d 32, 4 query / 2 KV heads of 8, FFN 64, vocab 64, tied
/// embeddings) declaring `context` positions.
GgufDoc llama_doc(uint32_t context, uint32_t ffn = 64) { return test::tiny_llama_doc("tiny-llama", context, ffn, 7, 0.2f); }

/// A copy of an HF fixture directory with config.json edited by `edit`.
std::string hf_variant(const std::string& dir, const std::string& tag, const std::function<void(nlohmann::json&)>& edit) {
  const fs::path out = tmp().path / tag;
  fs::create_directories(out);
  for (const auto& e : fs::directory_iterator(fixture(dir)))
    if (e.path().filename() != "config.json")
      fs::copy_file(e.path(), out / e.path().filename(), fs::copy_options::overwrite_existing);
  std::ifstream in(fixture(dir) + "/config.json");
  nlohmann::json j = nlohmann::json::parse(in);
  edit(j);
  std::ofstream(out / "config.json") << j.dump();
  return out.string();
}

/// The error message of opening `path` and loading it on `backend` ("" when it loads).
std::string load_error(const std::string& path, BackendKind backend = BackendKind::CPU) {
  try {
    auto src = ModelSource::open(path);
    ModelOptions o;
    o.backend = backend;
    o.context_length = 64;
    create_model(*src, o);
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

#define EXPECT_LOAD_ERROR(path, ...)                                                    \
  do {                                                                                  \
    const std::string m_ = load_error(path);                                            \
    EXPECT_FALSE(m_.empty()) << (path) << ": loaded without error";                     \
    for (const std::string& n_ : std::vector<std::string>{__VA_ARGS__}) EXPECT_NE(m_.find(n_), std::string::npos) << "'" << n_ << "' not in: " << m_; \
  } while (0)

const std::vector<int32_t> kIds = {1, 5, 17, 42, 99, 250, 7, 3, 64, 128, 200, 11, 13, 2, 77, 150, 31, 8, 290, 45};

std::vector<int32_t> ids_below(uint32_t vocab) {
  std::vector<int32_t> v;
  for (int32_t i : kIds) v.push_back(i % int32_t(vocab));
  return v;
}

/// Last-token logits of ids on a fresh sequence of `ctx` positions.
std::vector<float> run(const std::string& path, BackendKind backend, uint32_t ctx, uint32_t* seq_ctx = nullptr) {
  auto src = ModelSource::open(path);
  ModelOptions o;
  o.backend = backend;
  o.context_length = ctx;
  auto m = create_model(*src, o);
  auto seq = m->new_sequence();
  if (seq_ctx) *seq_ctx = seq->context_length();
  std::vector<float> l;
  m->forward(*seq, ids_below(src->config.vocab), &l);
  return l;
}

float max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float d = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) d = std::max(d, std::isnan(a[i] - b[i]) ? INFINITY : std::fabs(a[i] - b[i]));
  return d;
}

/// new_sequence() of the whole declared context must be a clear error, on both backends.
void expect_full_context_refused(const std::string& path, const std::string& ctx_text) {
  auto src = ModelSource::open(path);
  for (BackendKind b : {BackendKind::CPU, BackendKind::WebGPU}) {
    ModelOptions o;
    o.backend = b;
    o.context_length = 0;  // the model's trained length
    auto m = create_model(*src, o);
    try {
      m->new_sequence();
      ADD_FAILURE() << "a sequence of " << ctx_text << " tokens was allocated on " << m->backend_name();
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("context of " + ctx_text + " tokens needs"), std::string::npos) << msg;
      EXPECT_NE(msg.find("KV cache"), std::string::npos) << msg;
      EXPECT_NE(msg.find("GiB"), std::string::npos) << msg;
    }
  }
}

}  // namespace

// ---- 1. declared context vs the sequence's context ----

TEST(ModelLoadContext, Lfm2GgufDeclaring10MAnd2To31TokensRunsWithSmallContext) {
  const std::string base = fixture("lfm2_tiny/lfm2_tiny.f32.gguf");
  for (BackendKind b : {BackendKind::CPU, BackendKind::WebGPU}) {
    const std::vector<float> want = run(base, b, 64);
    for (uint32_t declared : {10000000u, 2147483647u}) {
      GgufDoc d = lfm2_doc();
      d.set_u32("lfm2.context_length", declared);
      const std::string p = write_tmp("lfm2_ctx" + std::to_string(declared) + ".gguf", d.bytes());
      uint32_t seq_ctx = 0;
      const std::vector<float> got = run(p, b, 64, &seq_ctx);
      EXPECT_EQ(seq_ctx, 64u);
      EXPECT_EQ(max_diff(got, want), 0.0f) << "declared " << declared << (b == BackendKind::CPU ? " cpu" : " webgpu");
    }
  }
  GgufDoc d = lfm2_doc();
  d.set_u32("lfm2.context_length", 2147483647u);
  expect_full_context_refused(write_tmp("lfm2_ctx_full.gguf", d.bytes()), "2147483647");
}

TEST(ModelLoadContext, TinyLlamaDeclaring10MTokensRunsWithSmallContext) {
  const std::string small = write_tmp("llama_2048.gguf", llama_doc(2048).bytes());
  const std::string big = write_tmp("llama_10m.gguf", llama_doc(10000000).bytes());
  const std::string huge = write_tmp("llama_max.gguf", llama_doc(2147483647u).bytes());
  const std::vector<float> cpu = run(small, BackendKind::CPU, 64), gpu = run(small, BackendKind::WebGPU, 64);
  EXPECT_LT(max_diff(cpu, gpu), 1e-4f);
  EXPECT_EQ(max_diff(run(big, BackendKind::CPU, 64), cpu), 0.0f);
  EXPECT_EQ(max_diff(run(big, BackendKind::WebGPU, 64), gpu), 0.0f);
  EXPECT_EQ(max_diff(run(huge, BackendKind::CPU, 64), cpu), 0.0f);
  EXPECT_EQ(max_diff(run(huge, BackendKind::WebGPU, 64), gpu), 0.0f);
  expect_full_context_refused(huge, "2147483647");
}

// The RoPE table grows when a longer sequence is created (a new GPU buffer replaces the old one):
// an older, shorter sequence continues exactly as a fresh one computes the same tokens.
TEST(ModelLoadContext, RopeTableGrowsForALongerSequenceWithoutDisturbingOlderOnes) {
  const std::string p = write_tmp("llama_grow.gguf", llama_doc(10000000).bytes());
  auto src = ModelSource::open(p);
  const std::vector<int32_t> ids = ids_below(64);
  for (BackendKind b : {BackendKind::CPU, BackendKind::WebGPU}) {
    ModelOptions o;
    o.backend = b;
    auto m = create_model(*src, o);
    auto a = m->new_sequence(12);
    m->forward(*a, std::span<const int32_t>(ids.data(), 10), nullptr);
    auto big = m->new_sequence(48);  // grows the table from 12 to 48 positions
    std::vector<float> la, lb, lc;
    m->forward(*a, std::span<const int32_t>(ids.data() + 10, 2), &la);
    m->forward(*big, std::span<const int32_t>(ids.data(), 12), &lb);
    auto c = m->new_sequence(12);
    m->forward(*c, std::span<const int32_t>(ids.data(), 10), nullptr);
    m->forward(*c, std::span<const int32_t>(ids.data() + 10, 2), &lc);
    EXPECT_EQ(max_diff(la, lc), 0.0f) << m->backend_name();
    EXPECT_LT(max_diff(la, lb), 1e-5f) << m->backend_name();
    EXPECT_EQ(a->context_length(), 12u);
    EXPECT_EQ(big->context_length(), 48u);
  }
}

TEST(ModelLoadContext, Qwen35HfDeclaring10MTokensRunsWithSmallContext) {
  const std::string big = hf_variant("qwen35_tiny", "qwen35_10m", [](nlohmann::json& j) { j["max_position_embeddings"] = 10000000; });
  const std::string huge = hf_variant("qwen35_tiny", "qwen35_max", [](nlohmann::json& j) { j["max_position_embeddings"] = 2147483647; });
  for (BackendKind b : {BackendKind::CPU, BackendKind::WebGPU}) {
    const std::vector<float> want = run(fixture("qwen35_tiny"), b, 64);
    EXPECT_EQ(max_diff(run(big, b, 64), want), 0.0f);
    EXPECT_EQ(max_diff(run(huge, b, 64), want), 0.0f);
  }
  expect_full_context_refused(huge, "2147483647");
}

// --prefill-chunk (ModelOptions::prefill_chunk): the auto default resolves to 512 tokens per
// forward on software adapters and the CPU backend; an explicit value is taken as is (capped by the
// trained context); a chunk whose activation buffer (the FFN's gate_up rows, 2 x ffn floats per
// token) exceeds the adapter's largest storage binding is refused at load with the largest chunk
// that fits, and auto stays within it.
TEST(ModelLoadContext, PrefillChunkAutoExplicitAndBeyondTheBindingLimit) {
  const std::string p = write_tmp("llama_chunk.gguf", llama_doc(16384).bytes());
  auto src = ModelSource::open(p);
  for (BackendKind b : {BackendKind::CPU, BackendKind::WebGPU}) {
    ModelOptions o;
    o.backend = b;
    auto m = create_model(*src, o);
    if (b == BackendKind::CPU || m->backend_name().find("llvmpipe") != std::string::npos)
      EXPECT_EQ(m->prefill_chunk(), 512u) << m->backend_name();
    o.prefill_chunk = 64;
    EXPECT_EQ(create_model(*src, o)->prefill_chunk(), 64u) << m->backend_name();
  }
  // An FFN wide enough that 16384 tokens of gate_up rows exceed the adapter's binding limit.
  const auto ctx = gpu::Context::create(gpu::ContextOptions{});
  const auto& lim = ctx->info().limits;
  const uint64_t cap = std::min<uint64_t>(lim.maxStorageBufferBindingSize, lim.maxBufferSize);
  const uint64_t ffn = (cap / (16384ull * 8) + 64) / 64 * 64;
  if (ffn > 16384) GTEST_SKIP() << "binding limit " << cap << " bytes: the FFN this needs is too large for a test file";
  const std::string wide = write_tmp("llama_chunk_wide.gguf", llama_doc(16384, uint32_t(ffn)).bytes());
  auto wsrc = ModelSource::open(wide);
  ModelOptions o;
  o.prefill_chunk = 16384;
  try {
    create_model(*wsrc, o);
    ADD_FAILURE() << "a gate_up buffer of " << 16384 * 8 * ffn << " bytes over a " << cap << "-byte binding limit loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gate_up"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("--prefill-chunk " + std::to_string(cap / (8 * ffn)) + " or less"), std::string::npos)
        << e.what();
  }
  o.prefill_chunk = ModelOptions::kPrefillChunkAuto;
  auto m = create_model(*wsrc, o);  // auto: within the limit
  EXPECT_LE(uint64_t(m->prefill_chunk()) * 8 * ffn, cap);
}

TEST(ModelLoadContext, RequestedContextIsCappedByTheTrainedLength) {
  EXPECT_EQ(sequence_context(0, 0, 512), 512u);
  EXPECT_EQ(sequence_context(0, 4096, 512), 512u);
  EXPECT_EQ(sequence_context(100, 4096, 512), 100u);
  EXPECT_EQ(sequence_context(0, 4096, 10000000), 4096u);
}

// ---- 2. hyper-parameters ----

TEST(ModelLoadHyperparameters, GgufValuesOutOfRangeNameKeyAndValue) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  struct Case {
    std::function<GgufDoc()> doc;
    std::string arch;
  };
  const std::vector<Case> archs = {{lfm2_doc, "lfm2"}, {qwen35_doc, "qwen35"}, {[] { return llama_doc(2048); }, "llama"}};
  for (const Case& c : archs) {
    const std::string a = c.arch + ".";
    auto variant = [&](const std::string& tag, const std::function<void(GgufDoc&)>& edit) {
      GgufDoc d = c.doc();
      edit(d);
      return write_tmp(c.arch + "_" + tag + ".gguf", d.bytes());
    };
    SCOPED_TRACE(c.arch);
    const std::string theta = "'" + a + "rope.freq_base' = ", eps = "'" + a + "attention.layer_norm_rms_epsilon' = ";
    EXPECT_LOAD_ERROR(variant("theta0", [&](GgufDoc& d) { d.set_f32(a + "rope.freq_base", 0.0f); }), (theta + "0"));
    EXPECT_LOAD_ERROR(variant("theta-1", [&](GgufDoc& d) { d.set_f32(a + "rope.freq_base", -1.0f); }), (theta + "-1"));
    EXPECT_LOAD_ERROR(variant("thetanan", [&](GgufDoc& d) { d.set_f32(a + "rope.freq_base", nan); }), (theta + "nan"));
    EXPECT_LOAD_ERROR(variant("thetainf", [&](GgufDoc& d) { d.set_f32(a + "rope.freq_base", inf); }), (theta + "inf"));
    EXPECT_LOAD_ERROR(variant("eps-1", [&](GgufDoc& d) { d.set_f32(a + "attention.layer_norm_rms_epsilon", -1.0f); }),
                      (eps + "-1"));
    EXPECT_LOAD_ERROR(variant("epsnan", [&](GgufDoc& d) { d.set_f32(a + "attention.layer_norm_rms_epsilon", nan); }),
                      (eps + "nan"));
    EXPECT_LOAD_ERROR(variant("eps0", [&](GgufDoc& d) { d.set_f32(a + "attention.layer_norm_rms_epsilon", 0.0f); }),
                      (eps + "0"));
    EXPECT_LOAD_ERROR(variant("eps5", [&](GgufDoc& d) { d.set_f32(a + "attention.layer_norm_rms_epsilon", 5.0f); }),
                      (eps + "5"));
    EXPECT_LOAD_ERROR(variant("layers0", [&](GgufDoc& d) { d.set_u32(a + "block_count", 0); }), ("'" + a + "block_count' = 0"));
    // 2^32 + 2 must not be truncated to 2
    EXPECT_LOAD_ERROR(variant("layers2^32", [&](GgufDoc& d) { d.set_u64(a + "block_count", (1ull << 32) + 2); }),
                      ("'" + a + "block_count' = 4294967298"));
    EXPECT_LOAD_ERROR(variant("dmodel2^32", [&](GgufDoc& d) { d.set_u64(a + "embedding_length", (1ull << 32) + 32); }),
                      ("'" + a + "embedding_length' = 4294967328"));
    EXPECT_LOAD_ERROR(variant("ctx0", [&](GgufDoc& d) { d.set_u32(a + "context_length", 0); }), ("'" + a + "context_length' = 0"));
    EXPECT_LOAD_ERROR(variant("heads0", [&](GgufDoc& d) { d.set_u32(a + "attention.head_count", 0); }),
                      ("'" + a + "attention.head_count' = 0"));
    EXPECT_LOAD_ERROR(variant("ffn-1", [&](GgufDoc& d) { d.set_i32(a + "feed_forward_length", -1); }),
                      ("'" + a + "feed_forward_length' = -1"));
    EXPECT_LOAD_ERROR(variant("keylen2", [&](GgufDoc& d) { d.set_u32(a + "attention.key_length", 2); }),
                      ("'" + a + "attention.key_length' = 2"));
    EXPECT_LOAD_ERROR(variant("ropedims", [&](GgufDoc& d) { d.set_u32(a + "rope.dimension_count", 1000); }),
                      ("'" + a + "rope.dimension_count' = 1000"));
    EXPECT_LOAD_ERROR(variant("scale4", [&](GgufDoc& d) { d.set_f32(a + "rope.scaling.factor", 4.0f); }),
                      ("'" + a + "rope.scaling.factor' = 4"));
    EXPECT_LOAD_ERROR(variant("scalenan", [&](GgufDoc& d) { d.set_f32(a + "rope.scaling.factor", nan); }),
                      ("'" + a + "rope.scaling.factor' = nan"));
    EXPECT_LOAD_ERROR(variant("yarn", [&](GgufDoc& d) { d.set_str(a + "rope.scaling.type", "yarn"); }), "rope.scaling.type 'yarn'");
  }
  // heads not a multiple of KV heads (lfm2: 3 heads)
  GgufDoc d = lfm2_doc();
  d.set_u32("lfm2.attention.head_count", 5);
  EXPECT_LOAD_ERROR(write_tmp("lfm2_h5.gguf", d.bytes()), "lfm2.embedding_length 72 is not a multiple of lfm2.attention.head_count 5");
  d = llama_doc(2048);
  d.set_u32("llama.attention.head_count_kv", 3);
  EXPECT_LOAD_ERROR(write_tmp("llama_kv3.gguf", d.bytes()), "llama.attention.head_count 4 is not a multiple of", "head_count_kv 3");
  d = llama_doc(2048);
  d.set_u32("llama.attention.head_count_kv", 8);
  EXPECT_LOAD_ERROR(write_tmp("llama_kv8.gguf", d.bytes()), "'llama.attention.head_count_kv' = 8");
  d = llama_doc(2048);
  d.set_u32("llama.attention.head_count", 6);  // 32 / 6 without attention.key_length
  EXPECT_LOAD_ERROR(write_tmp("llama_h6.gguf", d.bytes()), "embedding_length 32 is not a multiple of llama.attention.head_count 6");
  // lfm2: conv kernel width
  d = lfm2_doc();
  d.set_u32("lfm2.shortconv.l_cache", 1);
  EXPECT_LOAD_ERROR(write_tmp("lfm2_l1.gguf", d.bytes()), "'lfm2.shortconv.l_cache' = 1");
  // qwen35: DeltaNet sizes
  for (auto [key, v] : std::vector<std::pair<std::string, uint32_t>>{
           {"qwen35.ssm.conv_kernel", 1}, {"qwen35.ssm.conv_kernel", 0}, {"qwen35.ssm.state_size", 0},
           {"qwen35.ssm.state_size", 1024}, {"qwen35.ssm.group_count", 0}, {"qwen35.ssm.time_step_rank", 0}}) {
    d = qwen35_doc();
    d.set_u32(key, v);
    EXPECT_LOAD_ERROR(write_tmp("qwen35_ssm.gguf", d.bytes()), "'" + key + "' = " + std::to_string(v));
  }
}

TEST(ModelLoadHyperparameters, HfConfigValuesOutOfRangeNameKeyAndValue) {
  using J = nlohmann::json;
  struct Case {
    std::string dir, tag;
    std::function<void(J&)> edit;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {"lfm2_tiny/hf", "theta0", [](J& j) { j["rope_parameters"]["rope_theta"] = 0; }, "'rope_parameters.rope_theta' = 0"},
      {"lfm2_tiny/hf", "theta-1", [](J& j) { j["rope_parameters"]["rope_theta"] = -1.0; }, "'rope_parameters.rope_theta' = -1"},
      {"lfm2_tiny/hf", "eps-1", [](J& j) { j["norm_eps"] = -1.0; }, "'norm_eps' = -1"},
      {"lfm2_tiny/hf", "eps0", [](J& j) { j["norm_eps"] = 0.0; }, "'norm_eps' = 0"},
      {"lfm2_tiny/hf", "layers-1", [](J& j) { j["num_hidden_layers"] = -1; }, "'num_hidden_layers' = -1"},
      {"lfm2_tiny/hf", "hidden72.5", [](J& j) { j["hidden_size"] = 72.5; }, "'hidden_size' = 72.5"},
      {"lfm2_tiny/hf", "vocab0", [](J& j) { j["vocab_size"] = 0; }, "'vocab_size' = 0"},
      {"lfm2_tiny/hf", "kv2", [](J& j) { j["num_key_value_heads"] = 2; }, "num_attention_heads 3 is not a multiple of num_key_value_heads 2"},
      {"lfm2_tiny/hf", "kv0", [](J& j) { j["num_key_value_heads"] = 0; }, "'num_key_value_heads' = 0"},
      {"lfm2_tiny/hf", "ctx0", [](J& j) { j["max_position_embeddings"] = 0; }, "'max_position_embeddings' = 0"},
      {"lfm2_tiny/hf", "mult-1", [](J& j) { j["block_ffn_dim_multiplier"] = -1.0; }, "'block_ffn_dim_multiplier' = -1"},
      {"lfm2_tiny/hf", "headdim0", [](J& j) { j["head_dim"] = 0; }, "'head_dim' = 0"},
      {"qwen35_tiny", "theta-1", [](J& j) { j["rope_parameters"]["rope_theta"] = -1.0; }, "rope_theta"},
      {"qwen35_tiny", "eps-1", [](J& j) { j["rms_norm_eps"] = -1e-6; }, "'rms_norm_eps' = -1e-06"},
      {"qwen35_tiny", "eps1", [](J& j) { j["rms_norm_eps"] = 1.0; }, "'rms_norm_eps' = 1"},
      {"qwen35_tiny", "prf0", [](J& j) { j["rope_parameters"]["partial_rotary_factor"] = 0.0; }, "'partial_rotary_factor' = 0"},
      {"qwen35_tiny", "prf1.5", [](J& j) { j["rope_parameters"]["partial_rotary_factor"] = 1.5; }, "'partial_rotary_factor' = 1.5"},
      {"qwen35_tiny", "prfodd", [](J& j) { j["rope_parameters"]["partial_rotary_factor"] = 0.125; }, "gives 3 rotated dims"},
      {"qwen35_tiny", "convk1", [](J& j) { j["linear_conv_kernel_dim"] = 1; }, "'linear_conv_kernel_dim' = 1"},
      {"qwen35_tiny", "dk0", [](J& j) { j["linear_key_head_dim"] = 0; }, "'linear_key_head_dim' = 0"},
      {"qwen35_tiny", "nk-2", [](J& j) { j["linear_num_key_heads"] = -2; }, "'linear_num_key_heads' = -2"},
      {"qwen35_tiny", "layers2^32", [](J& j) { j["num_hidden_layers"] = 4294967300ull; }, "'num_hidden_layers' = 4294967300"},
      {"qwen35_tiny", "interval0", [](J& j) { j.erase("layer_types"); j["full_attention_interval"] = 0; }, "'full_attention_interval' = 0"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.dir + " " + c.tag);
    EXPECT_LOAD_ERROR(hf_variant(c.dir, c.dir.substr(0, 4) + "_" + c.tag, c.edit), c.needle);
  }
}

// ---- 3. data regions and shapes ----

TEST(ModelLoadTensors, RelabelledTypesOverlapsAndMisalignmentAreErrors) {
  const GgufDoc base = lfm2_doc();
  // The tensor that comes last in the data section (its relabelling leaves trailing bytes).
  std::string last;
  uint64_t last_off = 0;
  for (const auto& t : base.tensors)
    if (t.offset >= last_off) last = t.name, last_off = t.offset;
  auto variant = [&](const std::string& tag, const std::function<void(GgufDoc&)>& edit) {
    GgufDoc d = base;
    edit(d);
    return write_tmp("lfm2_" + tag + ".gguf", d.bytes());
  };
  EXPECT_EQ(load_error(variant("same", [](GgufDoc&) {})), "");
  EXPECT_LOAD_ERROR(variant("f16", [](GgufDoc& d) { d.tensor("blk.0.ffn_norm.weight").type = DType::F16; }),
                    "belong to no tensor", "blk.0.ffn_norm.weight");
  EXPECT_LOAD_ERROR(variant("bf16", [](GgufDoc& d) { d.tensor("blk.1.ffn_gate.weight").type = DType::BF16; }),
                    "belong to no tensor", "blk.1.ffn_gate.weight");
  EXPECT_LOAD_ERROR(variant("f64", [](GgufDoc& d) { d.tensor("blk.0.ffn_norm.weight").type = DType::F64; }),
                    "overlaps", "blk.0.ffn_norm.weight");
  EXPECT_LOAD_ERROR(variant("last_f16", [&](GgufDoc& d) { d.tensor(last).type = DType::F16; }),
                    ("tensor '" + last + "'").c_str(), "bytes after the last tensor's data");
  EXPECT_LOAD_ERROR(variant("overlap", [](GgufDoc& d) { d.tensor("blk.1.ffn_norm.weight").offset = d.tensor("blk.0.ffn_norm.weight").offset; }),
                    "data overlaps tensor");
  EXPECT_LOAD_ERROR(variant("misaligned", [](GgufDoc& d) { d.tensor("blk.0.ffn_norm.weight").offset += 8; }),
                    "'blk.0.ffn_norm.weight'", "not a multiple of the alignment 32");
  // A shape of the same size but transposed: the weight check names tensor, expected and actual.
  EXPECT_LOAD_ERROR(variant("transposed", [](GgufDoc& d) {
                      auto& s = d.tensor("blk.0.ffn_gate.weight").shape;
                      std::swap(s[0], s[1]);
                    }),
                    "'blk.0.ffn_gate.weight' has shape {136, 72}, expected {72, 136}");
}

TEST(ModelLoadTensors, SafetensorsDtypeRelabelledWithConsistentOffsetsIsAHole) {
  // Relabel one F32 tensor as F16 and shrink its data_offsets to match: the header is consistent
  // with itself, but half of the tensor's bytes now belong to no tensor.
  const std::vector<uint8_t> file = test::read_file(fixture("lfm2_tiny/hf/model.safetensors"));
  uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  nlohmann::json h = nlohmann::json::parse(file.begin() + 8, file.begin() + 8 + std::ptrdiff_t(n));
  auto& e = h["model.layers.0.ffn_norm.weight"];
  ASSERT_EQ(e["dtype"], "F32");
  const uint64_t b = e["data_offsets"][0], en = e["data_offsets"][1];
  e["dtype"] = "F16";
  e["data_offsets"] = {b, b + (en - b) / 2};
  std::string hs = h.dump();
  while (hs.size() % 8) hs += ' ';
  const std::vector<uint8_t> data(file.begin() + 8 + std::ptrdiff_t(n), file.end());
  const fs::path dir = tmp().path / "st_hole";
  fs::create_directories(dir);
  for (const char* f : {"config.json", "tokenizer.json", "tokenizer_config.json"})
    fs::copy_file(fixture(std::string("lfm2_tiny/hf/") + f), dir / f, fs::copy_options::overwrite_existing);
  test::write_file((dir / "model.safetensors").string(), test::st_raw(hs, data));
  EXPECT_LOAD_ERROR(dir.string(), "belong to no tensor", "model.layers.0.ffn_norm.weight");
}
