// Copy-bandwidth probe: what this device reaches on plain memory traffic, the yardstick for the
// per-kernel achieved GB/s of `wgllm bench --traffic`. Three probes over one buffer of `bytes`:
//   copy_engine  wgpuCommandEncoderCopyBufferToBuffer src -> dst   (bytes read + bytes written)
//   copy_kernel  WGSL copy_vec4 (array<vec4f>, grid-stride)         (bytes read + bytes written)
//   read_kernel  WGSL read_vec4 (vec4f loads summed per thread)     (bytes read + 4 B per thread)
// Each probe runs `repeats` times in one submission after a warm-up submission. GB/s = 1e9 bytes
// per second. Timing: GPU timestamps through gpu::Recorder when the device has them (inside
// passes for the kernels, inside encoders for the copy); otherwise wall clock of one submission
// (submit + wait, so launch overhead is included: a lower bound on bandwidth).
// Correctness is checked, not assumed: the copies are read back at three places and compared with
// the source, and the read kernel's sums are compared with the CPU's. Throws wgllm::Error on a
// mismatch, a non-finite or non-positive figure, or a WebGPU error.
// Reference figures (H200, Dawn, 1 GiB buffers): copy 3.97 TB/s with vec4f, read 4.16 TB/s
// (shared/TOOLCHAIN.md).
#pragma once
#include <cstdint>
#include <string>

namespace wgllm::gpu { class Context; }

namespace wgllm::kernels {

struct BandwidthOptions {
  uint64_t bytes = 256ull << 20;  // buffer size; capped by the device's maxStorageBufferBindingSize
  uint32_t repeats = 5;           // timed runs per probe (>= 1)
};

struct BandwidthFigure {
  double best_GBps = 0;    // fastest run
  double median_GBps = 0;  // median run
};

struct BandwidthReport {
  uint64_t bytes = 0;     // buffer size actually used
  uint32_t repeats = 0;
  bool copy_timestamps = false, kernel_timestamps = false;  // false: wall clock
  BandwidthFigure copy_engine, copy_kernel, read_kernel;
  /// The measured copy bandwidth: the better best figure of the two copies (GB/s).
  double copy_GBps() const;
};

BandwidthReport measure_bandwidth(gpu::Context& ctx, const BandwidthOptions& opt = {});

}  // namespace wgllm::kernels
