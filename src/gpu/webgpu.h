// The only place that includes the standard webgpu.h (and wgpu-native's wgpu.h extension header).
// Native builds link wgpu-native (PyPI `wgpu` 0.32.0 ships the library and its official headers).
#pragma once
#include <webgpu.h>
#include <wgpu.h>

#include <string>
#include <string_view>

namespace wgllm::gpu {
inline WGPUStringView sv(std::string_view s) { return WGPUStringView{s.data(), s.size()}; }
inline std::string str(WGPUStringView s) {
  if (!s.data) return {};
  return s.length == WGPU_STRLEN ? std::string(s.data) : std::string(s.data, s.length);
}
}  // namespace wgllm::gpu
