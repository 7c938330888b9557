// wgllm::Error: the single exception type the engine throws for bad input and runtime failures.
// Messages name what failed (file, field, offset, tensor) so a user can act on them.
#pragma once
#include <stdexcept>
#include <string>

namespace wgllm {

/// `s` with every NUL byte written as "\0": exception messages are read through what(), a C
/// string, which would end at the first NUL (of a key or name read from a file or a request).
inline std::string escape_nul(const std::string& s) {
  if (s.find('\0') == std::string::npos) return s;
  std::string out;
  for (char c : s) out += c ? std::string(1, c) : std::string("\\0");
  return out;
}

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(escape_nul(what)) {}
};

}  // namespace wgllm
