// Agreement with llama.cpp (CPU backend, built from the llama-cpp-python 0.3.36 sdist by
// tools/peers/build_llamacpp_cpu.sh) on the real GGUFs in the model cache (issue 13 item 3):
//   - greedy continuations of a few raw prompts identical to llama.cpp's (tools/peers/
//     llama_greedy.cpp) where the logit margin allows: at the first divergence, either engine's
//     margin between the two candidates must be <= kTieMargin (printed either way);
//   - the prompts tokenize to the same ids;
//   - perplexity by llama-perplexity's method (runtime/perplexity.h) within 0.5% of
//     llama-perplexity's "Final estimate" on the same text slice with the same n_ctx, over the
//     same number of chunks.
// Opt-in (slow; needs the peer build and the real models): WGLLM_LLAMACPP_TESTS=1. Skips with a
// message when the build or a model is missing. Knobs (environment):
//   WGLLM_LLAMACPP_BIN    folder with llama-perplexity and llama-greedy (default: the cache's
//                         llamacpp-cpu-0.3.36-*/bin, as the build script prints it)
//   WGLLM_AGREE_MODELS    comma-separated substrings of model files to run (default: all)
//   WGLLM_AGREE_BACKEND   webgpu (default) or cpu
//   WGLLM_AGREE_SWITCHES  kernel switches in the CLI's spelling for the wgllm model (e.g. "--matmul-int8":
//                         the hardware GPUs' int8-activation prefill on lavapipe); printed beside the backend
//   WGLLM_PPL_TEXT        text file (default: the cache's Moby-Dick, text/package/moby-dick/data/data.txt)
//   WGLLM_PPL_OFFSET, WGLLM_PPL_CHARS  the slice of it (default 20000, 12000 characters)
//   WGLLM_PPL_CTX, WGLLM_PPL_CHUNKS    n_ctx (default 512) and the chunk limit (default: all)
//   WGLLM_GREEDY_N        tokens per greedy continuation (default 24)
//   WGLLM_LLAMACPP_THREADS  llama.cpp threads (default: all cores)
// Measured 2026-12-02 on the CPU-only dev machine (lavapipe, 2 cores shared with other builds):
// gemma-3-270m, 3 prompts x 12 greedy tokens identical to llama.cpp (smallest llama.cpp margin
// 0.008); Moby-Dick bytes 20000..32000, n_ctx 512, 2 chunks: wgllm 62.0268 +/- 9.41967,
// llama-perplexity 62.2613 +/- 9.43262 (0.377%); bytes 20000..26000, 1 chunk: 47.3722 vs
// 47.5940 (0.466%): wgllm is lower in both, close to the bound. Qwen2.5-Coder-1.5B: 3 prompts x 12
// greedy tokens identical (smallest llama.cpp margin 0.038). 2026-12-06, same machine, the CPU backend
// (WGLLM_AGREE_BACKEND=cpu, WGLLM_PPL_CHUNKS=2): Qwen2.5-Coder-1.5B PPL 47.6022 vs llama-perplexity
// 47.4802 (0.257%), 1 of 3 prompts x 24 greedy tokens identical, the other two departing at near-ties
// (bench/results/2026-12-06-cpu-agreement-qwen25-1.5b/); 2026-12-07, the WebGPU backend on lavapipe: PPL
// 47.6021 (0.257%), the same two greedy departures with the same margins
// (bench/results/2026-12-07-lavapipe-agreement-qwen25-1.5b/, 21.6 min). Later on 2026-12-07, `wgllm perplexity -c 512
// --chunks 2` on the same 12000 characters (lavapipe) against those llama-perplexity values: Qwen2.5-Coder-1.5B on
// the int8 prefill path (--matmul-tiled --matmul-int8, the hardware GPUs' default) 47.6728 (0.406%); gemma-3-270m
// with flash attention for its head dim 256 and windowed layers (on by default since that day) 62.1909 vs 62.2613
// (0.113%; 62.0268 on the tiled kernel on 2026-12-02). Re-measured 2026-12-07 with another build of the same
// sdist (AVX512 CPU, bench/results/2026-12-07-cpu-llamacpp-slice-peers/): llama-perplexity 47.4802 again on the
// 1.5B but 61.9502 on gemma-3-270m, putting the engine's unchanged 62.191 at 0.389% from it. Not in CI: the llama.cpp build took
// 37 min there, and lavapipe needed 10-28 min for one or two 512-token gemma chunks.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/registry.h"
#include "models/switches.h"
#include "models/source.h"
#include "parity_util.h"
#include "runtime/perplexity.h"
#include "tokenizer/tokenizer.h"

using namespace wgllm;
using namespace wgllm::test;
namespace fs = std::filesystem;

namespace {

constexpr double kPplRel = 0.005;    // the issue's bound: within 0.5% of llama-perplexity
constexpr float kTieMargin = 0.25f;  // logits: a divergence below this margin is a near-tie

std::string run_capture(const std::string& cmd) {
  std::string out;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int rc = pclose(p);
  if (rc != 0) out += "\n[exit status " + std::to_string(rc) + "]";
  return out;
}

std::string peer_bin() {
  const std::string e = env_or("WGLLM_LLAMACPP_BIN", "");
  if (!e.empty()) return e;
  const fs::path cache = cache_file("");
  std::error_code ec;
  for (const auto& d : fs::directory_iterator(cache, ec))
    if (d.path().filename().string().rfind("llamacpp-cpu-0.3.36-", 0) == 0 && fs::exists(d.path() / "bin/llama-greedy"))
      return (d.path() / "bin").string();
  return "";
}

std::string threads() {
  return env_or("WGLLM_LLAMACPP_THREADS", std::to_string(std::max(1u, std::thread::hardware_concurrency())).c_str());
}

struct Peer {
  std::string bin, model;
};

// The checks every test does first; returns false (after GTEST_SKIP's message) when skipping.
bool setup(const std::string& file, Peer* s) {
  if (env_or("WGLLM_LLAMACPP_TESTS", "") != "1") return false;
  s->bin = peer_bin();
  s->model = cache_file("models/" + file);
  return !s->bin.empty() && fs::exists(s->model);
}
std::string skip_reason(const std::string& file) {
  if (env_or("WGLLM_LLAMACPP_TESTS", "") != "1")
    return "opt-in: set WGLLM_LLAMACPP_TESTS=1 (runs llama.cpp and real models; slow)";
  if (peer_bin().empty()) return "llama.cpp CPU build not found: run tools/peers/build_llamacpp_cpu.sh (or set WGLLM_LLAMACPP_BIN)";
  return "model not installed: " + cache_file("models/" + file);
}

bool selected(const std::string& file) {
  const std::string sel = env_or("WGLLM_AGREE_MODELS", "");
  if (sel.empty()) return true;
  std::stringstream ss(sel);
  for (std::string part; std::getline(ss, part, ',');)
    if (!part.empty() && file.find(part) != std::string::npos) return true;
  return false;
}

std::unique_ptr<Model> load(const ModelSource& src, uint32_t ctx) {
  ModelOptions o;
  o.context_length = ctx;
  o.backend = env_or("WGLLM_AGREE_BACKEND", "webgpu") == "cpu" ? BackendKind::CPU : BackendKind::WebGPU;
  apply_switch_args(o, env_or("WGLLM_AGREE_SWITCHES", ""));
  return create_model(src, o);
}

// The model's backend as the logs print it, with WGLLM_AGREE_SWITCHES when set.
std::string backend_label(const Model& m) {
  const std::string sw = env_or("WGLLM_AGREE_SWITCHES", "");
  return m.backend_name() + (sw.empty() ? "" : " [" + sw + "]");
}

std::string temp_file(const std::string& name, const std::string& bytes) {
  const std::string p = (fs::temp_directory_path() / ("wgllm_agree_" + std::to_string(getpid()) + "_" + name)).string();
  std::ofstream(p, std::ios::binary) << bytes;
  return p;
}

class Agreement : public ::testing::TestWithParam<std::string> {};

TEST_P(Agreement, GreedyContinuations) {
  const std::string file = GetParam();
  if (!selected(file)) GTEST_SKIP() << "not in WGLLM_AGREE_MODELS";
  Peer s;
  if (!setup(file, &s)) GTEST_SKIP() << skip_reason(file);
  auto src = ModelSource::open(s.model);
  auto tok = Tokenizer::from_gguf(*src->gguf);
  auto m = load(*src, 256);
  const int n = std::stoi(env_or("WGLLM_GREEDY_N", "24"));
  const std::vector<std::string> prompts = {
      "The capital of France is",
      "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
      "Call me Ishmael. Some years ago, never mind how long precisely, having little or no money in my purse,"};
  int exact = 0;
  for (size_t k = 0; k < prompts.size(); ++k) {
    const std::string pf = temp_file("prompt" + std::to_string(k) + ".txt", prompts[k]);
    const std::string out = run_capture("'" + s.bin + "/llama-greedy' '" + s.model + "' " + std::to_string(n) + " '" + pf + "'");
    fs::remove(pf);
    const size_t brace = out.rfind("{\"prompt\"");
    ASSERT_NE(brace, std::string::npos) << "llama-greedy failed:\n" << out;
    const nlohmann::json j = nlohmann::json::parse(out.substr(brace));
    const auto ids = j["prompt"].get<std::vector<int32_t>>();
    const auto want = j["tokens"].get<std::vector<int32_t>>();
    const auto want_margin = j["margin"].get<std::vector<float>>();
    EXPECT_EQ(tok->encode_prompt(prompts[k], false), ids) << "tokenization differs from llama.cpp, prompt " << k;
    // wgllm greedy from llama.cpp's prompt ids, with the logits of every step.
    auto seq = m->new_sequence(uint32_t(ids.size() + n + 1));
    std::vector<float> l;
    m->forward(*seq, ids, &l);
    size_t div = want.size();
    float ours_gap = 0;
    std::vector<int32_t> got;
    for (int i = 0; i < n; ++i) {
      const int32_t g = int32_t(std::max_element(l.begin(), l.end()) - l.begin());
      got.push_back(g);
      if (g != want[size_t(i)] && div == want.size()) {
        div = size_t(i);
        ours_gap = l[size_t(g)] - l[size_t(want[size_t(i)])];
        break;  // past a divergence the two continuations condition on different text
      }
      if (i + 1 < n) m->forward(*seq, std::span<const int32_t>(&g, 1), &l);
    }
    const std::string text = tok->decode(want);
    if (div == want.size()) {
      ++exact;
      std::printf("[%s] prompt %zu: %d tokens identical; min llama.cpp margin %.3f: %s\n", file.c_str(), k, n,
                  *std::min_element(want_margin.begin(), want_margin.end()), text.c_str());
    } else {
      std::printf("[%s] prompt %zu: first divergence at token %zu: wgllm %d vs llama.cpp %d; wgllm margin %.4f, "
                  "llama.cpp margin %.4f\n", file.c_str(), k, div, got[div], want[div], ours_gap, want_margin[div]);
      EXPECT_TRUE(ours_gap <= kTieMargin || want_margin[div] <= kTieMargin)
          << "divergence at token " << div << " with margins above " << kTieMargin;
    }
  }
  std::printf("[%s] %d of %zu greedy continuations identical\n", file.c_str(), exact, prompts.size());
}

TEST_P(Agreement, PerplexityWithinHalfPercent) {
  const std::string file = GetParam();
  if (!selected(file)) GTEST_SKIP() << "not in WGLLM_AGREE_MODELS";
  Peer s;
  if (!setup(file, &s)) GTEST_SKIP() << skip_reason(file);
  const std::string text_path = env_or("WGLLM_PPL_TEXT", cache_file("text/package/moby-dick/data/data.txt").c_str());
  if (!fs::exists(text_path)) GTEST_SKIP() << "text not found: " << text_path << " (make setup installs it)";
  std::ifstream f(text_path, std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t off = std::min<size_t>(std::stoull(env_or("WGLLM_PPL_OFFSET", "20000")), all.size());
  std::string text = all.substr(off, std::stoull(env_or("WGLLM_PPL_CHARS", "12000")));
  const uint32_t n_ctx = uint32_t(std::stoul(env_or("WGLLM_PPL_CTX", "512")));
  const std::string chunks = env_or("WGLLM_PPL_CHUNKS", "");
  const std::string tf = temp_file("text.txt", text);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string out = run_capture("'" + s.bin + "/llama-perplexity' -m '" + s.model + "' -f '" + tf + "' -c " +
                                      std::to_string(n_ctx) + " -b " + std::to_string(n_ctx) + " -t " + threads() +
                                      (chunks.empty() ? "" : " --chunks " + chunks));
  const double peer_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fs::remove(tf);
  std::smatch mt;
  ASSERT_TRUE(std::regex_search(out, mt, std::regex(R"(Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+))")))
      << "llama-perplexity gave no estimate:\n" << out.substr(out.size() > 3000 ? out.size() - 3000 : 0);
  const double want = std::stod(mt[1]), want_err = std::stod(mt[2]);
  std::smatch mc;
  ASSERT_TRUE(std::regex_search(out, mc, std::regex(R"(calculating perplexity over (\d+) chunks)")));
  const uint32_t want_chunks = uint32_t(std::stoul(mc[1]));

  // wgllm: the text as llama-perplexity reads it (-f drops one trailing newline), same method.
  if (!text.empty() && text.back() == '\n') text.pop_back();
  auto src = ModelSource::open(s.model);
  auto tok = Tokenizer::from_gguf(*src->gguf);
  auto m = load(*src, n_ctx);
  const std::vector<int32_t> ids = tok->encode_prompt(text, false);
  PerplexityOptions o;
  o.n_ctx = n_ctx;
  o.max_chunks = chunks.empty() ? -1 : std::stoll(chunks);
  o.bos = tok->add_bos() ? tok->bos_id() : -1;
  const auto t1 = std::chrono::steady_clock::now();
  const PerplexityResult r = perplexity_chunks(*m, ids, o);
  const double ours_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  const double rel = std::fabs(r.ppl - want) / want;
  std::printf("[%s] n_ctx %u, %u chunks, %llu tokens scored (%zu tokens): wgllm %s PPL %.4f +/- %.5f (%.1f s), "
              "llama-perplexity %.4f +/- %.5f (%u chunks, %.1f s), rel diff %.3f%%\n",
              file.c_str(), n_ctx, r.chunks, (unsigned long long)r.scored, ids.size(), backend_label(*m).c_str(), r.ppl,
              r.ppl_stderr, ours_s, want, want_err, want_chunks, peer_s, 100 * rel);
  EXPECT_EQ(r.chunks, want_chunks) << "different chunk counts: the tokenizations differ in length";
  EXPECT_LE(rel, kPplRel);
}

INSTANTIATE_TEST_SUITE_P(RealFiles, Agreement,
                         ::testing::Values("gemma-3-270m-q4_k_m.gguf", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"),
                         [](const auto& i) { return i.param.find("gemma") == 0 ? std::string("gemma3_270m") : std::string("qwen25_coder_1_5b"); });

}  // namespace
