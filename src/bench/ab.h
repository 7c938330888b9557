// A/B runs in separate processes: two independent control arms (A1, A2: the same command) and
// the candidate B, interleaved A1 B A2 B A1 B A2 B ... so drifts hit every arm alike.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/stats.h"

namespace wgllm::bench {

struct AbSpec {
  std::string cmd_a, cmd_b;  // shell commands; each run prints one JSON object as its last line
  std::vector<std::string> metrics;  // keys of numeric metrics in that JSON (e.g. "decode_tok_s")
  int rounds = 4;            // runs per arm
};

struct AbResult {
  struct Metric {
    std::string name;
    std::vector<double> a1, a2, b;
    Verdict verdict;
  };
  std::vector<Metric> metrics;
  nlohmann::json to_json(const AbSpec& s) const;
};

/// Throws wgllm::Error naming the command when a run fails or lacks the metric.
AbResult run_ab(const AbSpec& spec);

}  // namespace wgllm::bench
