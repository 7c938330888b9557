// A Hugging Face model directory (as written by transformers' save_pretrained):
//   config.json                       required, model hyper-parameters
//   model.safetensors                 single-file weights, or
//   model.safetensors.index.json      {"metadata": {...}, "weight_map": {"<tensor>": "<shard file>"}}
//                                     plus the shard files it names (same directory)
//   tokenizer.json, tokenizer_config.json, generation_config.json   optional
// When both model.safetensors and the index exist, model.safetensors wins (as in transformers).
// Errors (missing/corrupt files, shard names with '/' or "..", a tensor named in the index but
// absent from its shard, a tensor present in two shards) throw wgllm::Error naming the file.
#pragma once
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "formats/safetensors.h"

namespace wgllm {

class HfDir {
 public:
  /// Opens `dir`: parses config.json (and generation_config.json when present) and maps every
  /// weight file. Throws wgllm::Error.
  static std::unique_ptr<HfDir> open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  const nlohmann::json& config() const { return config_; }
  /// Parsed generation_config.json, or nullopt when the file is absent.
  const std::optional<nlohmann::json>& generation_config() const { return gen_config_; }
  /// Absolute-or-as-given paths (dir + "/tokenizer.json"), or nullopt when the file is absent.
  const std::optional<std::string>& tokenizer_json_path() const { return tokenizer_json_; }
  const std::optional<std::string>& tokenizer_config_path() const { return tokenizer_config_; }

  /// The weight files (1 for model.safetensors, N for a sharded checkpoint, in shard-name order).
  const std::vector<std::unique_ptr<SafetensorsFile>>& shards() const { return shards_; }
  /// Every tensor of every shard, sorted by name (pointers stay valid while the HfDir lives).
  const std::vector<const SafetensorsTensor*>& tensors() const { return tensors_; }
  /// nullptr when absent.
  const SafetensorsTensor* find(const std::string& name) const;
  /// Throws wgllm::Error naming the tensor and directory when absent.
  const SafetensorsTensor& tensor(const std::string& name) const;

 private:
  HfDir() = default;
  std::string dir_;
  nlohmann::json config_;
  std::optional<nlohmann::json> gen_config_;
  std::optional<std::string> tokenizer_json_, tokenizer_config_;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  std::vector<const SafetensorsTensor*> tensors_;
  std::map<std::string, const SafetensorsTensor*> index_;
};

}  // namespace wgllm
