// Pre-flight check before measuring: who else is using the GPU and the CPU. Recorded into every
// result file; by default a busy GPU refuses the measurement.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace wgllm::bench {

struct Preflight {
  nlohmann::json info;  // gpu (nvidia-smi fields when available), processes, cpu load, host
  bool gpu_busy = false;
  std::string busy_reason;
};

/// Reads nvidia-smi (when present: name, driver, clocks, utilization, memory, compute processes
/// other than this one) and /proc/loadavg. A GPU is busy if another compute process uses it or
/// utilization is above 10%.
Preflight preflight();

/// Runs a shell command and returns its stdout ("" if it cannot run).
std::string run_capture(const std::string& cmd);

}  // namespace wgllm::bench
