// The only place that includes the standard webgpu.h (and wgpu-native's wgpu.h extension header).
// Native builds link wgpu-native (PyPI `wgpu` 0.32.0 ships the library and its official headers).
#pragma once
#include <webgpu.h>
#include <wgpu.h>

#include <string>
#include <string_view>

#ifdef __EMSCRIPTEN__
/// Browser build only (src/gpu/web/webgpu_shim.cpp): as wgpuQueueWriteBuffer, but `data` is not
/// copied: it is read when the shim's command list is next replayed (at the next
/// wgpuQueueSubmit), so it must stay valid and unchanged until then. Lets the recorder's
/// parameter block (256 bytes a dispatch) travel in the submission's command list uncopied.
extern "C" void wgllmQueueWriteBufferDeferred(WGPUQueue queue, WGPUBuffer buffer, uint64_t offset, const void* data,
                                              size_t size);
#endif

namespace wgllm::gpu {
inline WGPUStringView sv(std::string_view s) { return WGPUStringView{s.data(), s.size()}; }
inline std::string str(WGPUStringView s) {
  if (!s.data) return {};
  return s.length == WGPU_STRLEN ? std::string(s.data) : std::string(s.data, s.length);
}
}  // namespace wgllm::gpu
