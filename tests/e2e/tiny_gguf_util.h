// Helpers for parity tests of tiny random-weight GGUF models written at test time (qwen2, gemma3):
// the file in a temporary directory, the model on both backends, random prompts, last logits.
#pragma once
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "formats/gguf_test_doc.h"
#include "models/model.h"
#include "models/registry.h"
#include "models/source.h"
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
    gpu = create_model(*src, o);
  }
};

/// T token ids uniform in [0, vocab), reproducible from seed.
inline std::vector<int32_t> random_prompt(size_t T, uint32_t seed, uint32_t vocab) {
  std::mt19937 rng(seed);
  std::vector<int32_t> ids(T);
  for (auto& x : ids) x = int32_t(rng() % vocab);
  return ids;
}

/// Last-position logits of ids on a new sequence of m.
inline std::vector<float> last_logits(Model& m, const std::vector<int32_t>& ids) {
  auto seq = m.new_sequence();
  std::vector<float> l;
  m.forward(*seq, ids, &l);
  return l;
}

/// src on WebGPU with storage bindings capped at max_bytes (the test-only
/// WGLLM_TEST_MAX_BINDING_BYTES hook, unset again whatever happens): the oversized-weight paths.
inline std::unique_ptr<Model> create_gpu_with_binding_cap(const ModelSource& src, uint32_t context_length,
                                                          const char* max_bytes) {
  setenv("WGLLM_TEST_MAX_BINDING_BYTES", max_bytes, 1);
  ModelOptions o;
  o.context_length = context_length;
  o.backend = BackendKind::WebGPU;
  std::unique_ptr<Model> m;
  try {
    m = create_model(src, o);
  } catch (...) {
    unsetenv("WGLLM_TEST_MAX_BINDING_BYTES");
    throw;
  }
  unsetenv("WGLLM_TEST_MAX_BINDING_BYTES");
  return m;
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
  const auto g = greedy(*create_model(*src, o), ids, n);
  std::printf("webgpu: %s\n", tok->decode(g).c_str());
  o.backend = BackendKind::CPU;
  const auto c = greedy(*create_model(*src, o), ids, n);
  std::printf("cpu:    %s\n", tok->decode(c).c_str());
  EXPECT_EQ(g, c);
}

}  // namespace wgllm::test
