#include "bench/ab.h"

#include "bench/preflight.h"
#include "core/error.h"

namespace wgllm::bench {
namespace {

std::vector<double> run_once(const std::string& cmd, const std::vector<std::string>& metrics) {
  const std::string out = run_capture(cmd);
  size_t end = out.find_last_not_of(" \n\r\t");
  if (end == std::string::npos) throw Error("A/B run printed nothing: " + cmd);
  size_t start = out.rfind('\n', end);
  start = start == std::string::npos ? 0 : start + 1;
  nlohmann::json j = nlohmann::json::parse(out.substr(start, end - start + 1), nullptr, false);
  std::vector<double> v;
  for (auto& m : metrics) {
    if (!j.is_object() || !j.contains(m) || !j[m].is_number())
      throw Error("A/B run did not print a JSON object with numeric '" + m + "' as its last line: " + cmd);
    v.push_back(j[m].get<double>());
  }
  return v;
}

}  // namespace

AbResult run_ab(const AbSpec& s) {
  if (s.metrics.empty()) throw Error("A/B: no metric given");
  AbResult r;
  for (auto& m : s.metrics) r.metrics.push_back({m, {}, {}, {}, {}});
  auto put = [&](std::vector<double> AbResult::Metric::*arm, const std::vector<double>& v) {
    for (size_t i = 0; i < v.size(); ++i) (r.metrics[i].*arm).push_back(v[i]);
  };
  for (int i = 0; i < s.rounds; ++i) {  // A1 B A2 B, repeated
    put(&AbResult::Metric::a1, run_once(s.cmd_a, s.metrics));
    put(&AbResult::Metric::b, run_once(s.cmd_b, s.metrics));
    put(&AbResult::Metric::a2, run_once(s.cmd_a, s.metrics));
    put(&AbResult::Metric::b, run_once(s.cmd_b, s.metrics));
  }
  for (auto& m : r.metrics) m.verdict = ab_verdict(m.a1, m.a2, m.b);
  return r;
}

nlohmann::json AbResult::to_json(const AbSpec& s) const {
  auto iv = [](const Interval& i) { return nlohmann::json{{"lo", i.lo}, {"mid", i.mid}, {"hi", i.hi}}; };
  nlohmann::json j = {{"cmd_a", s.cmd_a}, {"cmd_b", s.cmd_b}, {"rounds", s.rounds}, {"order", "A1 B A2 B, repeated"}};
  for (auto& m : metrics)
    j["metrics"][m.name] = {{"a1", m.a1}, {"a2", m.a2}, {"b", m.b}, {"ratio_b_over_a", iv(m.verdict.ratio)},
                            {"control_a2_over_a1", iv(m.verdict.control)}, {"noise_band", m.verdict.noise},
                            {"broken", m.verdict.broken}, {"detected", m.verdict.detected}, {"verdict", m.verdict.text}};
  return j;
}

}  // namespace wgllm::bench
