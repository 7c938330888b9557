// Architecture registry: one entry per supported architecture, naming how to read its config
// from GGUF metadata or a transformers config.json and how to build it on each backend.
// Adding an architecture = one file per backend plus one line in registry.cpp.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "models/config.h"
#include "models/model.h"

namespace wgllm {

class GgufFile;

struct ArchEntry {
  std::string name;                         // engine name, e.g. "llama"
  std::vector<std::string> gguf_arch;       // GGUF general.architecture values
  std::vector<std::string> hf_model_type;   // config.json model_type values
  ModelConfig (*from_gguf)(const GgufFile&);
  ModelConfig (*from_hf)(const nlohmann::json& cfg, const std::string& path);
  std::unique_ptr<Model> (*create_cpu)(const ModelSource&, const ModelOptions&);
  std::unique_ptr<Model> (*create_gpu)(const ModelSource&, const ModelOptions&);
};

const std::vector<ArchEntry>& architectures();
/// nullptr when unknown.
const ArchEntry* find_arch_gguf(const std::string& general_architecture);
const ArchEntry* find_arch_hf(const std::string& model_type);
const ArchEntry* find_arch(const std::string& engine_name);
/// "llama, lfm2, ..." for error messages.
std::string supported_architectures();

}  // namespace wgllm
