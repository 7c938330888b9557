// Helpers for the tokenizer tests: file reading; SHA-256 comes from core/sha256.h.
#pragma once
#include "core/sha256.h"
#include <array>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace wgllm::test {

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return {};
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

using wgllm::sha256_hex;

/// sha256 of the ids as int32 little-endian (the host is little-endian on all our targets).
inline std::string sha256_ids(const std::vector<int32_t>& ids) {
  return sha256_hex(ids.data(), ids.size() * sizeof(int32_t));
}

}  // namespace wgllm::test
