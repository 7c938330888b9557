// GPU context: one WebGPU instance, adapter, device and queue (Vulkan backend only).
// The adapter is chosen explicitly; a missing Vulkan driver is a clear error, never a silent
// fallback to a software/null device. WebGPU validation errors and device loss are captured by
// callbacks and re-thrown as wgllm::Error at the next synchronisation point (check()).
#pragma once
#include <cstdint>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
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
  /// Longest a blocking GPU wait may take before the process exits with a clear error (a hung
  /// device cannot be interrupted). 0: 120 s on hardware adapters, 1800 s on software ones. The
  /// environment variable WGLLM_GPU_TIMEOUT_S (seconds, > 0) overrides both.
  double wait_timeout_s = 0;
  /// naga's bounds checks on every array access (index clamped into range, ReadZeroSkipWrite where
  /// naga has no clamp) in every kernel. Default off (H200, 2026-12-01, with the loop bounding below:
  /// decode +20%, TTFT -19%, decode attention 72 -> 30 us; bench/results/2026-12-01-h200-shader-checks).
  /// Off: native builds compile kernels with wgpuDeviceCreateShaderModuleTrusted without this check;
  /// the results are identical while every access is in bounds (the kernel tests check their
  /// shapes), an out-of-bounds access is then undefined instead of clamped. Browsers always keep
  /// bounds checks (WebGPU's robustness guarantee), so this is ignored there. Switch --shader-checks.
  bool shader_runtime_checks = false;
  /// naga's loop bounding: a counter in every loop that ends it after 2^64 iterations (so that no
  /// loop is infinite for the driver's compiler). Default off. Not bit-exact: the driver compiles the
  /// loops differently and may round some sums differently (H100: the fused DeltaNet decode's row
  /// split; docs/FLAGS.md). Ignored in the browser (the browser's compiler decides). Switch
  /// --shader-loop-bounding.
  bool shader_loop_bounding = false;
  /// Ask for wgpu's experimental cooperative matrices (WGPUNativeFeature_CooperativeMatrix: WGSL
  /// `wgpu_cooperative_matrix`, NVIDIA's tensor cores) where the adapter lists them. When the
  /// device cannot be created with them (wgpu-native may refuse experimental features), it is
  /// created without them and Context::coop_matrix_refusal() says why. Set by the matmul_coop
  /// switch (kernels/matmul_coop.h); off, the device is the one the other switches always had.
  bool want_coop_matrix = false;
};

class Context;

/// Names the Context on whose behalf this thread calls WebGPU while it lives (nested: the innermost
/// wins). wgpu-native raises a validation error synchronously inside the call that caused it, so the
/// error callback gives the error to ContextCall::current() when that Context is on the erring
/// device, and to every Context on the device otherwise. The gpu layer opens one in each entry point
/// that calls WebGPU (Buffer, Pipeline, Recorder, Context's waits).
class ContextCall {
 public:
  explicit ContextCall(Context& c) : prev_(current_) { current_ = &c; }
  ~ContextCall() { current_ = prev_; }
  ContextCall(const ContextCall&) = delete;
  ContextCall& operator=(const ContextCall&) = delete;
  static Context* current() { return current_; }

 private:
  Context* prev_;
  inline static thread_local Context* current_ = nullptr;
};

/// Exit status of a process whose GPU wait timed out (see ContextOptions::wait_timeout_s).
inline constexpr int kGpuTimeoutExitCode = 75;

/// The WebGPU objects of one device and what was enabled on it.
struct DeviceHandles {
  WGPUInstance instance = nullptr;
  WGPUAdapter adapter = nullptr;
  WGPUDevice device = nullptr;
  WGPUQueue queue = nullptr;
  AdapterInfo info;
  std::vector<WGPUFeatureName> enabled;
  bool ts_inside_passes = false;
  std::string coop_refusal;  // requestDevice's answer when cooperative matrices were asked for and refused
};

struct SharedDevice;  // native: the process's device for these options (context.cpp)

/// One user's handle on the device: its own errors, loss flag, timeout and shader-check setting.
/// Natively, every Context created with the same adapter index, timestamp wish and cooperative-matrix wish shares one
/// WebGPU device, kept for the life of the process (see SharedDevice in context.cpp). A validation
/// error goes to the Context whose call raised it (ContextCall); a device loss, or an error raised
/// outside any ContextCall, to every Context on the device. Its error state may be read and written
/// from several threads (a poll on one thread delivers the device's callbacks). Not copyable.
class Context {
 public:
  /// Lists every Vulkan adapter visible to the loader (throws wgllm::Error if none).
  static std::vector<AdapterInfo> list_adapters();
  /// A Context on the chosen adapter's device: the process's device for these options, created on
  /// first use or after a loss. Throws wgllm::Error with advice when no Vulkan adapter exists (e.g.
  /// set VK_DRIVER_FILES to a software driver on CPU-only machines).
  static std::unique_ptr<Context> create(const ContextOptions& opts = {});
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  WGPUInstance instance() const { return d_.instance; }
  WGPUDevice device() const { return d_.device; }
  WGPUQueue queue() const { return d_.queue; }
  const AdapterInfo& info() const { return d_.info; }
  bool has_feature(WGPUFeatureName f) const;
  /// True when WGSL may use subgroup builtins (the standard feature or wgpu-native's own).
  bool has_subgroups() const;
  /// Smallest and largest subgroup size seen by a probe kernel (one 256-invocation workgroup;
  /// measured once, then cached); {0, 0} without subgroup support. Native builds only. The
  /// adapter info's own subgroup sizes are not filled in by wgpu-native 0.32.
  std::pair<uint32_t, uint32_t> measured_subgroup_sizes();
  /// Whether kernels may use 16 x 16 x 16 cooperative matrices of f16 operands with f32 sums
  /// (WGSL `coop_mat16x16<f16, A|B>`, `coop_mat16x16<f32, C>`): the device was created with
  /// WGPUNativeFeature_CooperativeMatrix (ContextOptions::want_coop_matrix), has shader-f16 and
  /// subgroups, and a probe kernel (one fragment product of small integers, exact in f16 and f32,
  /// loaded with coopLoad and coopLoadT) compiles and returns the CPU's product. Checked once per
  /// device, then cached. Native builds only (false in the browser).
  bool coop_matrix_f16();
  /// requestDevice's message when cooperative matrices were asked for and the device was created
  /// without them; empty otherwise.
  const std::string& coop_matrix_refusal() const { return d_.coop_refusal; }
  /// Why coop_matrix_f16() is false, in a few words ("the adapter does not list them", "wgpu-native
  /// refused them: ...", "granted, but ..."); empty when it is true.
  std::string coop_matrix_status();
  bool timestamps_inside_passes() const { return d_.ts_inside_passes; }
  /// ContextOptions::shader_runtime_checks as created (always true in the browser).
  bool shader_runtime_checks() const { return shader_checks_; }
  /// ContextOptions::shader_loop_bounding as created.
  bool shader_loop_bounding() const { return loop_bounding_; }

  /// Blocks until all submitted work is done, then throws the first captured validation error or
  /// device-loss message (if any).
  void wait_idle();
  /// One blocking wgpuDevicePoll under the wait watchdog (exits the process with
  /// kGpuTimeoutExitCode and a message on stderr past wait_timeout_s()). Native builds only.
  void poll_wait();
  /// As poll_wait(), returning once the submission `index` (gpu::Recorder's submissions,
  /// wgpuQueueSubmitForIndex) has completed, without waiting for later ones (native builds; the
  /// browser shim has no submission indices and waits for its pending maps).
  void poll_wait_for(uint64_t index);
  /// The timeout in force for blocking waits, in seconds.
  double wait_timeout_s() const;
  /// Throws if a validation error or device loss was recorded; cheap.
  void check();

  /// Destroys the device as a driver reset would (tests of device-loss handling): afterwards
  /// every synchronisation point of every Context on it throws wgllm::Error "WebGPU device lost:
  /// ...", and the next create() makes a new device. Native only.
  void lose_device_for_testing();
  bool lost() const { return lost_; }

  // Called from WebGPU callbacks.
  void on_error(const std::string& msg);
  void on_lost(const std::string& msg);

 private:
  Context() = default;
  /// check()'s end on both builds: throws the recorded error (kept after a loss, else cleared).
  void throw_recorded_error();
  DeviceHandles d_;  // natively a copy of the SharedDevice's (which owns them)
  bool shader_checks_ = false;
  bool loop_bounding_ = false;
  std::mutex error_mu_;  // guards error_ (callbacks may run on another thread's poll)
  std::string error_;
  std::atomic<bool> lost_ = false;
  double wait_timeout_s_ = 0;
  std::shared_ptr<SharedDevice> shared_;  // native: owns the handles above; web: unused
};

}  // namespace wgllm::gpu
