// Test-only safetensors writer (no Python): 8-byte LE header length, JSON header, data buffer.
#pragma once
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace wgllm::test {

struct StTensor {
  std::string name, dtype;
  std::vector<uint64_t> shape;  // HF order (outermost first), as written in the file
  std::vector<uint8_t> data;
};

/// Raw file from a header string and data buffer.
inline std::vector<uint8_t> st_raw(const std::string& header, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> b;
  b.reserve(8 + header.size() + data.size());
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) b.push_back(uint8_t(n >> (8 * i)));
  for (char c : header) b.push_back(uint8_t(c));
  for (uint8_t c : data) b.push_back(c);
  return b;
}

/// A well-formed file: tensors packed in order, optional __metadata__.
inline std::vector<uint8_t> st_file(const std::vector<StTensor>& ts,
                                    const nlohmann::json& meta = nullptr) {
  nlohmann::json h = nlohmann::json::object();
  std::vector<uint8_t> data;
  for (const auto& t : ts) {
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape},
                 {"data_offsets", {data.size(), data.size() + t.data.size()}}};
    data.insert(data.end(), t.data.begin(), t.data.end());
  }
  if (!meta.is_null()) h["__metadata__"] = meta;
  std::string s = h.dump();
  while (s.size() % 8) s += ' ';  // the reference writer pads the header with spaces
  return st_raw(s, data);
}

template <class T>
std::vector<uint8_t> bytes_of(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

}  // namespace wgllm::test
