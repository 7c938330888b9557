// The cooperative-matrix prefill matmul (kernels/matmul_coop.h, --matmul-coop) on a device created with
// cooperative matrices; skipped where the device has none (CI's lavapipe; wgpu-native refusing the
// experimental feature): the skip message says which. At awkward sizes (N, K, T not multiples of the
// tile), every weight format the tiled loads read, ADD on and off, offsets and strides as the models use:
//   - the product against ref::matmul on the weights and activations rounded to f16 (the kernel's
//     exact operands): equal up to f32 summation order (1e-4 of the output range; the GPU's f32 decode
//     of a weight may round to the neighbouring f16 of the CPU's);
//   - against ref::matmul in f32 within the f16 rounding of the operands, and not bit-equal to the f32
//     tiled kernel (the matrix units really ran);
//   - tiles give identical bits; nothing outside the output rows is written.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/half.h"
#include "formats/dtype.h"
#include "kernels/kernel_test_env.h"
#include "kernels/matmul_coop.h"
#include "kernels/matmul_tiled.h"
#include "kernels/ref.h"

using namespace wgllm;
using namespace wgllm::kernels;
using namespace wgllm::kernels::testing;

namespace {

// A device asked for cooperative matrices (the shared test env's device is not).
GpuEnv& cenv() {
  static GpuEnv e([] {
    gpu::ContextOptions co;
    co.want_coop_matrix = true;
    return co;
  }());
  return e;
}

// Skips the test (naming why) unless the device runs matmul_coop.
#define REQUIRE_COOP()                                                                                       \
  do {                                                                                                       \
    auto& e_ = cenv();                                                                                       \
    if (!e_.ctx->coop_matrix_f16())                                                                          \
      GTEST_SKIP() << "no 16x16x16 f16 cooperative matrices on " << e_.ctx->info().name << " ("             \
                   << e_.ctx->coop_matrix_status() << ")";                                                   \
  } while (0)

float f16r(float v) { return f16_to_f32(f32_to_f16(v)); }

struct Case {
  DType t;
  uint32_t K, N, T;
  bool add;
};
std::string what(const Case& c) {
  return dtype_name(c.t) + " K=" + std::to_string(c.K) + " N=" + std::to_string(c.N) + " T=" + std::to_string(c.T) +
         " add=" + std::to_string(c.add);
}

struct Result {
  float err_twin = 0, err_f32 = 0;  // relative to max |ref|
  std::vector<float> y, y_tiled;     // matmul_coop's output; the f32 tiled kernel's
};

// W (type t, N x K) times T rows of x (offset 4, stride K + 4) into y (offset 2, stride N + 3, random
// prior contents) through kernels::matmul with the tiled kernel, coop on (tile n x t) and off.
Result run_case(const Case& c, uint32_t tile_n = 0, uint32_t tile_t = 0) {
  auto& e = cenv();
  auto blocks = random_blocks(c.t, c.K, c.N, c.K * 31 + c.N * 7 + c.T);
  ref::Matrix M{c.K, c.N, std::vector<float>(size_t(c.K) * c.N)};
  dequantize(c.t, blocks.data(), M.w.data(), uint64_t(c.K) * c.N);
  auto W = upload_weight(*e.ctx, pack_weight(c.t, blocks.data(), c.K, c.N), "w");
  const uint32_t xs = c.K + 4, ys = c.N + 3, yo = 2;
  auto x = randn(size_t(c.T) * xs + 4, c.T + c.K);
  auto y0 = randn(size_t(c.T) * ys + yo + 5, c.N);
  Result r;
  for (int coop = 1; coop >= 0; --coop) {
    KernelOptions ko;
    ko.matmul_tiled = 1;
    ko.matmul_int8 = 0;
    ko.matmul_coop = coop == 1;
    ko.matmul_coop_tile_n = tile_n;
    ko.matmul_coop_tile_t = tile_t;
    auto xb = e.upload(x), yb = e.upload(y0);
    OpContext o{*e.ctx, e.cache, e.rec, ko};
    EXPECT_EQ(matmul_coop_used(o, W), coop == 1);
    e.rec.begin();
    matmul(o, W, {xb, 4}, xs, {yb, yo}, ys, c.T, c.add);
    e.rec.submit();
    (coop ? r.y : r.y_tiled) = e.download<float>(yb, y0.size());
  }
  // The kernel's operands: weights and activations rounded to f16.
  ref::Matrix Mh = M;
  for (auto& v : Mh.w) v = f16r(v);
  std::vector<float> xh = x;
  for (auto& v : xh) v = f16r(v);
  std::vector<float> want_twin = y0, want = y0;
  ref::matmul(Mh, xh.data() + 4, xs, want_twin.data() + yo, ys, c.T, c.add);
  ref::matmul(M, x.data() + 4, xs, want.data() + yo, ys, c.T, c.add);
  const OutputErrors oe = output_errors(r.y, want_twin, want, y0);
  for (size_t i : oe.changed) ADD_FAILURE() << what(c) << ": element " << i << " outside the output changed";
  r.err_twin = oe.twin;
  r.err_f32 = oe.f32;
  return r;
}

constexpr float kTolTwin = 1e-4f;
// f16 operands: each product off by ~2^-11 relative, summed over K with random signs: ~1e-3 of the
// largest output at these sizes.
constexpr float kTolF16 = 1e-2f;

}  // namespace

TEST(MatmulCoop, MatchesTheF16RoundedReferenceInEveryFormat) {
  REQUIRE_COOP();
  const Case cases[] = {
      {DType::Q4_K, 512, 200, 77, false}, {DType::Q4_K, 256, 64, 64, true},  {DType::Q6_K, 512, 96, 45, true},
      {DType::Q8_0, 160, 130, 33, false}, {DType::Q4_0, 96, 70, 100, true},   {DType::Q4_1, 64, 48, 9, false},
      {DType::F32, 100, 36, 21, true},    {DType::Q4_K, 2048, 320, 130, false},
  };
  for (const Case& c : cases) {
    const Result r = run_case(c);
    EXPECT_LE(r.err_twin, kTolTwin) << what(c);
    EXPECT_LE(r.err_f32, kTolF16) << what(c);
    EXPECT_NE(0, std::memcmp(r.y.data(), r.y_tiled.data(), r.y.size() * 4)) << what(c) << ": same bits as the f32 kernel";
  }
}

TEST(MatmulCoop, TilesGiveTheSameBits) {
  REQUIRE_COOP();
  const Case c{DType::Q4_K, 512, 200, 77, true};
  const Result base = run_case(c);
  for (auto [n, t] : {std::pair{32u, 32u}, {128u, 64u}, {64u, 128u}, {32u, 96u}}) {
    const Result r = run_case(c, n, t);
    EXPECT_EQ(0, std::memcmp(r.y.data(), base.y.data(), r.y.size() * 4)) << "tile " << n << "x" << t;
  }
}

TEST(MatmulCoop, InvalidTilesAreErrors) {
  REQUIRE_COOP();
  auto& e = cenv();
  for (auto [n, t] : {std::pair{48u, 64u}, {64u, 16u}, {256u, 256u}}) {
    KernelOptions ko;
    ko.matmul_coop_tile_n = n;
    ko.matmul_coop_tile_t = t;
    EXPECT_THROW(coop_tile(OpContext{*e.ctx, e.cache, e.rec, ko}), Error) << n << "x" << t;
  }
}

// Without the wish the device has no cooperative matrices, and the switch leaves the other kernels.
TEST(MatmulCoop, OffWithoutTheDeviceFeature) {
  auto& e = env();
  auto blocks = random_blocks(DType::Q4_K, 256, 8, 3);
  auto W = upload_weight(*e.ctx, pack_weight(DType::Q4_K, blocks.data(), 256, 8), "w");
  KernelOptions ko;
  EXPECT_FALSE(ko.matmul_coop);
  ko.matmul_coop = true;
  OpContext o = e.op(ko);
  EXPECT_FALSE(e.ctx->coop_matrix_f16());
  EXPECT_FALSE(matmul_coop_used(o, W));
}

// The generated source has one accumulator, load and product per fragment.
TEST(MatmulCoop, SourceHasEveryFragment) {
  for (auto [fn, ft] : {std::pair{2u, 2u}, {1u, 1u}, {2u, 1u}}) {
    CoopTile t;
    t.fn = fn;
    t.ft = ft;
    const std::string s = coop_source(t, 32);
    auto count = [&](const std::string& w) {
      size_t n = 0;
      for (size_t p = s.find(w); p != std::string::npos; p = s.find(w, p + 1)) ++n;
      return n;
    };
    EXPECT_EQ(count("coopMultiplyAdd("), fn * ft);
    EXPECT_EQ(count("coopLoad<"), ft);
    EXPECT_EQ(count("coopLoadT<"), fn);
    EXPECT_EQ(count("coopStoreT("), fn * ft);
    EXPECT_EQ(s.find("/*COOP_"), std::string::npos);
  }
}
