// Dispatch-cost probe: what one compute dispatch costs on this device, apart from the work it
// does. Decode of a small model is ~180 dispatches of a few microseconds of work each, so this
// fixed cost, not bandwidth, bounds its speed (bench/results/2026-12-01-h200-speed: 10-16 us per
// dispatch on the H200 whatever its bytes). The probe separates the candidates:
//   record    CPU time to record one dispatch into the pass (wgpu validation, bind groups, params)
//   total     wall time per dispatch of a whole submission: (T(N) - T(1)) / (N - 1), where T is
//             record + submit + wait of N dispatches (so launch and fixed costs cancel)
//   gpu       per-dispatch GPU time from timestamps inside the pass (when the device has them;
//             the timestamps themselves may add cost, so this is reported apart)
// for three patterns of the same tiny kernel (dispatch_probe.wgsl, 64 threads per workgroup):
//   chain        every dispatch reads and writes one buffer (each depends on the previous one:
//                the implementation must put a barrier between them, as in a model's forward)
//   independent  dispatch i writes buffer i mod 16 (no dependency between neighbours)
//   split        chain, submitted every `split_every` dispatches (CPU recording of later
//                dispatches overlaps GPU execution of earlier ones)
// The results are checked: each buffer must hold the value the CPU computes for the number of
// updates it received (exact in f32). Throws wgllm::Error on a mismatch or a WebGPU error.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace wgllm::gpu { class Context; }

namespace wgllm::kernels {

struct DispatchProbeOptions {
  std::vector<uint32_t> workgroups{1, 132, 1024};  // workgroups per dispatch (64 threads each)
  uint32_t count = 256;       // dispatches per timed submission (N >= 2)
  uint32_t repeats = 5;       // timed submissions per figure (median taken), >= 1
  uint32_t split_every = 32;  // dispatches per submission in the "split" pattern
};

struct DispatchFigure {
  std::string pattern;  // chain | independent | split
  uint32_t workgroups = 0;
  double record_us = 0;  // CPU recording per dispatch (median over repeats)
  double total_us = 0;   // wall per dispatch, (T(N) - T(1)) / (N - 1) (medians)
  double gpu_us = -1;    // median per-dispatch GPU time from timestamps; -1 without timestamps
};

struct DispatchReport {
  uint32_t count = 0, repeats = 0;
  bool timestamps = false;
  std::vector<DispatchFigure> rows;
};

DispatchReport measure_dispatch_cost(gpu::Context& ctx, const DispatchProbeOptions& opt = {});

}  // namespace wgllm::kernels
