// matmul_tiled (the prefill matmul, T > 8) against its CPU twin ref::matmul at awkward sizes (N, K,
// T not multiples of the tile), every weight type, ADD on and off, offsets and strides as the
// models use them, several tiles; the f16 variant with its own tolerance; and the routing of
// kernels::matmul (tiled for T > 8 when on, per-row kernel otherwise).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <set>

#include "core/error.h"
#include "core/half.h"
#include "formats/dtype.h"
#include "kernels/matmul_tiled.h"
#include "kernels/ref.h"
#include "kernels/kernel_test_env.h"

using namespace wgllm;
using namespace wgllm::kernels;
using namespace wgllm::kernels::testing;

namespace {

// One product: W (type t, N x K) times T rows of x (offset 4, stride K + 4) into y (offset y_off,
// stride N + 3, random prior contents for ADD). Returns the max |gpu - cpu| relative to the largest
// |cpu| value, and checks untouched y elements (gaps between rows) kept their bits.
struct Case {
  DType t;
  uint32_t K, N, T;
  bool add;
  uint32_t y_off = 2;
};
float run_case(const Case& c, const KernelOptions& ko, bool direct, std::vector<float>* out = nullptr) {
  auto& e = env();
  auto blocks = random_blocks(c.t, c.K, c.N, c.K * 31 + c.N * 7 + c.T);
  ref::Matrix M{c.K, c.N, std::vector<float>(size_t(c.K) * c.N)};
  dequantize(c.t, blocks.data(), M.w.data(), uint64_t(c.K) * c.N);
  auto W = upload_weight(*e.ctx, pack_weight(c.t, blocks.data(), c.K, c.N), "w");
  const uint32_t xs = c.K + 4, ys = c.N + 3;
  auto x = randn(size_t(c.T) * xs + 4, c.T + c.K);
  auto y0 = randn(size_t(c.T) * ys + c.y_off, c.N);
  std::vector<float> want = y0;
  ref::matmul(M, x.data() + 4, xs, want.data() + c.y_off, ys, c.T, c.add);
  auto xb = e.upload(x), yb = e.upload(y0);
  OpContext o = e.op(ko);
  e.rec.begin();
  if (direct)
    matmul_tiled(o, W, {xb, 4}, xs, {yb, c.y_off}, ys, c.T, c.add);
  else
    matmul(o, W, {xb, 4}, xs, {yb, c.y_off}, ys, c.T, c.add);
  e.rec.submit();
  auto got = e.download(yb, y0.size());
  if (out) *out = got;
  float mx = 0, err = 0;
  for (float v : want) mx = std::max(mx, std::fabs(v));
  for (size_t i = 0; i < got.size(); ++i) {
    err = std::max(err, std::fabs(got[i] - want[i]));
    if (!(std::fabs(got[i] - want[i]) <= 1e30f)) err = INFINITY;  // NaN
    if (want[i] == y0[i] && std::memcmp(&got[i], &y0[i], 4) != 0)
      ADD_FAILURE() << "element " << i << " outside the output changed";
  }
  return err / mx;
}

std::string what(const Case& c, const KernelOptions& ko) {
  return dtype_name(c.t) + " K=" + std::to_string(c.K) + " N=" + std::to_string(c.N) + " T=" + std::to_string(c.T) +
         " add=" + std::to_string(c.add) + " y_off=" + std::to_string(c.y_off) + " tile " +
         std::to_string(ko.matmul_tile_n) + "x" + std::to_string(ko.matmul_tile_t) + "/" +
         std::to_string(ko.matmul_reg_n) + "x" + std::to_string(ko.matmul_reg_t) + " f16=" +
         std::to_string(ko.matmul_tiled_f16);
}

constexpr float kTolF32 = 2e-5f;  // relative to the largest output: summation order only

}  // namespace

class MatmulTiledTest : public ::testing::TestWithParam<DType> {};

TEST_P(MatmulTiledTest, MatchesCpuReferenceAtAwkwardSizes) {
  const DType t = GetParam();
  const bool kq = dtype_block_elems(t) == 256;
  KernelOptions ko;  // adapter default tile
  for (uint32_t K : {kq ? 256u : 96u, kq ? 512u : 544u}) {
    for (uint32_t N : {1u, 37u, 70u}) {
      for (uint32_t T : {9u, 33u, 70u}) {
        for (bool add : {false, true}) {
          const Case c{t, K, N, T, add, add ? 3u : 2u};
          EXPECT_LE(run_case(c, ko, true), kTolF32) << what(c, ko);
        }
      }
    }
  }
}
INSTANTIATE_TEST_SUITE_P(AllTypes, MatmulTiledTest,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1,
                                           DType::Q5_0, DType::Q8_0, DType::Q4_K, DType::Q6_K),
                         [](const auto& i) { return dtype_name(i.param); });

TEST(MatmulTiled, EveryTileShapeMatchesCpuBitIdentically) {
  // Register tiles 4 and 8 on both sides, tiles from 8 to 128 wide; partial tiles everywhere. Each
  // output is the same FMA chain in k order whatever the tile, so the bits agree across tiles.
  const Case c{DType::Q4_1, 160, 131, 67, true};
  std::vector<float> first, got;
  for (auto [bn, bt, rn, rt] : std::vector<std::array<uint32_t, 4>>{
           {64, 64, 4, 4}, {64, 32, 8, 4}, {32, 64, 4, 8}, {128, 64, 8, 8}, {16, 8, 4, 4}}) {
    KernelOptions ko;
    ko.matmul_tile_n = bn, ko.matmul_tile_t = bt, ko.matmul_reg_n = rn, ko.matmul_reg_t = rt;
    EXPECT_LE(run_case(c, ko, true, &got), kTolF32) << what(c, ko);
    if (first.empty()) first = got;
    EXPECT_EQ(std::memcmp(first.data(), got.data(), got.size() * 4), 0) << "bits differ from 64x64/4x4: " << what(c, ko);
  }
}

TEST(MatmulTiled, F32WeightsWithFourElementBlocks) {
  // F32/F16 weights whose K is not a multiple of 32 use 4-element blocks: 8 per K-step, last tile partial.
  KernelOptions ko;
  for (const Case& c : {Case{DType::F16, 36, 29, 40, false}, Case{DType::F32, 100, 67, 9, true}})
    EXPECT_LE(run_case(c, ko, true), kTolF32) << what(c, ko);
}

TEST(MatmulTiled, PromptOf512Tokens) {
  KernelOptions ko;
  ko.matmul_tiled = 1;  // through kernels::matmul, also on software adapters
  const Case c{DType::Q4_1, 64, 40, 512, true};
  EXPECT_LE(run_case(c, ko, false), kTolF32) << what(c, ko);
}

TEST(MatmulTiled, F16VariantWithinItsTolerance) {
  auto& e = env();
  if (!e.ctx->has_feature(WGPUFeatureName_ShaderF16)) GTEST_SKIP() << "adapter without shader-f16";
  KernelOptions ko;
  ko.matmul_tiled_f16 = true;
  // f16 operands (11-bit significand) and 32-term f16 partial sums: ~1e-3 relative to the output range.
  for (const Case& c : {Case{DType::Q4_1, 544, 70, 33, false}, Case{DType::Q8_0, 96, 37, 70, true},
                        Case{DType::Q6_K, 512, 37, 9, false}, Case{DType::F16, 96, 1, 33, true}}) {
    const float err = run_case(c, ko, true);
    EXPECT_LE(err, 5e-3f) << what(c, ko);
    EXPECT_GT(err, 0.0f) << "f16 variant gave f32 results: " << what(c, ko);
  }
}

TEST(MatmulTiled, MatmulRoutesPrefillToTheTiledKernel) {
  // kernels::matmul with the switch on gives matmul_tiled's bits for T > 8 (past
  // --matvec-max-tokens where matvec.wgsl is on) and the per-row kernel's bits for T <= 8 and with
  // the switch off.
  auto& e = env();
  const uint32_t K = 128, N = 24;
  auto blocks = random_blocks(DType::Q4_1, K, N, 9);
  auto W = upload_weight(*e.ctx, pack_weight(DType::Q4_1, blocks.data(), K, N), "w");
  auto x = randn(size_t(40) * K, 4);
  auto xb = e.upload(x);
  auto run = [&](uint32_t T, uint8_t tiled_switch, bool direct) {
    KernelOptions ko;
    ko.matmul_tiled = tiled_switch;
    OpContext o = e.op(ko);
    auto yb = e.upload(std::vector<float>(size_t(T) * N));
    e.rec.begin();
    if (direct)
      matmul_tiled(o, W, {xb, 0}, K, {yb, 0}, N, T, false);
    else
      matmul(o, W, {xb, 0}, K, {yb, 0}, N, T, false);
    e.rec.submit();
    return e.download(yb, size_t(T) * N);
  };
  auto bits_equal = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
  };
  // Past --matvec-max-tokens (hardware GPUs: forwards of up to 32 tokens run matvec.wgsl).
  const uint32_t first = std::max<uint32_t>(9, matvec_max_tokens(e.op(KernelOptions{})) + 1);
  for (uint32_t T : {first, 40u}) {
    EXPECT_TRUE(bits_equal(run(T, 1, false), run(T, 1, true))) << "T=" << T;
    EXPECT_FALSE(bits_equal(run(T, 0, false), run(T, 1, true))) << "T=" << T << ": switch off still tiled?";
  }
  EXPECT_FALSE(bits_equal(run(8, 1, false), run(8, 1, true))) << "T=8 must keep the per-row kernel";
  // 2 = adapter default: tiled on hardware GPUs, per-row on software adapters.
  const bool sw = e.ctx->info().is_software();
  EXPECT_EQ(bits_equal(run(40, 2, false), run(40, 1, true)), !sw) << "adapter default, software adapter: " << sw;
}

TEST(MatmulTiled, BadTilesAreClearErrors) {
  auto& e = env();
  for (auto [bn, bt, rn, rt] : std::vector<std::array<uint32_t, 4>>{
           {64, 64, 2, 4}, {60, 64, 8, 4}, {64, 30, 4, 4}, {256, 256, 4, 4}, {512, 512, 8, 8}}) {
    KernelOptions ko;
    ko.matmul_tile_n = bn, ko.matmul_tile_t = bt, ko.matmul_reg_n = rn, ko.matmul_reg_t = rt;
    OpContext o = e.op(ko);
    EXPECT_THROW(matmul_tile(o, false), Error) << bn << "x" << bt << "/" << rn << "x" << rt;
  }
}

TEST(MatmulTiled, SmallGridsGetSmallerTiles) {
  auto t = [](uint32_t N, uint32_t T, bool fn = false, bool ft = false) {
    return shrink_tile(MatmulTile{64, 64, 4, 4}, fn, ft, N, T, 264).str();
  };
  EXPECT_EQ(t(576, 512), "32x32/4x4");     // 72 -> 144 -> 288 workgroups
  EXPECT_EQ(t(960, 512), "32x32/4x4");     // 120 -> 240 -> 480
  EXPECT_EQ(t(960, 256), "32x32/4x4");     // 60 -> 120 -> 240: as small as allowed
  EXPECT_EQ(t(3072, 512), "64x64/4x4");    // 384 workgroups: kept
  EXPECT_EQ(t(576, 4096), "64x64/4x4");    // 576
  EXPECT_EQ(t(576, 512, true), "64x32/4x4");  // features fixed: only tokens halve
  EXPECT_EQ(t(16, 9), "32x32/4x4");         // never below 32
  EXPECT_EQ(shrink_tile(MatmulTile{64, 64, 8, 8}, false, false, 576, 512, 0).str(), "64x64/8x8");  // 0: never
}

// matmul_tile_classes() holds every tile matmul_tile() picks for any matrix and prompt length (the
// warm-up compiles these for each tiled variant: runtime/warmup.h), with and without a fixed side.
// Software adapters: one class; hardware adapters (the H200): 64x64, 32x64, 32x32.
TEST(MatmulTiled, TileClassesHoldEveryTileAnyShapePicks) {
  GpuEnv& e = env();
  for (uint32_t fixed_n : {0u, 64u}) {
    KernelOptions ko;
    ko.matmul_tile_n = fixed_n;
    OpContext o = e.op(ko);
    std::set<std::string> classes;
    for (const MatmulTile& c : matmul_tile_classes(o, false)) classes.insert(c.str());
    std::set<std::string> picked;
    for (uint32_t N : {64u, 576u, 960u, 1536u, 2048u, 3072u, 8960u, 17920u, 151936u})
      for (uint32_t T = 9; T <= 4096; T += T < 128 ? 7 : 61) picked.insert(matmul_tile(o, false, N, T).str());
    for (const std::string& p : picked) EXPECT_TRUE(classes.count(p)) << p << " (tile n " << fixed_n << ") is not a class";
    EXPECT_EQ(classes.size(), e.ctx->info().is_software() ? 1u : fixed_n ? 2u : 3u);
  }
}
