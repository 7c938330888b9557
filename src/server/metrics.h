// Server metrics in the Prometheus text exposition format (GET /metrics). Counters are atomics;
// histograms take a mutex. Latency histograms use fixed bucket bounds in seconds.
#pragma once
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace wgllm::server {

/// A Prometheus histogram: cumulative counts per upper bound (seconds), sum and count.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double v);
  /// "# TYPE name histogram" then name_bucket{le=...}, name_sum, name_count lines.
  std::string render(const std::string& name, const std::string& help) const;

 private:
  mutable std::mutex mu_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); last = +Inf
  double sum_ = 0;
  uint64_t n_ = 0;
};

struct Metrics {
  std::atomic<uint64_t> requests{0};           // accepted generation requests (chat + completions)
  std::atomic<uint64_t> requests_ok{0};        // finished normally
  std::atomic<uint64_t> requests_cancelled{0}; // client went away or the server shut down
  std::atomic<uint64_t> requests_failed{0};    // errors during generation
  std::atomic<uint64_t> requests_rejected{0};  // 429: queue full
  std::atomic<uint64_t> http_errors_4xx{0};    // 400/401/404/429 answers
  std::atomic<uint64_t> prompt_tokens{0};      // prompt tokens of accepted requests
  std::atomic<uint64_t> cached_tokens{0};      // of those, reused from cached state
  std::atomic<uint64_t> generated_tokens{0};
  std::atomic<uint64_t> queue_depth{0};        // requests waiting for a slot
  std::atomic<uint64_t> active{0};             // requests holding a slot
  std::atomic<uint64_t> kv_bytes{0};           // KV cache + recurrent state of all slots
  std::atomic<uint64_t> snapshot_bytes{0};     // prefix cache snapshots
  std::atomic<uint64_t> snapshot_entries{0};
  std::atomic<uint64_t> snapshot_evictions{0};
  std::atomic<uint64_t> steps{0};              // slot steps (a prompt chunk or a decode token of one slot)
  std::atomic<uint64_t> forwards{0};           // batched forwards (each advances every active slot once)
  std::atomic<uint64_t> batched_forward{0};    // 1: one forward advances all slots (Model::batched_forward), 0: in turn
  std::atomic<uint64_t> batch_items{0};         // slot steps in those forwards (batch_items / forwards: mean batch size)
  Histogram ttft{{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}};
  Histogram itl{{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5}};

  std::string render() const;
};

}  // namespace wgllm::server
