#include "server/metrics.h"

#include <fmt/core.h>

namespace wgllm::server {

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  std::lock_guard<std::mutex> lk(mu_);
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++n_;
}

std::string Histogram::render(const std::string& name, const std::string& help) const {
  std::lock_guard<std::mutex> lk(mu_);
  std::string s = fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  uint64_t c = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    c += counts_[i];
    s += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, bounds_[i], c);
  }
  c += counts_.back();
  s += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n{}_sum {}\n{}_count {}\n", name, c, name, sum_, name, n_);
  return s;
}

std::string Metrics::render() const {
  std::string s;
  auto line = [&](const char* name, const char* type, const char* help, uint64_t v) {
    s += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, v);
  };
  line("wgllm_requests_total", "counter", "generation requests accepted", requests.load());
  line("wgllm_requests_ok_total", "counter", "generation requests finished normally", requests_ok.load());
  line("wgllm_requests_cancelled_total", "counter", "generations cancelled (client disconnect, shutdown)",
       requests_cancelled.load());
  line("wgllm_requests_failed_total", "counter", "generations ended by an error", requests_failed.load());
  line("wgllm_requests_rejected_total", "counter", "requests refused with 429 (queue full)", requests_rejected.load());
  line("wgllm_http_client_errors_total", "counter", "answers with a 4xx status", http_errors_4xx.load());
  line("wgllm_prompt_tokens_total", "counter", "prompt tokens of accepted requests", prompt_tokens.load());
  line("wgllm_cached_tokens_total", "counter", "prompt tokens reused from cached sequence state", cached_tokens.load());
  line("wgllm_generated_tokens_total", "counter", "tokens generated", generated_tokens.load());
  line("wgllm_scheduler_steps_total", "counter", "slot steps run by the scheduler (prompt chunks and decode tokens)", steps.load());
  line("wgllm_scheduler_forwards_total", "counter", "batched forwards (one per scheduler step over all active slots)",
       forwards.load());
  line("wgllm_scheduler_batched_forward", "gauge",
       "1 when one forward advances every active slot (continuous batching), 0 when the slots take turns",
       batched_forward.load());
  line("wgllm_scheduler_batch_items_total", "counter", "slot steps in those forwards (sum of batch sizes)", batch_items.load());
  line("wgllm_queue_depth", "gauge", "requests waiting for a slot", queue_depth.load());
  line("wgllm_active_requests", "gauge", "requests holding a slot", active.load());
  line("wgllm_kv_memory_bytes", "gauge", "bytes of KV cache and recurrent state of all slots", kv_bytes.load());
  line("wgllm_snapshot_memory_bytes", "gauge", "bytes of prefix-cache snapshots", snapshot_bytes.load());
  line("wgllm_snapshot_entries", "gauge", "prefix-cache entries", snapshot_entries.load());
  line("wgllm_snapshot_evictions_total", "counter", "prefix-cache entries evicted (LRU)", snapshot_evictions.load());
  s += ttft.render("wgllm_time_to_first_token_seconds", "from the request's arrival to its first token");
  s += itl.render("wgllm_inter_token_latency_seconds", "between consecutive tokens of one request");
  return s;
}

}  // namespace wgllm::server
