#include "bench/preflight.h"

#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

namespace wgllm::bench {

std::string run_capture(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  pclose(p);
  return out;
}

namespace {
std::vector<std::string> split(const std::string& s, char d) {
  std::vector<std::string> r;
  std::stringstream ss(s);
  std::string x;
  while (std::getline(ss, x, d)) {
    while (!x.empty() && (x.front() == ' ')) x.erase(x.begin());
    while (!x.empty() && (x.back() == ' ' || x.back() == '\r')) x.pop_back();
    r.push_back(x);
  }
  return r;
}
}  // namespace

Preflight preflight() {
  Preflight p;
  auto& j = p.info;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  j["host"] = host;
  j["cpu_count"] = std::thread::hardware_concurrency();
  std::ifstream la("/proc/loadavg");
  std::string l1;
  if (la >> l1) j["cpu_loadavg_1min"] = std::stod(l1);
  const std::string q = run_capture(
      "nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,utilization.gpu,memory.used,memory.total,"
      "temperature.gpu,power.draw --format=csv,noheader,nounits 2>/dev/null");
  if (q.empty()) {
    j["nvidia_smi"] = "not available";
    return p;
  }
  const char* keys[] = {"name", "driver", "clock_sm_mhz", "clock_mem_mhz", "clock_sm_max_mhz", "utilization_pct",
                        "memory_used_mib", "memory_total_mib", "temperature_c", "power_w"};
  auto f = split(split(q, '\n')[0], ',');
  for (size_t i = 0; i < f.size() && i < 10; ++i) j["gpu"][keys[i]] = f[i];
  const std::string apps = run_capture("nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader 2>/dev/null");
  j["gpu_processes"] = nlohmann::json::array();
  const std::string self = std::to_string(getpid());
  for (auto& line : split(apps, '\n')) {
    if (line.empty()) continue;
    auto c = split(line, ',');
    if (!c.empty() && c[0] == self) continue;
    j["gpu_processes"].push_back(line);
  }
  // Utilization is averaged over the driver's last sample period, so it still shows a process that
  // just exited (e.g. the previous arm of an A/B run): with no other compute process, re-sample
  // for up to ~3 s before calling the GPU busy.
  auto read_util = [] {
    try {
      return std::stoi(run_capture("nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits 2>/dev/null"));
    } catch (...) {
      return 0;
    }
  };
  int util = read_util();
  for (int i = 0; i < 12 && util > 10 && j["gpu_processes"].empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    util = read_util();
  }
  j["gpu"]["utilization_pct_at_start"] = util;
  if (!j["gpu_processes"].empty()) {
    p.gpu_busy = true;
    p.busy_reason = "other compute processes on the GPU: " + j["gpu_processes"].dump();
  } else if (util > 10) {
    p.gpu_busy = true;
    p.busy_reason = "GPU utilization " + std::to_string(util) + "% before measuring";
  }
  return p;
}

}  // namespace wgllm::bench
