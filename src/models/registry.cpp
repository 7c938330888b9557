#include "models/registry.h"

#include "core/error.h"
#include "models/gemma3.h"
#include "models/lfm2.h"
#include "models/llama.h"
#include "models/qwen2.h"
#include "models/qwen35.h"
#include "models/source.h"

namespace wgllm {

const std::vector<ArchEntry>& architectures() {
  static const std::vector<ArchEntry> table = {
      {"llama", {"llama"}, {"llama"}, llama_config_from_gguf, llama_config_from_hf, create_llama_cpu, create_llama_gpu},
      {"qwen2", {"qwen2"}, {"qwen2"}, qwen2_config_from_gguf, qwen2_config_from_hf, create_qwen2_cpu, create_qwen2_gpu},
      {"gemma3", {"gemma3"}, {"gemma3_text"}, gemma3_config_from_gguf, gemma3_config_from_hf, create_gemma3_cpu,
       create_gemma3_gpu},
      {"qwen35", {"qwen35"}, {"qwen3_5_text", "qwen3_5"}, qwen35_config_from_gguf, qwen35_config_from_hf, create_qwen35_cpu,
       create_qwen35_gpu},
      {"lfm2", {"lfm2"}, {"lfm2"}, lfm2_config_from_gguf, lfm2_config_from_hf, create_lfm2_cpu, create_lfm2_gpu},
  };
  return table;
}

const ArchEntry* find_arch_gguf(const std::string& a) {
  for (auto& e : architectures())
    for (auto& n : e.gguf_arch)
      if (n == a) return &e;
  return nullptr;
}
const ArchEntry* find_arch_hf(const std::string& t) {
  for (auto& e : architectures())
    for (auto& n : e.hf_model_type)
      if (n == t) return &e;
  return nullptr;
}
const ArchEntry* find_arch(const std::string& name) {
  for (auto& e : architectures())
    if (e.name == name) return &e;
  return nullptr;
}
std::unique_ptr<Model> create_model(const ModelSource& src, const ModelOptions& opt) {
  const ArchEntry* e = find_arch(src.config.arch);
  if (!e) throw Error("unsupported architecture '" + src.config.arch + "'; supported: " + supported_architectures());
  return opt.backend == BackendKind::CPU ? e->create_cpu(src, opt) : e->create_gpu(src, opt);
}

std::string supported_architectures() {
  std::string s;
  for (auto& e : architectures()) s += (s.empty() ? "" : ", ") + e.name;
  return s;
}

}  // namespace wgllm
