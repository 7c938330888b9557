#include "models/config.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/gguf.h"
#include "models/registry.h"

namespace wgllm {

ModelConfig config_from_gguf(const GgufFile& f) {
  const std::string arch = f.get_str("general.architecture");
  const ArchEntry* e = find_arch_gguf(arch);
  if (!e)
    throw Error(f.path() + ": unsupported architecture '" + arch + "' (general.architecture); supported: " +
                supported_architectures());
  ModelConfig c = e->from_gguf(f);
  c.arch = e->name;
  validate(c, f.path());
  return c;
}

ModelConfig config_from_hf(const nlohmann::json& j, const std::string& path) {
  if (!j.is_object()) throw Error(path + ": config.json is not a JSON object");
  const std::string type = j.contains("model_type") && j["model_type"].is_string() ? j["model_type"].get<std::string>() : "";
  const ArchEntry* e = find_arch_hf(type);
  if (!e)
    throw Error(path + ": unsupported model_type '" + type + "' in config.json; supported: " + supported_architectures());
  ModelConfig c = e->from_hf(j, path);
  c.arch = e->name;
  validate(c, path);
  return c;
}

ModelConfig llama_config_from_gguf(const GgufFile& f) {
  ModelConfig c;
  c.arch = f.get_str("general.architecture");
  const std::string a = c.arch + ".";
  c.name = f.get_str_or("general.name", c.arch);
  c.n_layers = uint32_t(f.get_u64(a + "block_count"));
  c.d_model = uint32_t(f.get_u64(a + "embedding_length"));
  c.ffn_dim = uint32_t(f.get_u64(a + "feed_forward_length"));
  c.n_heads = uint32_t(f.get_u64(a + "attention.head_count"));
  c.n_kv_heads = uint32_t(f.get_u64_or(a + "attention.head_count_kv", c.n_heads));
  if (c.n_heads == 0) throw Error(f.path() + ": " + a + "attention.head_count is 0");
  c.head_dim = uint32_t(f.get_u64_or(a + "attention.key_length", c.d_model / c.n_heads));
  c.max_context = uint32_t(f.get_u64_or(a + "context_length", 2048));
  c.rms_eps = float(f.get_f64_or(a + "attention.layer_norm_rms_epsilon", 1e-5));
  c.rope_base = f.get_f64_or(a + "rope.freq_base", 10000.0);
  c.rope_dims = uint32_t(f.get_u64_or(a + "rope.dimension_count", c.head_dim));
  c.rope_neox = false;  // llama.cpp's converter permutes Q/K rows for the (2i, 2i+1) layout
  if (f.has(a + "rope.scaling.type") && f.get_str(a + "rope.scaling.type") != "none")
    throw Error(f.path() + ": unsupported " + a + "rope.scaling.type '" + f.get_str(a + "rope.scaling.type") + "'");
  const GgufTensor& emb = f.tensor("token_embd.weight");
  if (emb.shape.size() != 2) throw Error(f.path() + ": token_embd.weight must be 2-D");
  c.vocab = uint32_t(emb.shape[1]);
  c.tied_embeddings = f.find("output.weight") == nullptr;
  return c;
}

template <class T>
T need(const nlohmann::json& j, const char* key, const std::string& path) {
  if (!j.contains(key) || j[key].is_null()) throw Error(path + ": config.json has no '" + key + "'");
  try {
    return j[key].get<T>();
  } catch (const std::exception& e) {
    throw Error(path + ": config.json field '" + key + "' has the wrong type: " + e.what());
  }
}
template uint32_t need<uint32_t>(const nlohmann::json&, const char*, const std::string&);
template float need<float>(const nlohmann::json&, const char*, const std::string&);
template double need<double>(const nlohmann::json&, const char*, const std::string&);
template bool need<bool>(const nlohmann::json&, const char*, const std::string&);
template std::string need<std::string>(const nlohmann::json&, const char*, const std::string&);

ModelConfig llama_config_from_hf(const nlohmann::json& j, const std::string& path) {
  ModelConfig c;
  c.arch = opt<std::string>(j, "model_type", "", path);
  c.name = opt<std::string>(j, "_name_or_path", c.arch, path);
  c.n_layers = need<uint32_t>(j, "num_hidden_layers", path);
  c.d_model = need<uint32_t>(j, "hidden_size", path);
  c.ffn_dim = need<uint32_t>(j, "intermediate_size", path);
  c.n_heads = need<uint32_t>(j, "num_attention_heads", path);
  c.n_kv_heads = opt<uint32_t>(j, "num_key_value_heads", c.n_heads, path);
  if (c.n_heads == 0) throw Error(path + ": num_attention_heads is 0");
  c.head_dim = opt<uint32_t>(j, "head_dim", c.d_model / c.n_heads, path);
  c.vocab = need<uint32_t>(j, "vocab_size", path);
  c.max_context = opt<uint32_t>(j, "max_position_embeddings", 2048, path);
  c.rms_eps = opt<float>(j, "rms_norm_eps", 1e-6f, path);
  c.rope_base = opt<double>(j, "rope_theta", 10000.0, path);
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
    throw Error(path + ": rope_scaling is not supported yet");
  c.rope_dims = c.head_dim;
  c.rope_neox = true;  // HF rotate_half layout
  c.tied_embeddings = opt<bool>(j, "tie_word_embeddings", false, path);
  return c;
}

void validate(const ModelConfig& c, const std::string& src) {
  auto bad = [&](const std::string& m) { throw Error(src + ": invalid model config: " + m); };
  if (!c.n_layers || !c.d_model || !c.n_heads || !c.n_kv_heads || !c.head_dim || !c.ffn_dim || !c.vocab)
    bad("a size is zero");
  if (c.n_heads % c.n_kv_heads) bad("query heads not a multiple of KV heads");
  if (c.head_dim % 4 || c.head_dim > 256) bad("head_dim must be a multiple of 4 and at most 256");
  if (c.rope_dims > c.head_dim || c.rope_dims % 2) bad("rope dims must be even and <= head_dim");
  if (c.n_layers > 1024 || c.d_model > 65536 || c.ffn_dim > 262144 || c.vocab > (1u << 24)) bad("sizes out of range");
}

}  // namespace wgllm
