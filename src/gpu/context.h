// GPU context: one WebGPU instance, adapter, device and queue (Vulkan backend only).
// The adapter is chosen explicitly; a missing Vulkan driver is a clear error, never a silent
// fallback to a software/null device. WebGPU validation errors and device loss are captured by
// callbacks and re-thrown as wgllm::Error at the next synchronisation point (check()).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpu/webgpu.h"

namespace wgllm::gpu {

struct AdapterInfo {
  std::string name;          // e.g. "NVIDIA H200", "SwiftShader Device (Subzero)"
  std::string vendor, architecture, driver;  // driver = adapter description
  std::string backend;       // "Vulkan", ...
  std::string adapter_type;  // "DiscreteGPU", "CPU", ...
  uint32_t vendor_id = 0, device_id = 0;
  uint32_t subgroup_min = 0, subgroup_max = 0;
  std::vector<std::string> features;
  WGPULimits limits = WGPU_LIMITS_INIT;
  bool is_software() const { return adapter_type == "CPU"; }
};

struct ContextOptions {
  int adapter_index = -1;   // -1: first hardware Vulkan adapter, else first software one
  bool want_timestamps = true;  // request timestamp-query features when the adapter has them
};

/// Owns the device. Move-only; not copyable.
class Context {
 public:
  /// Lists every Vulkan adapter visible to the loader (throws wgllm::Error if none).
  static std::vector<AdapterInfo> list_adapters();
  /// Creates a device on the chosen adapter. Throws wgllm::Error with advice when no Vulkan
  /// adapter exists (e.g. set VK_DRIVER_FILES to a software driver on CPU-only machines).
  static std::unique_ptr<Context> create(const ContextOptions& opts = {});
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  WGPUInstance instance() const { return instance_; }
  WGPUDevice device() const { return device_; }
  WGPUQueue queue() const { return queue_; }
  const AdapterInfo& info() const { return info_; }
  bool has_feature(WGPUFeatureName f) const;
  bool timestamps_inside_passes() const { return ts_inside_passes_; }

  /// Blocks until all submitted work is done, then throws the first captured validation error or
  /// device-loss message (if any).
  void wait_idle();
  /// Throws if a validation error or device loss was recorded; cheap.
  void check();

  // Called from WebGPU callbacks.
  void on_error(const std::string& msg);
  void on_lost(const std::string& msg);

 private:
  Context() = default;
  WGPUInstance instance_ = nullptr;
  WGPUAdapter adapter_ = nullptr;
  WGPUDevice device_ = nullptr;
  WGPUQueue queue_ = nullptr;
  AdapterInfo info_;
  std::vector<WGPUFeatureName> enabled_;
  bool ts_inside_passes_ = false;
  std::string error_;
  bool lost_ = false;
};

}  // namespace wgllm::gpu
