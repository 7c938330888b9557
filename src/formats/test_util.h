// Test-only helpers for src/formats tests: a byte-level GGUF writer, SHA-256, temp dirs, file IO.
#pragma once
#include "core/sha256.h"
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace wgllm::test {

inline std::string cache_dir() {
  const char* e = std::getenv("WGLLM_CACHE");
  return e && *e ? e : WGLLM_CACHE_DIR;
}
inline std::string model_path() { return cache_dir() + "/models/SmolLM2-135M-Instruct.Q4_1.gguf"; }
inline std::string fixture(const std::string& name) {
  return std::string(WGLLM_SOURCE_DIR) + "/tests/fixtures/formats/" + name;
}

inline std::vector<uint8_t> read_file(const std::string& path, size_t max = SIZE_MAX) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  in.seekg(0, std::ios::end);
  size_t n = std::min<size_t>(size_t(in.tellg()), max);
  in.seekg(0);
  std::vector<uint8_t> v(n);
  in.read(reinterpret_cast<char*>(v.data()), std::streamsize(n));
  return v;
}
inline void write_file(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
}
inline void write_file(const std::string& path, const std::string& s) {
  write_file(path, std::vector<uint8_t>(s.begin(), s.end()));
}

/// A fresh directory under /tmp, removed on destruction.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    char tmpl[] = "/tmp/wgllm_formats_XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

/// Little-endian byte writer with GGUF encodings (gguf.md): strings are u64 length + bytes.
struct GgufWriter {
  std::vector<uint8_t> b;
  template <class T>
  GgufWriter& put(T v) {
    uint8_t tmp[sizeof(T)];
    std::memcpy(tmp, &v, sizeof(T));
    b.insert(b.end(), tmp, tmp + sizeof(T));
    return *this;
  }
  GgufWriter& u32(uint32_t v) { return put(v); }
  GgufWriter& u64(uint64_t v) { return put(v); }
  GgufWriter& str(const std::string& s) {
    u64(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  GgufWriter& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    b.insert(b.end(), {'G', 'G', 'U', 'F'});
    return u32(version).u64(n_tensors).u64(n_kv);
  }
  // metadata entries: key, u32 type, value (type ids: gguf.md gguf_metadata_value_type)
  GgufWriter& kv_u32(const std::string& k, uint32_t v) { return str(k).u32(4).u32(v); }
  GgufWriter& kv_i32(const std::string& k, int32_t v) { return str(k).u32(5).put(v); }
  GgufWriter& kv_f32(const std::string& k, float v) { return str(k).u32(6).put(v); }
  GgufWriter& kv_bool(const std::string& k, bool v) { return str(k).u32(7).put(uint8_t(v)); }
  GgufWriter& kv_str(const std::string& k, const std::string& v) { return str(k).u32(8).str(v); }
  GgufWriter& kv_u64(const std::string& k, uint64_t v) { return str(k).u32(10).u64(v); }
  GgufWriter& kv_i64(const std::string& k, int64_t v) { return str(k).u32(11).put(v); }
  GgufWriter& kv_f64(const std::string& k, double v) { return str(k).u32(12).put(v); }
  GgufWriter& kv_u8(const std::string& k, uint8_t v) { return str(k).u32(0).put(v); }
  GgufWriter& kv_i16(const std::string& k, int16_t v) { return str(k).u32(3).put(v); }
  GgufWriter& kv_str_array(const std::string& k, const std::vector<std::string>& v) {
    str(k).u32(9).u32(8).u64(v.size());
    for (const auto& s : v) str(s);
    return *this;
  }
  GgufWriter& kv_i32_array(const std::string& k, const std::vector<int32_t>& v) {
    str(k).u32(9).u32(5).u64(v.size());
    for (int32_t x : v) put(x);
    return *this;
  }
  GgufWriter& kv_f32_array(const std::string& k, const std::vector<float>& v) {
    str(k).u32(9).u32(6).u64(v.size());
    for (float x : v) put(x);
    return *this;
  }
  GgufWriter& tensor(const std::string& name, const std::vector<uint64_t>& shape, uint32_t type,
                     uint64_t offset) {
    str(name).u32(uint32_t(shape.size()));
    for (uint64_t d : shape) u64(d);
    return u32(type).u64(offset);
  }
  GgufWriter& pad(size_t align, uint8_t fill = 0) {
    while (b.size() % align) b.push_back(fill);
    return *this;
  }
  GgufWriter& bytes(size_t n, uint8_t fill) {
    b.insert(b.end(), n, fill);
    return *this;
  }
};

/// SHA-256 (FIPS 180-4) of a byte buffer, lowercase hex.
using wgllm::sha256_hex;

}  // namespace wgllm::test

namespace wgllm::test {
inline uint32_t f32_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
}  // namespace wgllm::test
