// The dispatch-cost probe runs on this machine's Vulkan device (lavapipe on CPU-only machines),
// checks the values its dispatches computed, and returns finite figures. No timing assertion.
#include "kernels/dispatch_probe.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "gpu/context.h"

namespace wgllm::kernels {
namespace {

TEST(DispatchProbe, MeasuresEveryPatternAndChecksResults) {
  auto ctx = gpu::Context::create();
  DispatchProbeOptions o;
  o.workgroups = {1, 3};
  o.count = 40;  // > split_every: the split pattern submits twice
  o.repeats = 2;
  const DispatchReport r = measure_dispatch_cost(*ctx, o);
  ASSERT_EQ(r.rows.size(), 6u);  // 3 patterns x 2 workgroup counts
  for (const auto& f : r.rows) {
    EXPECT_TRUE(std::isfinite(f.record_us) && f.record_us > 0) << f.pattern;
    EXPECT_TRUE(std::isfinite(f.total_us)) << f.pattern;
    if (f.pattern == "split") EXPECT_EQ(f.gpu_us, -1) << "split runs are not timestamped";
    std::printf("%-11s wg=%4u record %.2f us, total %.2f us, gpu %.2f us\n", f.pattern.c_str(), f.workgroups,
                f.record_us, f.total_us, f.gpu_us);
  }
}

TEST(DispatchProbe, RejectsBadOptions) {
  auto ctx = gpu::Context::create();
  EXPECT_THROW(measure_dispatch_cost(*ctx, {.workgroups = {1}, .count = 1}), Error);
  EXPECT_THROW(measure_dispatch_cost(*ctx, {.workgroups = {1}, .count = 8, .repeats = 0}), Error);
  EXPECT_THROW(measure_dispatch_cost(*ctx, {.workgroups = {0}, .count = 8}), Error);
  EXPECT_THROW(measure_dispatch_cost(*ctx, {.workgroups = {}, .count = 8}), Error);
  EXPECT_THROW(measure_dispatch_cost(*ctx, {.workgroups = {1}, .count = 8, .repeats = 1, .split_every = 0}), Error);
}

}  // namespace
}  // namespace wgllm::kernels
