#include "bench/stats.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

namespace wgllm::bench {

double quantile(std::vector<double> v, double q) {
  // (!(q >= 0 && q <= 1) also catches a NaN q; a NaN sample has no place in the order, and would
  // break std::sort's strict weak ordering.)
  if (v.empty() || !(q >= 0 && q <= 1) || std::any_of(v.begin(), v.end(), [](double x) { return std::isnan(x); }))
    return NAN;
  std::sort(v.begin(), v.end());
  const double pos = q * double(v.size() - 1);
  const size_t i = size_t(pos);
  const double f = pos - double(i);
  return i + 1 < v.size() ? v[i] * (1 - f) + v[i + 1] * f : v[i];
}

double median(const std::vector<double>& v) { return quantile(v, 0.5); }

Interval ratio_of_medians(const std::vector<double>& a, const std::vector<double>& b, int iters, uint64_t seed) {
  Interval r;
  r.mid = median(b) / median(a);
  if (a.empty() || b.empty()) return {NAN, NAN, NAN};
  std::mt19937_64 g(seed);
  std::vector<double> ratios, ra(a.size()), rb(b.size());
  ratios.reserve(iters);
  for (int it = 0; it < iters; ++it) {
    for (auto& x : ra) x = a[g() % a.size()];
    for (auto& x : rb) x = b[g() % b.size()];
    ratios.push_back(median(rb) / median(ra));
  }
  r.lo = quantile(ratios, 0.025);
  r.hi = quantile(ratios, 0.975);
  return r;
}

Verdict ab_verdict(const std::vector<double>& a1, const std::vector<double>& a2, const std::vector<double>& b) {
  Verdict v;
  std::vector<double> a = a1;
  a.insert(a.end(), a2.begin(), a2.end());
  v.control = ratio_of_medians(a1, a2, 2000, 7);
  v.ratio = ratio_of_medians(a, b, 2000, 11);
  v.noise = std::max({std::fabs(v.control.mid - 1), v.control.mid - v.control.lo, v.control.hi - v.control.mid});
  // Within-arm spread must exist too: identical repeated values mean the timer sees nothing.
  auto spread = [](const std::vector<double>& x) { return x.empty() ? 0.0 : *std::max_element(x.begin(), x.end()) - *std::min_element(x.begin(), x.end()); };
  v.broken = v.noise == 0.0 || (spread(a1) == 0.0 && spread(a2) == 0.0) || !std::isfinite(v.noise);
  char buf[256];
  if (v.broken) {
    std::snprintf(buf, sizeof buf, "BROKEN MEASUREMENT: control arms show zero noise (A2/A1 = %.4f [%.4f, %.4f]); no conclusion",
                  v.control.mid, v.control.lo, v.control.hi);
  } else {
    v.detected = v.ratio.hi < 1 - v.noise || v.ratio.lo > 1 + v.noise;
    if (v.detected)
      std::snprintf(buf, sizeof buf, "B/A = %.3f [%.3f, %.3f] outside the noise band 1 +- %.3f: a %s of %.1f%%", v.ratio.mid,
                    v.ratio.lo, v.ratio.hi, v.noise, v.ratio.mid > 1 ? "increase" : "decrease", std::fabs(v.ratio.mid - 1) * 100);
    else
      std::snprintf(buf, sizeof buf, "no detectable difference: B/A = %.3f [%.3f, %.3f], noise band 1 +- %.3f", v.ratio.mid,
                    v.ratio.lo, v.ratio.hi, v.noise);
  }
  v.text = buf;
  return v;
}

}  // namespace wgllm::bench
