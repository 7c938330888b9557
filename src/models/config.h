// ModelConfig: the architecture hyper-parameters the engine needs, read from GGUF metadata
// (`<arch>.*` keys, llama.cpp naming) or from a Hugging Face config.json.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace wgllm {

class GgufFile;

struct ModelConfig {
  std::string arch;          // engine architecture name from the registry ("llama", ...)
  std::string name;          // human-readable model name
  uint32_t n_layers = 0;
  uint32_t d_model = 0;      // hidden size
  uint32_t n_heads = 0;      // query heads
  uint32_t n_kv_heads = 0;   // key/value heads (GQA when < n_heads)
  uint32_t head_dim = 0;
  uint32_t ffn_dim = 0;      // SwiGLU intermediate size
  uint32_t vocab = 0;
  uint32_t max_context = 0;  // trained context length
  float rms_eps = 1e-5f;
  double rope_base = 10000.0;
  uint32_t rope_dims = 0;    // rotated dims per head (== head_dim unless partial rotary)
  bool rope_neox = false;    // pair layout: false = (2i, 2i+1) (GGUF llama), true = (i, i+d/2) (HF)
  bool tied_embeddings = false;
  uint32_t q_dim() const { return n_heads * head_dim; }
  uint32_t kv_dim() const { return n_kv_heads * head_dim; }
};

/// Reads a config.json field (throws wgllm::Error naming the field when missing or mistyped), and
/// the same with a default when the field is absent or null. Shared by the architectures' parsers.
template <class T>
T need(const nlohmann::json& j, const char* key, const std::string& path);
template <class T>
T opt(const nlohmann::json& j, const char* key, T def, const std::string& path) {
  if (!j.contains(key) || j[key].is_null()) return def;
  return need<T>(j, key, path);
}

/// Dispatches on `general.architecture` through the registry (models/registry.h) and validates. Throws wgllm::Error naming the key for a
/// missing/invalid value and for architectures the engine does not implement.
ModelConfig config_from_gguf(const GgufFile& f);
/// Dispatches on config.json `model_type` through the registry and validates.
ModelConfig config_from_hf(const nlohmann::json& cfg, const std::string& path);
/// Checks internal consistency (divisibility, sizes > 0). Throws wgllm::Error.
void validate(const ModelConfig& c, const std::string& source);

}  // namespace wgllm
