#include "models/config.h"

#include <cmath>
#include <cstdio>
#include <limits>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/gguf.h"
#include "models/registry.h"

namespace wgllm {
namespace {

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

std::string range_str(UintRange r) {
  std::string s = "[";  // appended piecewise: GCC 12 warns (-Wrestrict) on "[" + to_string(...)
  s += std::to_string(r.lo);
  s += ", ";
  s += std::to_string(r.hi);
  return s + "]";
}
std::string range_str(RealRange r) {
  return std::string(r.lo_open ? "(" : "[") + num(r.lo) + ", " + num(r.hi) + "]";
}
bool in(double v, RealRange r) { return std::isfinite(v) && (r.lo_open ? v > r.lo : v >= r.lo) && v <= r.hi; }

/// A GGUF metadata value as text for errors.
std::string gguf_value_str(const GgufValue& v) {
  if (auto* u = std::get_if<uint64_t>(&v.v)) return std::to_string(*u);
  if (auto* s = std::get_if<int64_t>(&v.v)) return std::to_string(*s);
  if (auto* d = std::get_if<double>(&v.v)) return num(*d);
  if (auto* b = std::get_if<bool>(&v.v)) return *b ? "true" : "false";
  if (auto* s = std::get_if<std::string>(&v.v)) return "'" + *s + "'";
  return "(an array)";
}

[[noreturn]] void gguf_bad(const GgufFile& f, const std::string& key, const std::string& val, const std::string& want) {
  throw Error(f.path() + ": metadata '" + key + "' = " + val + ": must be " + want);
}

std::string field(const char* key, const std::string& where) {
  return where.empty() ? std::string(key) : where + "." + key;
}

[[noreturn]] void hf_bad(const std::string& path, const std::string& name, const std::string& val, const std::string& want) {
  throw Error(path + ": config.json field '" + name + "' = " + val + ": must be " + want);
}

}  // namespace

// ---- range-checked readers

uint32_t gguf_uint(const GgufFile& f, const std::string& key, UintRange r) {
  if (!f.has(key)) throw Error(f.path() + ": metadata key '" + key + "' not found");
  const GgufValue& v = f.metadata().at(key);
  const std::string want = "an integer in " + range_str(r);
  uint64_t x = 0;
  if (auto* u = std::get_if<uint64_t>(&v.v); u && v.type != GgufType::ARRAY) {
    x = *u;
  } else if (auto* s = std::get_if<int64_t>(&v.v); s && v.type != GgufType::ARRAY) {
    if (*s < 0) gguf_bad(f, key, std::to_string(*s), want);
    x = uint64_t(*s);
  } else {
    gguf_bad(f, key, gguf_value_str(v), want);  // a float, bool, string or array
  }
  if (x < r.lo || x > r.hi) gguf_bad(f, key, std::to_string(x), want);
  return uint32_t(x);
}

uint32_t gguf_uint_or(const GgufFile& f, const std::string& key, uint32_t def, UintRange r) {
  return f.has(key) ? gguf_uint(f, key, r) : def;
}

double gguf_real_or(const GgufFile& f, const std::string& key, double def, RealRange r) {
  const double v = f.get_f64_or(key, def);  // throws naming the key for a non-number
  if (!in(v, r)) gguf_bad(f, key, num(v), "a finite number in " + range_str(r));
  return v;
}

uint32_t hf_uint(const nlohmann::json& j, const char* key, const std::string& path, UintRange r, const std::string& where) {
  const uint32_t v = need<uint32_t>(j, key, path);
  if (v < r.lo || v > r.hi) hf_bad(path, field(key, where), std::to_string(v), "an integer in " + range_str(r));
  return v;
}

uint32_t hf_uint_or(const nlohmann::json& j, const char* key, uint32_t def, const std::string& path, UintRange r,
                    const std::string& where) {
  if (!j.contains(key) || j[key].is_null()) return def;
  return hf_uint(j, key, path, r, where);
}

double hf_real_or(const nlohmann::json& j, const char* key, double def, const std::string& path, RealRange r,
                  const std::string& where) {
  const double v = opt<double>(j, key, def, path);
  if (!in(v, r)) hf_bad(path, field(key, where), num(v), "a finite number in " + range_str(r));
  return v;
}

void gguf_check_rope_scaling(const GgufFile& f, const std::string& a) {
  const std::string type = a + "rope.scaling.type";
  if (f.has(type) && f.get_str(type) != "none")
    throw Error(f.path() + ": unsupported " + type + " '" + f.get_str(type) + "'");
  for (const std::string& key : {a + "rope.scaling.factor", a + "rope.scale_linear"}) {
    if (!f.has(key)) continue;
    const double v = f.get_f64(key);
    if (!std::isfinite(v) || v < 0) gguf_bad(f, key, num(v), "a finite number >= 0");
    if (v != 0.0 && v != 1.0)
      gguf_bad(f, key, num(v), "0 or 1: RoPE scaling is not supported (a factor without a scaling type means linear)");
  }
}

void check_hp(bool cond, const std::string& source, const std::string& what) {
  if (!cond) throw Error(source + ": " + what);
}

// ---- dispatch

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

// ---- shared readers

void gguf_transformer_shape(const GgufFile& f, const std::string& a, ModelConfig& c) {
  c.n_layers = gguf_uint(f, a + "block_count", hp::layers);
  c.d_model = gguf_uint(f, a + "embedding_length", hp::d_model);
  c.ffn_dim = gguf_uint(f, a + "feed_forward_length", hp::ffn);
  c.n_heads = gguf_uint(f, a + "attention.head_count", hp::heads);
  c.n_kv_heads = gguf_uint_or(f, a + "attention.head_count_kv", c.n_heads, {1, c.n_heads});
  gguf_attention_shape(f, a, c);
}

void gguf_attention_shape(const GgufFile& f, const std::string& a, ModelConfig& c) {
  const std::string& src = f.path();
  check_hp(c.n_heads % c.n_kv_heads == 0, src,
           a + "attention.head_count " + std::to_string(c.n_heads) + " is not a multiple of " + a +
               "attention.head_count_kv " + std::to_string(c.n_kv_heads));
  if (!f.has(a + "attention.key_length"))
    check_hp(c.d_model % c.n_heads == 0, src,
             a + "embedding_length " + std::to_string(c.d_model) + " is not a multiple of " + a +
                 "attention.head_count " + std::to_string(c.n_heads) + " (and " + a + "attention.key_length is absent)");
  c.head_dim = gguf_uint_or(f, a + "attention.key_length", c.d_model / c.n_heads, hp::head_dim);
  const uint32_t vlen = gguf_uint_or(f, a + "attention.value_length", c.head_dim, hp::head_dim);
  check_hp(vlen == c.head_dim, src,
           a + "attention.value_length " + std::to_string(vlen) + " != key_length " + std::to_string(c.head_dim) +
               " is not supported");
}

void gguf_vocab(const GgufFile& f, ModelConfig& c) {
  const GgufTensor& emb = f.tensor("token_embd.weight");
  if (emb.shape.size() != 2) throw Error(f.path() + ": token_embd.weight must be 2-D");
  check_hp(emb.shape[1] >= hp::vocab.lo && emb.shape[1] <= hp::vocab.hi, f.path(),
           "token_embd.weight has " + std::to_string(emb.shape[1]) + " rows (the vocabulary): must be in " +
               range_str(hp::vocab));
  c.vocab = uint32_t(emb.shape[1]);
  c.tied_embeddings = f.find("output.weight") == nullptr;
}

template <class T>
T need(const nlohmann::json& j, const char* key, const std::string& path) {
  if (!j.contains(key) || j[key].is_null()) throw Error(path + ": config.json has no '" + key + "'");
  const nlohmann::json& v = j[key];
  if constexpr (std::is_same_v<T, uint32_t>) {
    // nlohmann's get<uint32_t>() wraps -1 to 4294967295 and truncates 2.5 to 2: check first.
    const bool integral = v.is_number_integer() || (v.is_number_float() && std::isfinite(v.get<double>()) &&
                                                    std::floor(v.get<double>()) == v.get<double>());
    if (!integral) {
      if (v.is_number())
        hf_bad(path, key, v.dump(), "a non-negative integer");
      throw Error(path + ": config.json field '" + key + "' has the wrong type: expected a non-negative integer, got " + v.dump());
    }
    const double d = v.is_number_unsigned() ? double(v.get<uint64_t>()) : v.is_number_integer() ? double(v.get<int64_t>()) : v.get<double>();
    if (d < 0 || d > double(std::numeric_limits<uint32_t>::max()))
      hf_bad(path, key, v.dump(), "an integer in [0, 4294967295]");
    return v.is_number_float() ? uint32_t(d) : v.is_number_unsigned() ? uint32_t(v.get<uint64_t>()) : uint32_t(v.get<int64_t>());
  } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (!v.is_number())
      throw Error(path + ": config.json field '" + key + "' has the wrong type: expected a number, got " + v.dump());
    const double d = v.get<double>();
    if (!std::isfinite(d)) hf_bad(path, key, v.dump(), "a finite number");
    if constexpr (std::is_same_v<T, float>)
      if (!std::isfinite(float(d))) hf_bad(path, key, v.dump(), "a number within the float range");
    return T(d);
  } else {
    try {
      return v.get<T>();
    } catch (const std::exception& e) {
      throw Error(path + ": config.json field '" + key + "' has the wrong type: " + e.what());
    }
  }
}
template uint32_t need<uint32_t>(const nlohmann::json&, const char*, const std::string&);
template float need<float>(const nlohmann::json&, const char*, const std::string&);
template double need<double>(const nlohmann::json&, const char*, const std::string&);
template bool need<bool>(const nlohmann::json&, const char*, const std::string&);
template std::string need<std::string>(const nlohmann::json&, const char*, const std::string&);

void hf_attention_shape(const nlohmann::json& j, const std::string& path, ModelConfig& c) {
  c.n_heads = hf_uint(j, "num_attention_heads", path, hp::heads);
  c.n_kv_heads = hf_uint_or(j, "num_key_value_heads", c.n_heads, path, {1, c.n_heads});
  check_hp(c.n_heads % c.n_kv_heads == 0, path,
           "config.json num_attention_heads " + std::to_string(c.n_heads) + " is not a multiple of num_key_value_heads " +
               std::to_string(c.n_kv_heads));
  if (!j.contains("head_dim") || j["head_dim"].is_null())
    check_hp(c.d_model % c.n_heads == 0, path,
             "config.json hidden_size " + std::to_string(c.d_model) + " is not a multiple of num_attention_heads " +
                 std::to_string(c.n_heads) + " (and head_dim is absent)");
  c.head_dim = hf_uint_or(j, "head_dim", c.d_model / c.n_heads, path, hp::head_dim);
}

void validate(const ModelConfig& c, const std::string& src) {
  auto bad = [&](const std::string& m) { throw Error(src + ": invalid model config: " + m); };
  auto u = [&](const char* name, uint64_t v, UintRange r) {
    if (v < r.lo || v > r.hi) bad(std::string(name) + " = " + std::to_string(v) + ": must be in " + range_str(r));
  };
  u("n_layers", c.n_layers, hp::layers);
  u("d_model", c.d_model, hp::d_model);
  u("n_heads", c.n_heads, hp::heads);
  u("n_kv_heads", c.n_kv_heads, {1, c.n_heads ? c.n_heads : 1});
  u("head_dim", c.head_dim, hp::head_dim);
  u("ffn_dim", c.ffn_dim, hp::ffn);
  u("vocab", c.vocab, hp::vocab);
  u("max_context", c.max_context, hp::context);
  if (c.n_heads % c.n_kv_heads)
    bad("n_heads " + std::to_string(c.n_heads) + " is not a multiple of n_kv_heads " + std::to_string(c.n_kv_heads));
  if (c.head_dim % 4) bad("head_dim " + std::to_string(c.head_dim) + " is not a multiple of 4");
  if (c.rope_dims < 2 || c.rope_dims > c.head_dim || c.rope_dims % 2)
    bad("rope_dims " + std::to_string(c.rope_dims) + " must be even and in [2, head_dim " + std::to_string(c.head_dim) + "]");
  if (!in(c.rms_eps, hp::rms_eps)) bad("rms_eps " + num(c.rms_eps) + ": must be a finite number in " + range_str(hp::rms_eps));
  if (!in(c.rope_base, hp::rope_base))
    bad("rope_base " + num(c.rope_base) + ": must be a finite number in " + range_str(hp::rope_base));
}

}  // namespace wgllm
