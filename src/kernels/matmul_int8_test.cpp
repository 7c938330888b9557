// The int8 prefill matmul (kernels/matmul_int8.h, --matmul-int8) at awkward sizes (N, K, T not
// multiples of the tile), every weight format with an int8 path, ADD on and off, offsets and
// strides as the models use them:
//   - quantize_q8 against its CPU twin ref_quantize_q8 (d, s; q within 1 where the GPU's reciprocal
//     rounds a tie the other way);
//   - the product against ref::matmul on the activations as the GPU quantized them (read back from
//     the recorder's scratch): equal up to f32 summation order (2e-5 of the output range) -- this is
//     the kernel's exact semantics, so any layout, scale or offset error shows;
//   - the product against ref::matmul on the f32 activations within the int8 tolerance (and not
//     bit-equal: the int8 path really ran);
//   - tiles give identical bits; F32 weights and the switch off keep the f32 tiled kernel's bits.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>

#include "core/error.h"
#include "core/half.h"
#include "formats/dtype.h"
#include "kernels/matmul_int8.h"
#include "kernels/ref.h"
#include "kernels/kernel_test_env.h"

using namespace wgllm;
using namespace wgllm::kernels;
using namespace wgllm::kernels::testing;

namespace {

struct Case {
  DType t;
  uint32_t K, N, T;
  bool add;
  uint32_t y_off = 2;
};
std::string what(const Case& c, const KernelOptions& ko) {
  return dtype_name(c.t) + " K=" + std::to_string(c.K) + " N=" + std::to_string(c.N) + " T=" + std::to_string(c.T) +
         " add=" + std::to_string(c.add) + " tile " + std::to_string(ko.matmul_tile_n) + "x" +
         std::to_string(ko.matmul_tile_t) + "/" + std::to_string(ko.matmul_reg_n) + "x" + std::to_string(ko.matmul_reg_t);
}

struct Result {
  float err_twin = 0;  // max |gpu - ref on the GPU-quantized x| / max |ref|
  float err_f32 = 0;   // max |gpu - ref on f32 x| / max |ref|
  std::vector<float> y;
};

// W (type t, N x K) times T rows of x (offset 4, stride K + 4) into y (offset y_off, stride N + 3,
// random prior contents for ADD) through kernels::matmul with the tiled kernel and the int8 switch.
Result run_case(const Case& c, KernelOptions ko) {
  auto& e = env();
  ko.matmul_tiled = 1;
  ko.matmul_int8 = 1;
  auto blocks = random_blocks(c.t, c.K, c.N, c.K * 31 + c.N * 7 + c.T);
  ref::Matrix M{c.K, c.N, std::vector<float>(size_t(c.K) * c.N)};
  dequantize(c.t, blocks.data(), M.w.data(), uint64_t(c.K) * c.N);
  auto W = upload_weight(*e.ctx, pack_weight(c.t, blocks.data(), c.K, c.N), "w");
  EXPECT_TRUE(matmul_int8_supported(W));
  const uint32_t xs = c.K + 4, ys = c.N + 3;
  auto x = randn(size_t(c.T) * xs + 4, c.T + c.K);
  auto y0 = randn(size_t(c.T) * ys + c.y_off, c.N);
  auto xb = e.upload(x.data(), x.size() * 4), yb = e.upload(y0.data(), y0.size() * 4);
  OpContext o = e.op(ko);
  e.rec.begin();
  matmul(o, W, {xb, 4}, xs, {yb, c.y_off}, ys, c.T, c.add);
  e.rec.submit();
  Result r;
  r.y = e.download<float>(yb, y0.size());
  // The activations as the GPU quantized them: q * d from the recorder's scratch.
  const Q8Layout l = Q8Layout::of(c.T, c.K);
  const auto words = e.download<uint32_t>(e.rec.scratch(0), l.words);
  std::vector<float> xq(x.size());
  for (uint32_t t = 0; t < c.T; ++t)
    for (uint32_t k = 0; k < c.K; ++k) {
      const uint64_t blk = uint64_t(k / 32) * c.T + t;
      float d;
      std::memcpy(&d, &words[l.soff + 2 * blk], 4);
      const int8_t q = int8_t(words[blk * 8 + (k % 32) / 4] >> (8 * (k % 4)));
      xq[4 + size_t(t) * xs + k] = float(q) * d;
    }
  std::vector<float> want_twin = y0, want = y0;
  ref::matmul(M, xq.data() + 4, xs, want_twin.data() + c.y_off, ys, c.T, c.add);
  ref::matmul(M, x.data() + 4, xs, want.data() + c.y_off, ys, c.T, c.add);
  const OutputErrors oe = output_errors(r.y, want_twin, want, y0);
  for (size_t i : oe.changed) ADD_FAILURE() << "element " << i << " outside the output changed";
  r.err_twin = oe.twin;
  r.err_f32 = oe.f32;
  return r;
}

constexpr float kTolTwin = 2e-5f;  // summation order and the f32 epilogue only
// Activations rounded to 8 bits: each product's error is about 1/254 of its block's largest |x|
// over sqrt(12), summed over K; relative to the largest output ~1e-2 at these sizes.
constexpr float kTolInt8 = 3e-2f;

}  // namespace

// The int8 switches' adapter default (2, since 2026-12-02): on for hardware GPUs, off on software
// adapters; 0 and 1 force them. (Default options, not GpuEnv::op(), which pins 2 to off.)
TEST(MatmulInt8, AdapterDefaultOnForHardwareGpusOnly) {
  auto& e = env();
  auto blocks = random_blocks(DType::Q4_K, 256, 8, 3);
  auto W = upload_weight(*e.ctx, pack_weight(DType::Q4_K, blocks.data(), 256, 8), "w");
  const bool hw = !e.ctx->info().is_software();
  KernelOptions ko;
  ASSERT_EQ(ko.matvec_int8, 2);
  ASSERT_EQ(ko.matmul_int8, 2);
  EXPECT_EQ(matvec_uses_int8(OpContext{*e.ctx, e.cache, e.rec, ko}, W), hw);
  EXPECT_EQ(matmul_int8_used(OpContext{*e.ctx, e.cache, e.rec, ko}, W), hw);
  for (uint8_t v : {0, 1}) {
    ko.matvec_int8 = ko.matmul_int8 = v;
    EXPECT_EQ(matvec_uses_int8(OpContext{*e.ctx, e.cache, e.rec, ko}, W), v == 1);
    EXPECT_EQ(matmul_int8_used(OpContext{*e.ctx, e.cache, e.rec, ko}, W), v == 1);
  }
  EXPECT_FALSE(matvec_uses_int8(e.op(KernelOptions{}), W)) << "GpuEnv::op() keeps kernel tests on the f32 path";
  EXPECT_FALSE(matmul_int8_used(e.op(KernelOptions{}), W)) << "GpuEnv::op() keeps kernel tests on the f32 path";
}

TEST(QuantizeQ8, MatchesCpuTwin) {
  auto& e = env();
  const uint32_t T = 13, K = 160, xs = K + 8;
  auto x = randn(size_t(T) * xs + 8, 5);
  for (uint32_t k = 0; k < 32; ++k) x[8 + xs + k] = 0.0f;  // row 1 block 0: all zero (d = 0)
  for (uint32_t k = 0; k < K; ++k) x[8 + 2 * xs + k] *= 1e-3f * float(1 + k);  // growing range
  auto xb = e.upload(x.data(), x.size() * 4);
  const Q8Layout l = Q8Layout::of(T, K);
  gpu::Buffer out(*e.ctx, l.words * 4, gpu::BufferKind::Storage, "q8");
  KernelOptions ko;
  OpContext o = e.op(ko);
  e.rec.begin();
  quantize_q8(o, {xb, 8}, xs, T, K, out);
  e.rec.submit();
  const auto w = e.download<uint32_t>(out, l.words);
  int off_by_one = 0;
  for (uint32_t t = 0; t < T; ++t) {
    std::vector<int8_t> q(K);
    std::vector<float> d(l.nb), s(l.nb);
    ref_quantize_q8(x.data() + 8 + t * xs, K, q.data(), d.data(), s.data());
    for (uint32_t b = 0; b < l.nb; ++b) {
      const uint64_t blk = uint64_t(b) * T + t;
      float gd, gs;
      std::memcpy(&gd, &w[l.soff + 2 * blk], 4);
      std::memcpy(&gs, &w[l.soff + 2 * blk + 1], 4);
      EXPECT_NEAR(gd, d[b], 1e-6f * d[b]) << "t=" << t << " b=" << b;
      int gsum = 0;
      for (uint32_t j = 0; j < 32; ++j) {
        const int gq = int8_t(w[blk * 8 + j / 4] >> (8 * (j % 4)));
        gsum += gq;
        const int cq = q[b * 32 + j];
        EXPECT_LE(std::abs(gq - cq), 1) << "t=" << t << " k=" << b * 32 + j;
        off_by_one += gq != cq;
      }
      EXPECT_NEAR(gs, gd * float(gsum), 1e-6f * std::fabs(gd * float(gsum))) << "t=" << t << " b=" << b;
      if (t == 1 && b == 0) {
        EXPECT_EQ(gd, 0.0f);
      }
    }
  }
  EXPECT_LE(off_by_one, 2) << "of " << T * K << " quants differ by one from the CPU twin";
}

class MatmulInt8Test : public ::testing::TestWithParam<DType> {};

TEST_P(MatmulInt8Test, MatchesCpuReferenceAtAwkwardSizes) {
  const DType t = GetParam();
  const bool kq = dtype_block_elems(t) == 256;
  KernelOptions ko;
  // Partial tiles on both sides, one row; ADD on (it reads and writes y), off for Q4_K only: each
  // variant is a pipeline, and pipelines of this generated code take seconds to compile on lavapipe.
  const uint32_t K0 = kq ? 256 : 96, K1 = kq ? 512 : 544;
  const bool add0 = t != DType::Q4_K;
  for (const Case& c : {Case{t, K0, 37, 9, add0}, Case{t, K1, 70, 70, true, 3}, Case{t, K0, 1, 33, true, 3}}) {
    const Result r = run_case(c, ko);
    EXPECT_LE(r.err_twin, kTolTwin) << what(c, ko);
    EXPECT_LE(r.err_f32, kTolInt8) << what(c, ko);
    EXPECT_GT(r.err_f32, 1e-5f) << "int8 path gave f32 results: " << what(c, ko);
  }
}
INSTANTIATE_TEST_SUITE_P(QuantTypes, MatmulInt8Test,
                         ::testing::Values(DType::Q4_0, DType::Q4_1, DType::Q5_0, DType::Q8_0, DType::Q4_K, DType::Q6_K),
                         [](const auto& i) { return dtype_name(i.param); });

TEST(MatmulInt8, EveryTileShapeGivesTheSameBits) {
  // Each output accumulates the same per-block terms in k order whatever the tile.
  const Case c{DType::Q4_K, 512, 131, 67, true};
  std::vector<float> first;
  for (auto [bn, bt, rn, rt] : std::vector<std::array<uint32_t, 4>>{{32, 32, 4, 4}, {64, 32, 8, 4}, {16, 8, 4, 4}}) {
    KernelOptions ko;
    ko.matmul_tile_n = bn, ko.matmul_tile_t = bt, ko.matmul_reg_n = rn, ko.matmul_reg_t = rt;
    const Result r = run_case(c, ko);
    EXPECT_LE(r.err_twin, kTolTwin) << what(c, ko);
    if (first.empty()) first = r.y;
    EXPECT_EQ(std::memcmp(first.data(), r.y.data(), r.y.size() * 4), 0) << "bits differ from 32x32/4x4: " << what(c, ko);
  }
}

TEST(MatmulInt8, PromptOf512Tokens) {
  const Case c{DType::Q6_K, 256, 40, 512, true};
  const Result r = run_case(c, KernelOptions{});
  EXPECT_LE(r.err_twin, kTolTwin);
  EXPECT_LE(r.err_f32, kTolInt8);
}

TEST(MatmulInt8, SwitchOffAndF32WeightsKeepTheF32Kernel) {
  auto& e = env();
  const uint32_t K = 128, N = 24, T = 20;
  auto x = randn(size_t(T) * K, 4);
  auto xb = e.upload(x.data(), x.size() * 4);
  auto run = [&](DType t, bool int8) {
    auto blocks = random_blocks(t, K, N, 9);
    if (t == DType::F16)
      for (size_t i = 0; i < blocks.size(); i += 2) put_f16(&blocks[i], float(int(i % 13) - 6) * 0.01f);
    auto W = upload_weight(*e.ctx, pack_weight(t, blocks.data(), K, N), "w");
    KernelOptions ko;
    ko.matmul_tiled = 1;
    ko.matmul_int8 = int8;
    OpContext o = e.op(ko);
    EXPECT_EQ(matmul_int8_used(o, W), int8 && t != DType::F16);
    std::vector<float> z(size_t(T) * N);
    auto yb = e.upload(z.data(), z.size() * 4);
    e.rec.begin();
    matmul(o, W, {xb, 0}, K, {yb, 0}, N, T, true);  // ADD (into zeros): the pipelines of the other tests
    e.rec.submit();
    return e.download<float>(yb, z.size());
  };
  auto bits_equal = [](const std::vector<float>& a, const std::vector<float>& b) {
    return std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
  };
  EXPECT_TRUE(bits_equal(run(DType::F16, true), run(DType::F16, false))) << "F16 weights must keep the f32 kernel";
  EXPECT_FALSE(bits_equal(run(DType::Q4_1, true), run(DType::Q4_1, false))) << "Q4_1 with the switch: int8 path";
}
