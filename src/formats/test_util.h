// Test-only helpers for src/formats tests: a byte-level GGUF writer, SHA-256, temp dirs, file IO.
#pragma once
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
inline std::string sha256_hex(const void* data, size_t len) {
  static const uint32_t K[64] = {
      0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
      0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
      0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
      0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
      0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
      0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
      0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
      0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};
  uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  auto rotr = [](uint32_t x, int n) { return (x >> n) | (x << (32 - n)); };
  auto block = [&](const uint8_t* p) {
    uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = uint32_t(p[4 * i]) << 24 | uint32_t(p[4 * i + 1]) << 16 | uint32_t(p[4 * i + 2]) << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; ++i) {
      uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; ++i) {
      uint32_t t1 = hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
      uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
      hh = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
  };
  const auto* p = static_cast<const uint8_t*>(data);
  size_t full = len / 64 * 64;
  for (size_t i = 0; i < full; i += 64) block(p + i);
  uint8_t tail[128] = {};
  size_t rem = len - full;
  std::memcpy(tail, p + full, rem);
  tail[rem] = 0x80;
  size_t tl = rem + 9 <= 64 ? 64 : 128;
  uint64_t bits = uint64_t(len) * 8;
  for (int i = 0; i < 8; ++i) tail[tl - 1 - i] = uint8_t(bits >> (8 * i));
  for (size_t i = 0; i < tl; i += 64) block(tail + i);
  std::string out;
  char buf[9];
  for (uint32_t x : h) {
    std::snprintf(buf, sizeof buf, "%08x", x);
    out += buf;
  }
  return out;
}

}  // namespace wgllm::test

namespace wgllm::test {
inline uint32_t f32_bits(float f) { uint32_t u; std::memcpy(&u, &f, 4); return u; }
}  // namespace wgllm::test
