#include "models/source.h"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace wgllm {

std::unique_ptr<ModelSource> ModelSource::open(const std::string& path) {
  namespace fs = std::filesystem;
  auto s = std::make_unique<ModelSource>();
  s->path = path;
  std::error_code ec;
  if (!fs::exists(path, ec)) throw Error(path + ": no such file or directory");
  if (fs::is_directory(path, ec)) {
    s->hf = HfDir::open(path);
    s->tensors = std::make_unique<TensorStore>(*s->hf);
    s->config = config_from_hf(s->hf->config(), path + "/config.json");
  } else {
    s->gguf = GgufFile::open(path);
    s->tensors = std::make_unique<TensorStore>(*s->gguf);
    s->config = config_from_gguf(*s->gguf);
  }
  return s;
}

std::string ModelSource::chat_template() const {
  if (gguf) return gguf->get_str_or("tokenizer.chat_template", "");
  if (hf && hf->tokenizer_config_path()) {
    std::ifstream in(*hf->tokenizer_config_path());
    nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_object() && j.contains("chat_template") && j["chat_template"].is_string())
      return j["chat_template"].get<std::string>();
  }
  return "";
}

}  // namespace wgllm
