// The copy-bandwidth probe runs on this machine's Vulkan device (lavapipe on CPU-only machines),
// checks its own copies and sums, and returns positive, finite figures. No timing assertion.
#include "kernels/bandwidth_probe.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "gpu/context.h"

namespace wgllm::kernels {
namespace {

void expect_sane(const BandwidthFigure& f) {
  EXPECT_TRUE(std::isfinite(f.best_GBps));
  EXPECT_GT(f.median_GBps, 0.0);
  EXPECT_GE(f.best_GBps, f.median_GBps);
}

TEST(BandwidthProbe, GivesPositiveFiniteFigures) {
  auto ctx = gpu::Context::create();
  BandwidthOptions o;
  o.bytes = 4u << 20;
  o.repeats = 3;
  const BandwidthReport r = measure_bandwidth(*ctx, o);
  EXPECT_EQ(r.bytes, o.bytes);
  EXPECT_EQ(r.repeats, 3u);
  expect_sane(r.copy_engine);
  expect_sane(r.copy_kernel);
  expect_sane(r.read_kernel);
  EXPECT_EQ(r.copy_GBps(), std::max(r.copy_engine.best_GBps, r.copy_kernel.best_GBps));
  std::printf("probe (%s/%s): copy engine %.2f GB/s, copy_vec4 %.2f GB/s, read_vec4 %.2f GB/s\n",
              r.copy_timestamps ? "timestamps" : "wall clock", r.kernel_timestamps ? "timestamps" : "wall clock",
              r.copy_engine.best_GBps, r.copy_kernel.best_GBps, r.read_kernel.best_GBps);
}

TEST(BandwidthProbe, OddSizeIsRoundedToWholeWorkgroups) {
  auto ctx = gpu::Context::create();
  BandwidthOptions o;
  o.bytes = (1u << 20) + 100;  // rounded down to a multiple of 4096 bytes
  o.repeats = 1;
  EXPECT_EQ(measure_bandwidth(*ctx, o).bytes, 1u << 20);
}

TEST(BandwidthProbe, RejectsBadOptions) {
  auto ctx = gpu::Context::create();
  EXPECT_THROW(measure_bandwidth(*ctx, {.bytes = 1000, .repeats = 1}), Error);
  EXPECT_THROW(measure_bandwidth(*ctx, {.bytes = 1u << 20, .repeats = 0}), Error);
}

}  // namespace
}  // namespace wgllm::kernels
