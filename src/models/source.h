// ModelSource: an opened model, from a GGUF file or a Hugging Face directory, with its config and
// a uniform view of its tensors. The weights stay memory-mapped until the backend has loaded them.
#pragma once
#include <memory>
#include <string>

#include "formats/gguf.h"
#include "formats/hf_dir.h"
#include "formats/tensor_store.h"
#include "models/config.h"

namespace wgllm {

struct ModelSource {
  std::string path;
  std::unique_ptr<GgufFile> gguf;  // exactly one of gguf / hf is set
  std::unique_ptr<HfDir> hf;
  std::unique_ptr<TensorStore> tensors;
  ModelConfig config;

  /// A regular file is read as GGUF, a directory as a Hugging Face model directory.
  /// Throws wgllm::Error (missing path, corrupt file, unsupported architecture, ...).
  static std::unique_ptr<ModelSource> open(const std::string& path);
  bool is_gguf() const { return gguf != nullptr; }
  /// The model's own chat template (GGUF tokenizer.chat_template or tokenizer_config.json
  /// chat_template); empty when it has none.
  std::string chat_template() const;
};

}  // namespace wgllm
