// ModelConfig: the architecture hyper-parameters the engine needs, read from GGUF metadata
// (`<arch>.*` keys, llama.cpp naming) or from a Hugging Face config.json.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace wgllm {

class GgufFile;

struct ModelConfig {
  std::string arch;          // "llama" (GGUF general.architecture / HF model_type)
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

/// Reads `general.architecture` and the `<arch>.*` keys. Throws wgllm::Error naming the key for a
/// missing/invalid value and for architectures the engine does not implement.
ModelConfig config_from_gguf(const GgufFile& f);
/// Reads a transformers config.json (model_type "llama"). Throws wgllm::Error naming the field.
ModelConfig config_from_hf(const nlohmann::json& cfg, const std::string& path);
/// Checks internal consistency (divisibility, sizes > 0). Throws wgllm::Error.
void validate(const ModelConfig& c, const std::string& source);

}  // namespace wgllm
