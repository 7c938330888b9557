// kernels::nll_rows against its CPU twin ref::nll_rows on seeded random logits at awkward sizes
// (row lengths 1 .. 262144, the Gemma 3 vocabulary), with offsets, strides wider than the row,
// unscored (-1) and out-of-range targets, and large logits (the max shift must be applied).
// Tolerance: f32 sums of up to 262144 terms in tree order vs double: 2e-5 relative + 1e-5.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/error.h"
#include "kernels/nll.h"

using namespace wgllm;
using namespace wgllm::kernels;

namespace {

struct Env {
  std::unique_ptr<gpu::Context> ctx = gpu::Context::create();
  gpu::PipelineCache cache{*ctx};
  gpu::Recorder rec{*ctx};
};

TEST(NllRows, MatchesCpuTwin) {
  Env e;
  OpContext o{*e.ctx, e.cache, e.rec, {}};
  struct Case { uint32_t n, rows, stride, x_off; float scale, shift; };
  for (const Case c : {Case{1, 2, 1, 0, 1.0f, 0.0f}, Case{7, 3, 9, 5, 2.0f, 0.0f}, Case{255, 17, 256, 1, 3.0f, 80.0f},
                       Case{1000, 5, 1000, 0, 1.0f, -40.0f}, Case{262144, 3, 262144, 4, 4.0f, 10.0f}}) {
    std::mt19937 g(c.n * 31 + c.rows);
    std::normal_distribution<float> d(c.shift, c.scale);
    std::vector<float> x(c.x_off + size_t(c.rows) * c.stride);
    for (float& v : x) v = d(g);
    std::vector<int32_t> targets(c.rows + 2);  // t_off = 2
    for (uint32_t r = 0; r < c.rows; ++r) targets[2 + r] = int32_t(g() % c.n);
    if (c.rows >= 3) {
      targets[2 + 1] = -1;               // not scored
      targets[2 + 2] = int32_t(c.n);     // out of range: 0 as well
    }
    gpu::Buffer xb(*e.ctx, x.size() * 4, gpu::BufferKind::Storage, "x");
    xb.write(*e.ctx, 0, x.data(), x.size() * 4);
    gpu::Buffer tb(*e.ctx, targets.size() * 4, gpu::BufferKind::Storage, "targets");
    tb.write(*e.ctx, 0, targets.data(), targets.size() * 4);
    const uint32_t y_off = 3;
    gpu::Buffer yb(*e.ctx, (y_off + c.rows) * 4, gpu::BufferKind::Storage, "y");
    e.rec.begin();
    nll_rows(o, {xb, c.x_off}, c.n, c.stride, c.rows, tb, 2, {yb, y_off});
    std::vector<float> got(y_off + c.rows);
    e.rec.read_after(yb, 0, got.size() * 4);
    e.rec.submit(got.data());
    std::vector<float> want(c.rows);
    ref::nll_rows(x.data() + c.x_off, c.n, c.stride, c.rows, targets.data() + 2, want.data());
    for (uint32_t r = 0; r < c.rows; ++r) {
      EXPECT_NEAR(got[y_off + r], want[r], 1e-5 + 2e-5 * std::fabs(want[r])) << "n " << c.n << " row " << r;
      if (targets[2 + r] < 0 || targets[2 + r] >= int32_t(c.n)) EXPECT_EQ(got[y_off + r], 0.0f);
      else if (c.n > 1) EXPECT_GT(want[r], 0.0f);  // a probability below 1
    }
  }
}

TEST(NllRows, RejectsBadShapes) {
  Env e;
  OpContext o{*e.ctx, e.cache, e.rec, {}};
  gpu::Buffer b(*e.ctx, 64, gpu::BufferKind::Storage, "b");
  EXPECT_THROW(nll_rows(o, {b, 0}, 0, 1, 1, b, 0, {b, 0}), Error);
  EXPECT_THROW(nll_rows(o, {b, 0}, 4, 4, 0, b, 0, {b, 0}), Error);
  EXPECT_THROW(nll_rows(o, {b, 0}, 4, 4, 70000, b, 0, {b, 0}), Error);
}

TEST(NllRowsRef, KnownValues) {
  // Uniform logits over n: NLL = log(n) for any target.
  std::vector<float> x(10, 3.5f);
  EXPECT_NEAR(ref::nll_row(x.data(), 10, 4), std::log(10.0), 1e-12);
  // Two logits {0, log 3}: p(1) = 3/4.
  const float y[2] = {0.0f, float(std::log(3.0))};
  EXPECT_NEAR(ref::nll_row(y, 2, 1), -std::log(0.75), 1e-6);
  EXPECT_EQ(ref::nll_row(y, 2, -1), 0.0);
}

}  // namespace
