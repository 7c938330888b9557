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

}  // namespace wgllm::test
