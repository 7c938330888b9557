// Test-only: a GGUF file as an editable document (metadata, tensor table, data section), parsed
// with GgufFile and written back byte for byte in the GGUF layout (gguf.md). Tests use it to make
// malformed variants of real fixtures: rewrite one metadata value, relabel a tensor's type, move a
// tensor's offset, or build a tiny model from scratch.
#pragma once
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "formats/gguf.h"

namespace wgllm::test {

struct GgufDoc {
  struct Tensor {
    std::string name;
    DType type = DType::F32;
    std::vector<uint64_t> shape;  // ggml order (innermost first)
    uint64_t offset = 0;          // within the data section
  };
  uint32_t version = 3;
  std::vector<std::pair<std::string, GgufValue>> kv;
  std::vector<Tensor> tensors;
  std::vector<uint8_t> data;  // the data section (starts aligned after the tensor table)

  /// Parses a whole GGUF file (it must be valid).
  static GgufDoc parse(const std::vector<uint8_t>& file) {
    auto f = GgufFile::from_memory(file.data(), file.size(), "doc");
    GgufDoc d;
    d.version = f->version();
    for (const auto& [k, v] : f->metadata()) d.kv.emplace_back(k, v);
    size_t start = file.size();
    for (const GgufTensor& t : f->tensors()) {
      d.tensors.push_back({t.name, t.type, t.shape, t.offset});
      start = size_t(t.data - file.data()) - t.offset;
    }
    d.data.assign(file.begin() + std::ptrdiff_t(start), file.end());
    return d;
  }

  uint64_t alignment() const {
    for (const auto& [k, v] : kv)
      if (k == "general.alignment") return std::get<uint64_t>(v.v);
    return 32;
  }
  GgufValue* find(const std::string& key) {
    for (auto& [k, v] : kv)
      if (k == key) return &v;
    return nullptr;
  }
  /// Replaces (or adds) a metadata value.
  GgufDoc& set(const std::string& key, GgufValue v) {
    if (GgufValue* old = find(key)) *old = std::move(v);
    else kv.emplace_back(key, std::move(v));
    return *this;
  }
  GgufDoc& set_u32(const std::string& key, uint32_t x) { return set(key, {GgufType::UINT32, GgufType::UINT8, uint64_t(x)}); }
  GgufDoc& set_u64(const std::string& key, uint64_t x) { return set(key, {GgufType::UINT64, GgufType::UINT8, x}); }
  GgufDoc& set_i32(const std::string& key, int32_t x) { return set(key, {GgufType::INT32, GgufType::UINT8, int64_t(x)}); }
  GgufDoc& set_f32(const std::string& key, float x) { return set(key, {GgufType::FLOAT32, GgufType::UINT8, double(x)}); }
  GgufDoc& set_str(const std::string& key, const std::string& s) { return set(key, {GgufType::STRING, GgufType::UINT8, s}); }
  GgufDoc& erase(const std::string& key) {
    for (size_t i = 0; i < kv.size(); ++i)
      if (kv[i].first == key) kv.erase(kv.begin() + std::ptrdiff_t(i));
    return *this;
  }
  Tensor& tensor(const std::string& name) {
    for (Tensor& t : tensors)
      if (t.name == name) return t;
    throw std::runtime_error("GgufDoc: no tensor " + name);
  }
  /// Appends a tensor's bytes to the data section at the next aligned offset (packed layout).
  GgufDoc& add_tensor(const std::string& name, DType type, std::vector<uint64_t> shape, const std::vector<uint8_t>& bytes) {
    const uint64_t a = alignment();
    data.resize((data.size() + a - 1) / a * a);
    tensors.push_back({name, type, std::move(shape), data.size()});
    data.insert(data.end(), bytes.begin(), bytes.end());
    return *this;
  }

  /// The file: header, metadata, tensor table, padding to the alignment, data section (padded).
  std::vector<uint8_t> bytes() const {
    std::vector<uint8_t> b;
    auto put = [&](const void* p, size_t n) { b.insert(b.end(), (const uint8_t*)p, (const uint8_t*)p + n); };
    auto u32 = [&](uint32_t x) { put(&x, 4); };
    auto u64 = [&](uint64_t x) { put(&x, 8); };
    auto str = [&](const std::string& s) { u64(s.size()); put(s.data(), s.size()); };
    put("GGUF", 4);
    u32(version);
    u64(tensors.size());
    u64(kv.size());
    for (const auto& [k, v] : kv) {
      str(k);
      u32(uint32_t(v.type));
      if (v.type != GgufType::ARRAY) {
        scalar(b, v.type, v);
        continue;
      }
      u32(uint32_t(v.elem_type));
      if (auto* s = std::get_if<std::vector<std::string>>(&v.v)) {
        u64(s->size());
        for (const auto& e : *s) str(e);
      } else if (auto* d = std::get_if<std::vector<double>>(&v.v)) {
        u64(d->size());
        for (double e : *d) scalar(b, v.elem_type, GgufValue{v.elem_type, GgufType::UINT8, e});
      } else {
        const auto& iv = std::get<std::vector<int64_t>>(v.v);
        u64(iv.size());
        for (int64_t e : iv) scalar(b, v.elem_type, GgufValue{v.elem_type, GgufType::UINT8, e});
      }
    }
    for (const Tensor& t : tensors) {
      str(t.name);
      u32(uint32_t(t.shape.size()));
      for (uint64_t d : t.shape) u64(d);
      u32(uint32_t(t.type));
      u64(t.offset);
    }
    const uint64_t a = alignment();
    b.resize((b.size() + a - 1) / a * a, 0);
    put(data.data(), data.size());
    if (!tensors.empty()) b.resize((b.size() + a - 1) / a * a, 0);
    return b;
  }

 private:
  static void scalar(std::vector<uint8_t>& b, GgufType t, const GgufValue& v) {
    auto put = [&](const void* p, size_t n) { b.insert(b.end(), (const uint8_t*)p, (const uint8_t*)p + n); };
    auto as_u = [&]() -> uint64_t {
      if (auto* u = std::get_if<uint64_t>(&v.v)) return *u;
      if (auto* s = std::get_if<int64_t>(&v.v)) return uint64_t(*s);
      if (auto* x = std::get_if<bool>(&v.v)) return *x;
      return uint64_t(std::get<double>(v.v));
    };
    auto as_d = [&]() -> double {
      if (auto* d = std::get_if<double>(&v.v)) return *d;
      return double(int64_t(as_u()));
    };
    switch (t) {
      case GgufType::UINT8: case GgufType::INT8: case GgufType::BOOL: { uint8_t x = uint8_t(as_u()); put(&x, 1); break; }
      case GgufType::UINT16: case GgufType::INT16: { uint16_t x = uint16_t(as_u()); put(&x, 2); break; }
      case GgufType::UINT32: case GgufType::INT32: { uint32_t x = uint32_t(as_u()); put(&x, 4); break; }
      case GgufType::UINT64: case GgufType::INT64: { uint64_t x = as_u(); put(&x, 8); break; }
      case GgufType::FLOAT32: { float x = float(as_d()); put(&x, 4); break; }
      case GgufType::FLOAT64: { double x = as_d(); put(&x, 8); break; }
      case GgufType::STRING: {
        const std::string& s = std::get<std::string>(v.v);
        uint64_t n = s.size();
        put(&n, 8);
        put(s.data(), s.size());
        break;
      }
      case GgufType::ARRAY: break;
    }
  }
};

/// A tiny llama model (2 layers, d_model 32, 4 query / 2 KV heads of 8, vocabulary 64, F32):
/// weights N(base, sd) drawn from mt19937(seed) in tensor order (norm weights base 1, matrices 0).
inline GgufDoc tiny_llama_doc(const std::string& name, uint32_t context, uint32_t ffn, uint32_t seed, float sd) {
  GgufDoc d;
  d.set_str("general.architecture", "llama").set_str("general.name", name);
  d.set_u32("llama.block_count", 2).set_u32("llama.embedding_length", 32).set_u32("llama.feed_forward_length", ffn);
  d.set_u32("llama.attention.head_count", 4).set_u32("llama.attention.head_count_kv", 2);
  d.set_u32("llama.context_length", context).set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  d.set_f32("llama.rope.freq_base", 10000.0f).set_u32("llama.rope.dimension_count", 8);
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, sd);
  auto t = [&](const std::string& tname, std::vector<uint64_t> shape, float base) {
    uint64_t n = 1;
    for (uint64_t s : shape) n *= s;
    std::vector<float> v(n);
    for (float& x : v) x = base + nd(rng);
    std::vector<uint8_t> b(n * 4);
    std::memcpy(b.data(), v.data(), b.size());
    d.add_tensor(tname, DType::F32, std::move(shape), b);
  };
  t("token_embd.weight", {32, 64}, 0.0f);
  t("output_norm.weight", {32}, 1.0f);
  const std::pair<const char*, std::vector<uint64_t>> shapes[] = {
      {"attn_norm", {32}}, {"attn_q", {32, 32}},  {"attn_k", {32, 16}}, {"attn_v", {32, 16}},   {"attn_output", {32, 32}},
      {"ffn_norm", {32}},  {"ffn_gate", {32, ffn}}, {"ffn_up", {32, ffn}}, {"ffn_down", {ffn, 32}}};
  for (int l = 0; l < 2; ++l)
    for (const auto& [n, s] : shapes) t("blk." + std::to_string(l) + "." + n + ".weight", s, s.size() == 1 ? 1.0f : 0.0f);
  return d;
}

}  // namespace wgllm::test
