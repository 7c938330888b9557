// Synthetic-weight GGUFs (tools/synth/write_gguf.py, gguf_header.py) load and run in the engine:
//   - for each architecture (llama, qwen2, gemma3, lfm2, qwen35): a file written from the published
//     config in tools/synth/configs/ with tiny overrides (d 256 so that the K-quants and
//     llama-quantize's Q4_K_M choices apply: q4_K, q6_K, the q5_0 fallback for 128-wide rows), the
//     SmolLM2 vocabulary (padded for qwen35): marked synthetic, loads on the CPU reference and on
//     WebGPU, finite non-degenerate logits, WebGPU == CPU within the parity tolerance, identical
//     greedy tokens;
//   - the Q4_K_M type choices (output / tied token_embd q6_K, ffn_down and attn_v / attn_qkv q6_K
//     by use_more_bits, the rest q4_K, F32 norms and conv kernels);
//   - the same seed gives the same bytes, another seed other bytes;
//   - a file written from the header of the installed SmolLM2-135M-Instruct Q4_1 has exactly the
//     source's tensor table (names, shapes, types, offsets, alignment) and metadata (but the name
//     and the wgllm.synthetic.* keys), and runs on the CPU with finite logits.
// Needs python3 with numpy (scripts/setup.sh installs the pin); WGLLM_PYTHON overrides the interpreter.
#include <stdlib.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "formats/gguf.h"
#include "parity_util.h"
#include "tiny_gguf_util.h"

using namespace wgllm;
using namespace wgllm::test;

namespace {

constexpr float kTolGpuVsCpu = 2e-4f;  // WebGPU f32 vs CPU f32 (summation order), logits |x| <~ 3

std::string tmp_dir() {
  static struct Dir {
    std::string path;
    Dir() {
      char t[] = "/tmp/wgllm_synth_XXXXXX";
      path = mkdtemp(t);
    }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } dir;
  return dir.path;
}

std::string src_dir() { return env_or("WGLLM_SOURCE_DIR", WGLLM_SOURCE_DIR); }
std::string vocab_model() { return cache_file("models/SmolLM2-135M-Instruct.Q4_1.gguf"); }

/// Runs tools/synth/<script> with args; fails the test (with its output) unless it exits 0.
void run_tool(const std::string& script, const std::string& args) {
  const std::string log = tmp_dir() + "/tool.log";
  const std::string cmd = env_or("WGLLM_PYTHON", "python3") + " " + src_dir() + "/tools/synth/" + script + " " + args +
                          " > " + log + " 2>&1";
  const int rc = std::system(cmd.c_str());
  std::ifstream in(log);
  const std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(rc, 0) << cmd << "\n" << out;
}

struct Arch {
  const char* arch;
  const char* config;
  const char* overrides;
  uint32_t layers;
};

void PrintTo(const Arch& a, std::ostream* os) { *os << a.arch; }

const char* kTiny = "hidden_size=256 intermediate_size=512 num_hidden_layers=4 num_attention_heads=4 "
                    "num_key_value_heads=2 vocab_size=49152 max_position_embeddings=4096";

const Arch kArchs[] = {
    {"llama", "smollm2-135m.json", "", 4},
    {"qwen2", "qwen2.5-coder-1.5b.json", "", 4},
    // 6 layers: 0-4 sliding, 5 global (pattern 6); the window of 32 covers this test's prompts (crossing it is
    // gemma3_parity_test's)
    {"gemma3", "gemma-3-270m.json", "head_dim=64 sliding_window=32 num_hidden_layers=6", 6},
    {"lfm2", "lfm2-350m.json",
     "block_ff_dim=768 'layer_types=[\"conv\",\"full_attention\",\"conv\",\"full_attention\"]'", 4},
    {"qwen35", "qwen3.5-0.8b.json",
     "num_attention_heads=2 num_key_value_heads=1 head_dim=64 linear_num_key_heads=2 linear_num_value_heads=4 "
     "linear_key_head_dim=32 linear_value_head_dim=32 vocab_size=50000", 4},
};

std::string write_tiny(const Arch& a, int seed, const std::string& suffix = "") {
  const std::string out = tmp_dir() + "/" + a.arch + suffix + ".gguf";
  if (std::filesystem::exists(out)) return out;
  run_tool("write_gguf.py", "--config " + src_dir() + "/tools/synth/configs/" + a.config + " --vocab " + vocab_model() +
                                " --seed " + std::to_string(seed) + " " + out + " --set " + kTiny + " " + a.overrides);
  return out;
}

std::string type_of(const GgufFile& f, const std::string& name) {
  const GgufTensor* t = f.find(name);
  return t ? dtype_name(t->type) : "missing";
}

/// llama-quantize's use_more_bits (src/llama-quant.cpp).
bool use_more_bits(uint32_t i, uint32_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

bool all_finite(const std::vector<float>& v) {
  for (float x : v)
    if (!std::isfinite(x)) return false;
  return true;
}

float stddev(const std::vector<float>& v) {
  double s = 0, s2 = 0;
  for (float x : v) s += x, s2 += double(x) * x;
  const double m = s / double(v.size());
  return float(std::sqrt(std::max(0.0, s2 / double(v.size()) - m * m)));
}

class SynthArch : public ::testing::TestWithParam<Arch> {};

TEST_P(SynthArch, LoadsAndRunsOnBothBackends) {
  if (!std::filesystem::exists(vocab_model())) GTEST_SKIP() << "not installed (make setup): " << vocab_model();
  const Arch& a = GetParam();
  const std::string path = write_tiny(a, 7);
  if (HasFatalFailure()) return;
  TinyModels m(path, 256);
  const GgufFile& f = *m.src->gguf;
  EXPECT_EQ(m.src->config.arch, a.arch);
  EXPECT_NE(f.get_str("general.name").find("synthetic"), std::string::npos);
  EXPECT_TRUE(f.get_bool("wgllm.synthetic"));
  EXPECT_EQ(f.get_u64("wgllm.synthetic.seed"), 7u);
  EXPECT_EQ(m.src->config.n_layers, a.layers);
  EXPECT_EQ(m.src->config.d_model, 256u);
  EXPECT_TRUE(m.src->config.tied_embeddings);
  // Q4_K_M as llama-quantize chooses it: tied token_embd q6_K, ffn_down q6_K by use_more_bits.
  EXPECT_EQ(type_of(f, "token_embd.weight"), "q6_K");
  for (uint32_t i = 0; i < a.layers; ++i) {
    const std::string p = "blk." + std::to_string(i) + ".";
    EXPECT_EQ(type_of(f, p + "ffn_down.weight"), use_more_bits(i, a.layers) ? "q6_K" : "q4_K") << i;
    EXPECT_EQ(type_of(f, p + "ffn_gate.weight"), "q4_K");
    EXPECT_EQ(type_of(f, p + "attn_norm.weight"), "f32");
  }

  const uint32_t V = m.src->config.vocab;
  for (size_t T : {1, 7}) {
    const auto ids = random_prompt(T, uint32_t(T), V);
    const auto c = last_logits(*m.cpu, ids), g = last_logits(*m.gpu, ids);
    ASSERT_EQ(c.size(), V);
    EXPECT_TRUE(all_finite(c)) << "cpu T=" << T;
    EXPECT_TRUE(all_finite(g)) << "gpu T=" << T;
    const Diff d = diff(g, c);
    std::printf("%-6s T=%zu |gpu-cpu| %.2e max|logit| %.3f sd %.3f\n", a.arch, T, d.max_abs, d.ref_max, stddev(c));
    EXPECT_GT(stddev(c), 0.05f) << "degenerate logits";
    EXPECT_LE(d.max_abs, kTolGpuVsCpu) << "T=" << T;
  }
  const auto prompt = random_prompt(5, 3, V);
  EXPECT_EQ(greedy(*m.gpu, prompt, 6), greedy(*m.cpu, prompt, 6));
}

INSTANTIATE_TEST_SUITE_P(Archs, SynthArch, ::testing::ValuesIn(kArchs),
                         [](const ::testing::TestParamInfo<Arch>& i) { return std::string(i.param.arch); });

TEST(Synth, ArchSpecificQuantTypes) {
  if (!std::filesystem::exists(vocab_model())) GTEST_SKIP() << "not installed (make setup): " << vocab_model();
  auto lfm2 = GgufFile::open(write_tiny(kArchs[3], 7));
  // attn_v of the 2 attention layers: use_more_bits(i, 2) is true for i = 1 only
  EXPECT_EQ(type_of(*lfm2, "blk.1.attn_v.weight"), "q4_K");
  EXPECT_EQ(type_of(*lfm2, "blk.3.attn_v.weight"), "q6_K");
  EXPECT_EQ(type_of(*lfm2, "blk.0.shortconv.conv.weight"), "f32");
  EXPECT_EQ(type_of(*lfm2, "token_embd_norm.weight"), "f32");
  auto q35 = GgufFile::open(write_tiny(kArchs[4], 7));
  // attn_qkv (linear layers 0-2) and attn_v (layer 3) share llama-quantize's attention-v counter
  EXPECT_EQ(type_of(*q35, "blk.0.attn_qkv.weight"), "q4_K");
  EXPECT_EQ(type_of(*q35, "blk.2.attn_qkv.weight"), "q6_K");
  EXPECT_EQ(type_of(*q35, "blk.3.attn_v.weight"), "q6_K");
  EXPECT_EQ(type_of(*q35, "blk.0.ssm_out.weight"), "q5_0");  // 128-wide rows: the Q4_K fallback
  EXPECT_EQ(type_of(*q35, "blk.0.ssm_conv1d.weight"), "f32");
  EXPECT_EQ(type_of(*q35, "blk.0.ssm_a"), "f32");
  EXPECT_EQ(q35->get_u64("qwen35.rope.dimension_count"), 16u);
  EXPECT_EQ(q35->get_int_array("qwen35.rope.dimension_sections").size(), 4u);
  EXPECT_EQ(q35->get_str_array("tokenizer.ggml.tokens").size(), 50000u);  // SmolLM2's 49152 + padding
  for (const GgufTensor& t : q35->tensors())
    if (t.name.size() > 6 && t.name.compare(t.name.size() - 6, 6, ".ssm_a") == 0) {
      std::vector<float> v(t.n_elements());
      dequantize(t.type, t.data, v.data(), v.size());
      for (float x : v) EXPECT_LT(x, 0.0f) << t.name;  // -exp(A_log)
    }
}

TEST(Synth, SeedDeterminesTheBytes) {
  if (!std::filesystem::exists(vocab_model())) GTEST_SKIP() << "not installed (make setup): " << vocab_model();
  auto bytes = [](const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const Arch& a = kArchs[0];
  const std::string x = bytes(write_tiny(a, 7)), y = bytes(write_tiny(a, 7, "_again"));
  const std::string z = bytes(write_tiny(a, 8, "_seed8"));
  EXPECT_FALSE(x.empty());
  EXPECT_TRUE(x == y) << "same seed, different bytes";
  ASSERT_EQ(x.size(), z.size());
  EXPECT_FALSE(x == z) << "another seed, same bytes";
}

TEST(Synth, HeaderDerivedFileHasTheSourceTensorTable) {
  const std::string src = vocab_model();
  if (!std::filesystem::exists(src)) GTEST_SKIP() << "not installed (make setup): " << src;
  const std::string hdr = tmp_dir() + "/smollm2.hdr.gz", out = tmp_dir() + "/smollm2_synth.gguf";
  run_tool("gguf_header.py", src + " " + hdr);
  if (HasFatalFailure()) return;
  EXPECT_LT(std::filesystem::file_size(hdr), 2u << 20) << "the header extract should be small";
  run_tool("write_gguf.py", "--header " + hdr + " --seed 3 " + out);
  if (HasFatalFailure()) return;
  auto a = GgufFile::open(src), b = GgufFile::open(out);
  EXPECT_EQ(a->alignment(), b->alignment());
  ASSERT_EQ(a->tensors().size(), b->tensors().size());
  for (size_t i = 0; i < a->tensors().size(); ++i) {
    const GgufTensor &x = a->tensors()[i], &y = b->tensors()[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.shape, y.shape) << x.name;
    EXPECT_EQ(x.type, y.type) << x.name;
    EXPECT_EQ(x.offset, y.offset) << x.name;
    EXPECT_EQ(x.nbytes, y.nbytes) << x.name;
  }
  for (const auto& [k, v] : a->metadata()) {
    if (k == "general.name") continue;
    ASSERT_TRUE(b->has(k)) << k;
    EXPECT_EQ(b->metadata().at(k).type, v.type) << k;
    EXPECT_TRUE(b->metadata().at(k).v == v.v) << k;
  }
  EXPECT_EQ(b->get_str("general.name"), a->get_str("general.name") + " (synthetic weights)");
  EXPECT_TRUE(b->get_bool("wgllm.synthetic"));
  // The weights are new: a q4_1 matrix differs from the source's.
  const GgufTensor& qa = a->tensor("blk.0.ffn_up.weight");
  const GgufTensor& qb = b->tensor("blk.0.ffn_up.weight");
  EXPECT_NE(std::memcmp(qa.data, qb.data, qa.nbytes), 0);
  // and it runs (CPU reference; the backends' parity is covered above).
  auto s = ModelSource::open(out);
  ModelOptions o;
  o.context_length = 64;
  o.backend = BackendKind::CPU;
  auto m = create_model(*s, o);
  const auto l = last_logits(*m, random_prompt(3, 1, s->config.vocab));
  EXPECT_TRUE(all_finite(l));
  EXPECT_GT(stddev(l), 0.05f);
}

}  // namespace
