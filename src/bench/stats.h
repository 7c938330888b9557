// Statistics for benchmarks: order statistics, bootstrap confidence intervals, and the A/B
// verdict with a noise band measured from independent control arms.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace wgllm::bench {

/// q-quantile (0..1) with linear interpolation between order statistics; NaN for empty input, for
/// q outside [0, 1] (or NaN), and when any sample is NaN.
double quantile(std::vector<double> v, double q);
double median(const std::vector<double>& v);

struct Interval {
  double lo = 0, mid = 0, hi = 0;
};

/// Ratio of medians median(b) / median(a) with a percentile-bootstrap 95% interval
/// (resampling each sample with replacement, `iters` times, fixed seed: reproducible).
Interval ratio_of_medians(const std::vector<double>& a, const std::vector<double>& b, int iters = 2000,
                          uint64_t seed = 1);

/// The outcome of an A/B comparison (higher metric = better is NOT assumed: ratio is B/A).
struct Verdict {
  Interval ratio;        // B / A over both control arms pooled
  Interval control;      // A2 / A1: what "no change" looks like in this run
  double noise = 0;      // half-width of the noise band: max(|control - 1|, control CI half-width)
  bool broken = false;   // a noise estimate of exactly zero: the meter cannot see noise, so it
                         // cannot see anything either (e.g. a timer with no resolution)
  bool detected = false; // B/A interval lies entirely outside 1 +- noise
  std::string text;      // one-line human summary
};

/// a1, a2: two independent control arms (separate processes, same configuration); b: candidate.
Verdict ab_verdict(const std::vector<double>& a1, const std::vector<double>& a2, const std::vector<double>& b);

}  // namespace wgllm::bench
