// ModelConfig: the architecture hyper-parameters the engine needs, read from GGUF metadata
// (`<arch>.*` keys, llama.cpp naming) or from a Hugging Face config.json.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace wgllm {

class GgufFile;

/// The shape of a Gated DeltaNet layer (Yang et al. 2024; Qwen3.5's linear attention): nk key
/// heads and nv value heads (nv % nk == 0) of dk / dv, a causal conv of width conv_k over the
/// [q | k | v] channels; tiled_v_heads: value head h uses key head h % nk (llama.cpp's qwen35 GGUF
/// order) instead of h / (nv / nk).
struct DeltaNetShape {
  uint32_t nk = 0, nv = 0, dk = 0, dv = 0, conv_k = 0;
  bool tiled_v_heads = false;
  uint32_t key_dim() const { return nk * dk; }
  uint32_t value_dim() const { return nv * dv; }
  uint32_t conv_dim() const { return 2 * key_dim() + value_dim(); }
};

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
/// Numbers are strict: uint32_t takes a non-negative integer <= 2^32-1 (a float only when it is
/// integral, as Python writes 4.0); float/double take a finite number. Anything else names the
/// field and the value.
template <class T>
T need(const nlohmann::json& j, const char* key, const std::string& path);
template <class T>
T opt(const nlohmann::json& j, const char* key, T def, const std::string& path) {
  if (!j.contains(key) || j[key].is_null()) return def;
  return need<T>(j, key, path);
}

/// Allowed range of an integer hyper-parameter, [lo, hi].
struct UintRange {
  uint64_t lo, hi;
};
/// Allowed range of a real hyper-parameter: finite and in [lo, hi] ((lo, hi] when lo_open).
struct RealRange {
  double lo, hi;
  bool lo_open = false;
};
/// The ranges the engine accepts (the kernels' limits and sane bounds for real models).
namespace hp {
inline constexpr UintRange layers{1, 1024}, d_model{1, 65536}, heads{1, 1024}, head_dim{4, 256},
    ffn{1, 262144}, vocab{1, 1u << 24}, context{1, 0xffffffffu};
/// RMSNorm epsilon: positive, small, and a normal f32 (typical 1e-5 / 1e-6).
inline constexpr RealRange rms_eps{1e-30, 1e-2};
/// RoPE frequency base theta (typical 1e4 .. 1e7): above 1, so frequencies fall with dimension.
inline constexpr RealRange rope_base{1.0, 1e300, true};
}  // namespace hp

/// Range-checked hyper-parameter readers. Errors name the source, the key and the value:
/// "<file>: metadata 'llama.rope.freq_base' = nan: must be a finite number in (1, 1e+300]".
/// GGUF: integer keys of any integer type (an out-of-range or negative value is an error, never
/// truncated to 32 bits), real keys of any numeric type. The *_or forms return def when absent.
uint32_t gguf_uint(const GgufFile& f, const std::string& key, UintRange r);
uint32_t gguf_uint_or(const GgufFile& f, const std::string& key, uint32_t def, UintRange r);
double gguf_real_or(const GgufFile& f, const std::string& key, double def, RealRange r);
/// config.json: `where` names the object for nested keys (e.g. "rope_parameters"), "" for the top.
uint32_t hf_uint(const nlohmann::json& j, const char* key, const std::string& path, UintRange r,
                 const std::string& where = "");
uint32_t hf_uint_or(const nlohmann::json& j, const char* key, uint32_t def, const std::string& path, UintRange r,
                    const std::string& where = "");
double hf_real_or(const nlohmann::json& j, const char* key, double def, const std::string& path, RealRange r,
                  const std::string& where = "");
/// The attention shape of a config.json (the same keys in every architecture): n_heads
/// (num_attention_heads), n_kv_heads (num_key_value_heads, default n_heads; must divide it) and
/// head_dim (default hidden_size / num_attention_heads, which must then divide). Needs c.d_model.
void hf_attention_shape(const nlohmann::json& j, const std::string& path, ModelConfig& c);
/// GGUF attention shape of architecture prefix `a` ("llama."), with c.n_heads, c.n_kv_heads and
/// c.d_model already read: n_kv_heads must divide n_heads; head_dim from attention.key_length
/// (default d_model / n_heads, which must then divide); attention.value_length must equal it.
/// Throws wgllm::Error naming the keys.
void gguf_attention_shape(const GgufFile& f, const std::string& a, ModelConfig& c);
/// The dense transformer dimensions of prefix `a`: block_count, embedding_length,
/// feed_forward_length, attention.head_count, attention.head_count_kv (one number, default
/// head_count), then gguf_attention_shape(). Throws wgllm::Error naming the key.
void gguf_transformer_shape(const GgufFile& f, const std::string& a, ModelConfig& c);
/// c.vocab from the rows of token_embd.weight (2-D, within the hyper-parameter range) and
/// c.tied_embeddings (no output.weight). Throws wgllm::Error.
void gguf_vocab(const GgufFile& f, ModelConfig& c);
/// GGUF RoPE scaling keys of architecture prefix `a` ("llama."): rope.scaling.type other than
/// "none", and a rope.scaling.factor / rope.scale_linear other than 0 or 1 (llama.cpp reads a
/// factor without a type as linear scaling), are unsupported: wgllm::Error naming key and value.
void gguf_check_rope_scaling(const GgufFile& f, const std::string& a);
/// Throws wgllm::Error "<source>: <what> ..." unless cond. For consistency checks between keys.
void check_hp(bool cond, const std::string& source, const std::string& what);

/// Dispatches on `general.architecture` through the registry (models/registry.h) and validates. Throws wgllm::Error naming the key for a
/// missing/invalid value and for architectures the engine does not implement.
ModelConfig config_from_gguf(const GgufFile& f);
/// Dispatches on config.json `model_type` through the registry and validates.
ModelConfig config_from_hf(const nlohmann::json& cfg, const std::string& path);
/// Checks every field's range (hp::*) and the consistency between them: n_heads a multiple of
/// n_kv_heads, head_dim a multiple of 4, rope_dims even in [2, head_dim], rms_eps and rope_base
/// finite and in range. Throws wgllm::Error naming the field and its value. The parsers check each
/// key as they read it (naming the key); this is the backstop for every architecture.
void validate(const ModelConfig& c, const std::string& source);

}  // namespace wgllm
