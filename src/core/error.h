// wgllm::Error: the single exception type the engine throws for bad input and runtime failures.
// Messages name what failed (file, field, offset, tensor) so a user can act on them.
#pragma once
#include <stdexcept>
#include <string>

namespace wgllm {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace wgllm
