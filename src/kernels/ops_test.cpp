// Every GPU op against its CPU twin (kernels/ref.h) on seeded random inputs at awkward sizes.
// Tolerances are relative to the magnitude of the terms summed (floating-point order differs).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/error.h"
#include "core/half.h"
#include "formats/dtype.h"
#include "kernels/ops.h"
#include "kernels/ref.h"
#include "kernels/rope_table.h"
#include "kernels/kernel_test_env.h"

using namespace wgllm;
using namespace wgllm::kernels;
using namespace wgllm::kernels::testing;

namespace {

void expect_close(const std::vector<float>& got, const std::vector<float>& want, float rel, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  float mx = 0;
  for (float v : want) mx = std::max(mx, std::fabs(v));
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::fabs(got[i] - want[i]) <= rel * mx + 1e-6f)) {
      if (++bad < 5) ADD_FAILURE() << what << " [" << i << "] gpu " << got[i] << " cpu " << want[i];
    }
  }
  EXPECT_EQ(bad, 0u) << what;
}

}  // namespace

class MatmulTest : public ::testing::TestWithParam<DType> {};

TEST_P(MatmulTest, MatchesCpuReference) {
  const DType t = GetParam();
  auto& e = env();
  const bool kq = dtype_block_elems(t) == 256;
  for (uint32_t K : {kq ? 256u : 96u, 512u}) {
    for (uint32_t N : {1u, 7u, 37u}) {
      for (uint32_t T : {1u, 5u, 17u}) {
        for (bool acc : {false, true}) {
          auto blocks = random_blocks(t, K, N, K * 31 + N * 7 + T);
          ref::Matrix M{K, N, std::vector<float>(size_t(K) * N)};
          dequantize(t, blocks.data(), M.w.data(), uint64_t(K) * N);
          auto W = upload_weight(*e.ctx, pack_weight(t, blocks.data(), K, N), "w");
          const uint32_t xs = K + 4, ys = N + 3;  // strides larger than rows, as in the model
          auto x = randn(size_t(T) * xs + 4, T + K);
          auto y0 = randn(size_t(T) * ys + 2, N);
          std::vector<float> want = y0;
          ref::matmul(M, x.data() + 4, xs, want.data() + 2, ys, T, acc);
          auto xb = e.upload(x), yb = e.upload(y0);
          auto o = e.op();
          e.rec.begin();
          matmul(o, W, {xb, 4}, xs, {yb, 2}, ys, T, acc);
          e.rec.submit();
          expect_close(e.download(yb, y0.size()), want, 2e-5f,
                       dtype_name(t) + " K=" + std::to_string(K) + " N=" + std::to_string(N) +
                           " T=" + std::to_string(T) + " acc=" + std::to_string(acc));
        }
      }
    }
  }
}
INSTANTIATE_TEST_SUITE_P(AllTypes, MatmulTest,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1,
                                           DType::Q8_0, DType::Q4_K, DType::Q6_K),
                         [](const auto& i) { return dtype_name(i.param); });

// The matrix-vector kernel (matvec.wgsl, KernelOptions::matvec_subgroup) for T <= 8, with the
// subgroup reduction (where the adapter has subgroups) and the workgroup-memory tree: CPU parity at
// awkward sizes (fewer blocks than lanes, odd block counts for the two-sum loop's tail, rows not
// filling the last workgroup) and the same bits on a second run.
class MatvecTest : public ::testing::TestWithParam<DType> {};

TEST_P(MatvecTest, MatchesCpuReferenceAndIsDeterministic) {
  const DType t = GetParam();
  auto& e = env();
  const bool kq = dtype_block_elems(t) == 256;
  for (uint32_t K : {kq ? 256u : 96u, kq ? 768u : 800u}) {
    for (uint32_t N : {1u, 37u}) {
      for (uint32_t T : {1u, 5u}) {
        auto blocks = random_blocks(t, K, N, K * 13 + N * 3 + T);
        ref::Matrix M{K, N, std::vector<float>(size_t(K) * N)};
        dequantize(t, blocks.data(), M.w.data(), uint64_t(K) * N);
        auto W = upload_weight(*e.ctx, pack_weight(t, blocks.data(), K, N), "w");
        const uint32_t xs = K + 4, ys = N + 3;
        auto x = randn(size_t(T) * xs + 4, T + K);
        auto y0 = randn(size_t(T) * ys + 2, N);
        auto xb = e.upload(x);
        for (bool sg_ops : {true, false}) {
          for (bool acc : {false, true}) {
            std::vector<float> want = y0;
            ref::matmul(M, x.data() + 4, xs, want.data() + 2, ys, T, acc);
            KernelOptions ko;
            ko.matvec_subgroup = 1, ko.matvec_subgroup_ops = sg_ops;
            std::vector<std::vector<float>> runs;
            for (int rep = 0; rep < 2; ++rep) {
              auto yb = e.upload(y0);
              auto o = e.op(ko);
              e.rec.begin();
              matmul(o, W, {xb, 4}, xs, {yb, 2}, ys, T, acc);
              e.rec.submit();
              runs.push_back(e.download(yb, y0.size()));
            }
            const std::string what = dtype_name(t) + " K=" + std::to_string(K) + " N=" + std::to_string(N) +
                                     " T=" + std::to_string(T) + " acc=" + std::to_string(acc) +
                                     " subgroup_ops=" + std::to_string(sg_ops);
            expect_close(runs[0], want, 2e-5f, what);
            EXPECT_EQ(std::memcmp(runs[0].data(), runs[1].data(), runs[0].size() * 4), 0) << what << " run to run";
          }
        }
      }
    }
  }
}
INSTANTIATE_TEST_SUITE_P(AllTypes, MatvecTest,
                         ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1,
                                           DType::Q8_0, DType::Q4_K, DType::Q6_K),
                         [](const auto& i) { return dtype_name(i.param); });

// --matvec-rows-wide / --matvec-rows-tall set the rows per workgroup of their class only (rows of
// >= 192 blocks; >= 8192 rows; never an output head of >= 32768 rows), --matvec-rows wins, and the
// output bits stay those of the shape rule. Checked to fail: the class rows applied to output heads.
TEST(Ops, MatvecRowsByClass) {
  auto& e = env();
  struct Case { uint32_t K, N; bool wide, tall; };
  for (const Case c : {Case{6144, 37, true, false}, Case{64, 8192, false, true}, Case{64, 40000, false, false},
                       Case{128, 300, false, false}}) {
    auto blocks = random_blocks(DType::Q4_0, c.K, c.N, c.K + c.N);
    auto W = upload_weight(*e.ctx, pack_weight(DType::Q4_0, blocks.data(), c.K, c.N), "w");
    auto x = randn(c.K, 3);
    auto xb = e.upload(x);
    const std::string what = "K=" + std::to_string(c.K) + " N=" + std::to_string(c.N);
    std::vector<std::vector<float>> got;
    for (int arm = 0; arm < 3; ++arm) {
      KernelOptions ko;
      ko.matvec_subgroup = 1;
      const uint32_t base = matvec_shape(e.op(ko), W, 1).rows;
      if (arm >= 1) ko.matvec_rows_wide = 6, ko.matvec_rows_tall = 20;  // 6 x 128 lanes fit 1024 invocations
      if (arm == 2) ko.matvec_rows_per_workgroup = 4;
      auto o = e.op(ko);
      const uint32_t rows = matvec_shape(o, W, 1).rows, rpt = matvec_shape(o, W, 1).rows_per_thread;
      const uint32_t want = arm == 0 ? base : arm == 2 ? 4 : c.wide ? 6 : c.tall ? 20 : base;
      EXPECT_EQ(rows, (want + rpt - 1) / rpt * rpt) << what << " arm " << arm;
      auto yb = e.upload(std::vector<float>(c.N));
      e.rec.begin();
      matmul(o, W, {xb, 0}, c.K, {yb, 0}, c.N, 1, false);
      e.rec.submit();
      got.push_back(e.download(yb, c.N));
    }
    EXPECT_EQ(got[0], got[1]) << what;
    EXPECT_EQ(got[0], got[2]) << what;
  }
}

// --matvec-lanes-short, -tall and -wide set the lanes of their class only (none of them an output head;
// wide: rows of >= 192 blocks; tall: >= 8192 rows of fewer; short: the rest); below the
// subgroup size (lavapipe: 8, so 4 lanes there) the row sums take the workgroup-memory tree; the
// result matches the CPU reference as every lane count does (the order of a row's sums changes, so
// no bit identity), down to 1 and 2 lanes (fewer than the rows a thread may sum: those come down to
// the lanes, also when set, so every row is written). --matvec-lanes wins over them. Checked to fail:
// the tall/short bound moved from 8192 to 256 rows; the rows per thread left above the lanes.
TEST(Ops, MatvecLanesByClass) {
  auto& e = env();
  enum Class { Head, Short, Tall, Wide };
  struct Case { uint32_t K, N; Class c; };
  for (const Case c : {Case{1536, 8192, Tall}, Case{1536, 300, Short}, Case{6144, 8192, Wide}, Case{6144, 37, Wide},
                       Case{64, 40000, Head}}) {
    auto blocks = random_blocks(DType::Q4_0, c.K, c.N, c.K + c.N);
    auto W = upload_weight(*e.ctx, pack_weight(DType::Q4_0, blocks.data(), c.K, c.N), "w");
    auto x = randn(c.K, 5);
    auto xb = e.upload(x);
    const std::string what = "K=" + std::to_string(c.K) + " N=" + std::to_string(c.N);
    ref::Matrix M{c.K, c.N, std::vector<float>(size_t(c.K) * c.N)};
    dequantize(DType::Q4_0, blocks.data(), M.w.data(), M.w.size());
    std::vector<float> want(c.N);
    ref::matmul(M, x.data(), c.K, want.data(), c.N, 1, false);
    KernelOptions base;
    base.matvec_subgroup = 1;
    const MatvecShape b = matvec_shape(e.op(base), W, 1);
    const uint32_t hi = e.ctx->has_subgroups() ? e.ctx->measured_subgroup_sizes().second : 0u;
    for (Class which : {Short, Tall, Wide}) {
      for (uint32_t lanes : {1u, 2u, 4u, 16u, 64u}) {
        const std::string at = what + (which == Short ? " short " : which == Tall ? " tall " : " wide ") + std::to_string(lanes);
        KernelOptions ko = base;
        (which == Short ? ko.matvec_lanes_short : which == Tall ? ko.matvec_lanes_tall : ko.matvec_lanes_wide) = lanes;
        auto o = e.op(ko);
        const MatvecShape sh = matvec_shape(o, W, 1);
        EXPECT_EQ(sh.lanes, c.c == which ? lanes : b.lanes) << at;
        if (c.c == which && lanes < hi) {
          EXPECT_FALSE(sh.subgroup) << at;
        }
        ko.matvec_lanes = 8;  // wins (raised to the subgroup size where subgroupAdd reduces)
        // (the base shape, f32 activations and no class setting, shows whether subgroupAdd is available)
        EXPECT_EQ(matvec_shape(e.op(ko), W, 1).lanes, b.subgroup ? std::max(8u, hi) : 8u) << at;
        ko.matvec_lanes = 0;
        // Rows per thread: at most the lanes, also when set (4) above them; then every row is written.
        for (uint32_t rpt : {0u, 4u}) {
          ko.matvec_rows_per_thread = rpt;
          auto o2 = e.op(ko);
          const MatvecShape s2 = matvec_shape(o2, W, 1);
          EXPECT_LE(s2.rows_per_thread, s2.lanes) << at;
          if (rpt) {
            EXPECT_EQ(s2.rows_per_thread, std::min(4u, s2.lanes)) << at;
          }
          auto yb = e.upload(std::vector<float>(c.N, -7.0f));
          e.rec.begin();
          matmul(o2, W, {xb, 0}, c.K, {yb, 0}, c.N, 1, false);
          e.rec.submit();
          const auto y = e.download(yb, c.N);
          for (uint32_t i = 0; i < c.N; ++i)
            ASSERT_NEAR(y[i], want[i], 1e-3f * (1.0f + std::fabs(want[i]))) << at << " rpt " << rpt << " row " << i;
        }
      }
    }
  }
}

// The tall class's default on hardware GPUs with int8 activations: rows of 48 blocks (16 x an odd
// number) on 16 lanes, reduced by the tree below a subgroup of 32, matching the CPU reference within
// the int8 activations' error; rows of 64 blocks keep the shape rule. Skips on software adapters
// (lavapipe: no int8 path there), so it runs on the device machine (tools/device/recipes/decode_head.sh
// part tests). Checked to fail (H100): none yet recorded.
TEST(Ops, MatvecLanesTallDefaultOnGpus) {
  auto& e = env();
  if (e.ctx->info().is_software()) GTEST_SKIP() << "int8 matvec runs on hardware adapters only";
  for (const uint32_t K : {1536u, 2048u}) {
    const uint32_t N = 8192;
    auto blocks = random_blocks(DType::Q4_K, K, N, K + 7);
    auto W = upload_weight(*e.ctx, pack_weight(DType::Q4_K, blocks.data(), K, N), "w");
    auto x = randn(K, 9);
    auto xb = e.upload(x);
    ref::Matrix M{K, N, std::vector<float>(size_t(K) * N)};
    dequantize(DType::Q4_K, blocks.data(), M.w.data(), M.w.size());
    std::vector<float> want(N);
    ref::matmul(M, x.data(), K, want.data(), N, 1, false);
    KernelOptions ko;
    ko.matvec_subgroup = 1, ko.matvec_int8 = 1;
    auto o = e.op(ko);
    ASSERT_TRUE(matvec_uses_int8(o, W));
    const MatvecShape sh = matvec_shape(o, W, 1);
    KernelOptions k32 = ko;
    k32.matvec_lanes_tall = 32;
    const uint32_t rule = matvec_shape(e.op(k32), W, 1).lanes;
    EXPECT_EQ(sh.lanes, K == 1536 ? 16u : rule) << "K " << K;
    const uint32_t hi = e.ctx->has_subgroups() ? e.ctx->measured_subgroup_sizes().second : 0u;
    if (K == 1536 && hi > 16) {
      EXPECT_FALSE(sh.subgroup);
    }
    auto yb = e.upload(std::vector<float>(N));
    e.rec.begin();
    matmul(o, W, {xb, 0}, K, {yb, 0}, N, 1, false);
    e.rec.submit();
    const auto y = e.download(yb, N);
    float amax = 0, emax = 0;
    for (uint32_t i = 0; i < N; ++i) amax = std::max(amax, std::fabs(want[i])), emax = std::max(emax, std::fabs(y[i] - want[i]));
    EXPECT_LT(emax, 0.02f * amax) << "K " << K << ": int8 activations' error against the f32 reference";
  }
}

// Q6_K in its own 6-bit layout (FMT_Q6_K, ModelOptions::q6k_packed) and widened (FMT_Q8_F32) holds
// the same integers q - 32 and the same f32 scales: every kernel that reads weights must give the
// same bits from both. The matrix-vector kernel with f32 and int8 activations (with the prefetch),
// the generic matmul, the tiled prefill matmul (f32 and f16 tiles where the adapter has f16) and
// its int8 form, and the embedding lookup; K = 768 (3 super-blocks), N = 37 rows.
// Checked to fail: the high 2 bits of elements 8..11 taken from bits 2..3 of the high word; d's
// subnormals flushed to zero.
TEST(Ops, Q6KPackedBitIdenticalToWidened) {
  auto& e = env();
  const uint32_t K = 768, N = 37;
  auto blocks = random_blocks(DType::Q6_K, K, N, 5);
  // Real files' d is often an f16 subnormal (below 6.1e-5): every third super-block gets one, of
  // either sign (the widened layout's scales are formed exactly on the host).
  const uint16_t sub[3] = {0x0155, 0x83ff, 0x0001};
  for (size_t s = 0; s < blocks.size() / 210; s += 3) std::memcpy(&blocks[s * 210 + 208], &sub[s / 3 % 3], 2);
  auto Wp = upload_weight(*e.ctx, pack_weight(DType::Q6_K, blocks.data(), K, N, true), "q6k");
  auto Ww = upload_weight(*e.ctx, pack_weight(DType::Q6_K, blocks.data(), K, N, false), "q8f32");
  ASSERT_EQ(Wp.fmt, WFormat::Q6_K);
  ASSERT_EQ(Ww.fmt, WFormat::Q8_F32);
  EXPECT_EQ(Wp.bytes(), uint64_t(K) * N / 256 * 210 + uint64_t(K) * N / 256 * 2);  // the file's bytes + 2 per super-block
  ref::Matrix M{K, N, std::vector<float>(size_t(K) * N)};
  dequantize(DType::Q6_K, blocks.data(), M.w.data(), M.w.size());
  struct Path { std::string name; uint32_t T; KernelOptions ko; };
  std::vector<Path> paths;
  KernelOptions k;
  k.matvec_int8 = 0;
  paths.push_back({"matvec f32", 1, k});
  paths.push_back({"matvec f32 T=5", 5, k});
  k.matvec_int8 = 1;
  paths.push_back({"matvec int8", 1, k});
  k.matvec_prefetch = true;
  paths.push_back({"matvec int8 prefetch T=3", 3, k});
  k = KernelOptions{};
  k.matmul_tiled = 0, k.matmul_int8 = 0;
  paths.push_back({"matmul", 20, k});
  k.matmul_tiled = 1, k.matmul_tiled_min_workgroups = 0;
  paths.push_back({"tiled", 40, k});
  k.matmul_tiled_f16 = true;
  paths.push_back({"tiled f16", 40, k});
  k.matmul_tiled_f16 = false, k.matmul_int8 = 1;
  paths.push_back({"tiled int8", 40, k});
  for (const Path& pa : paths) {
    auto x = randn(size_t(pa.T) * K, pa.T);
    auto xb = e.upload(x);
    std::vector<std::vector<float>> got;
    for (const GpuWeight* W : {&Wp, &Ww}) {
      auto yb = e.upload(std::vector<float>(size_t(pa.T) * N));
      auto o = e.op(pa.ko);
      e.rec.begin();
      matmul(o, *W, {xb, 0}, K, {yb, 0}, N, pa.T, false);
      e.rec.submit();
      got.push_back(e.download(yb, size_t(pa.T) * N));
    }
    std::vector<float> want(size_t(pa.T) * N);
    ref::matmul(M, x.data(), K, want.data(), N, pa.T, false);
    expect_close(got[0], want, 0.05f, pa.name);  // int8 activations and f16 tiles round: a sanity bound
    EXPECT_EQ(std::memcmp(got[0].data(), got[1].data(), got[0].size() * 4), 0) << pa.name << ": packed != widened";
  }
  const std::vector<uint32_t> ids{0, 36, 5, 17};
  gpu::Buffer tb(*e.ctx, ids.size() * 4, gpu::BufferKind::Storage, "ids");
  tb.write(*e.ctx, 0, ids.data(), ids.size() * 4);
  std::vector<std::vector<float>> rows;
  for (const GpuWeight* W : {&Wp, &Ww}) {
    auto yb = e.upload(std::vector<float>(ids.size() * K));
    auto o = e.op();
    e.rec.begin();
    embed(o, *W, tb, uint32_t(ids.size()), {yb, 0});
    e.rec.submit();
    rows.push_back(e.download(yb, ids.size() * K));
  }
  for (size_t t = 0; t < ids.size(); ++t)
    for (uint32_t i = 0; i < K; ++i) ASSERT_EQ(rows[0][t * K + i], M.w[size_t(ids[t]) * K + i]) << "embed row " << ids[t];
  EXPECT_EQ(rows[0], rows[1]);
}

// matvec.wgsl's rows per workgroup and rows per thread are speed knobs: every row keeps its own
// sums in the same order, so the output bits must not change (N = 37 leaves the last workgroup
// partly empty; 16- and 32-element blocks; the subgroup reduction and the tree; accumulate).
TEST(Ops, MatvecShapeKnobsAreBitExact) {
  auto& e = env();
  const uint32_t K = 768, N = 37, T = 3;
  for (DType t : {DType::Q4_K, DType::Q6_K}) {
    auto blocks = random_blocks(t, K, N, 11);
    auto W = upload_weight(*e.ctx, pack_weight(t, blocks.data(), K, N), "w");
    auto x = randn(size_t(T) * K, 7);
    auto y0 = randn(size_t(T) * N, 8);
    auto xb = e.upload(x);
    for (bool sg_ops : {true, false}) {
      std::vector<float> base;
      for (auto [rows, rpt] : {std::pair{4u, 1u}, {6u, 2u}, {8u, 4u}, {4u, 4u}}) {
        KernelOptions ko;
        ko.matvec_subgroup = 1, ko.matvec_subgroup_ops = sg_ops;
        ko.matvec_rows_per_workgroup = rows, ko.matvec_rows_per_thread = rpt;
        auto o = e.op(ko);
        ASSERT_EQ(matvec_shape(o, W).rows_per_thread, rpt);
        auto yb = e.upload(y0);
        e.rec.begin();
        matmul(o, W, {xb, 0}, K, {yb, 0}, N, T, true);
        e.rec.submit();
        auto y = e.download(yb, y0.size());
        const std::string what = dtype_name(t) + " rows=" + std::to_string(rows) + " rpt=" + std::to_string(rpt) +
                                 " subgroup_ops=" + std::to_string(sg_ops);
        if (base.empty()) {
          base = y;
          EXPECT_NE(std::memcmp(y.data(), y0.data(), y.size() * 4), 0) << what << ": nothing written";
        } else {
          EXPECT_EQ(std::memcmp(y.data(), base.data(), y.size() * 4), 0) << what << " vs rows=4 rpt=1";
        }
      }
    }
  }
  auto bw = random_blocks(DType::Q4_K, K, N, 12);
  auto Wb = upload_weight(*e.ctx, pack_weight(DType::Q4_K, bw.data(), K, N), "w");
  KernelOptions bad;
  bad.matvec_subgroup = 1, bad.matvec_rows_per_workgroup = 6, bad.matvec_rows_per_thread = 4;
  auto o = e.op(bad);
  EXPECT_EQ(matvec_shape(o, Wb).rows, 8u) << "rows round up to whole row groups";
  bad.matvec_rows_per_workgroup = 0, bad.matvec_rows_per_thread = 3;
  auto o3 = e.op(bad);
  EXPECT_THROW(matvec_shape(o3, Wb), Error);
}

// --matvec-prefetch (PF, int8 activations): the first weight blocks are loaded before the prologue;
// same blocks, same expressions, same order, so the output bits must not change. K = 768: 24
// blocks of 32 (48 of 16 for Q6_K): several per lane at 8 lanes, one lone block per lane (or none)
// at 64 lanes; rows per thread 1, 2, 4; plain and SiLU prologue; 1 and 3 tokens.
// Checked to fail: adding the prefetched odd block into the even sum (o0 -> e0) fails every type.
TEST(Ops, MatvecPrefetchIsBitExact) {
  auto& e = env();
  const uint32_t K = 768, N = 37;
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q4_K, DType::Q8_0, DType::Q6_K}) {
    auto blocks = random_blocks(t, K, N, 41);
    auto W = upload_weight(*e.ctx, pack_weight(t, blocks.data(), K, N), "w");
    for (uint32_t T : {1u, 3u}) {
      auto xb = e.upload(randn(size_t(T) * 2 * K, 42));
      for (auto [lanes, rpt] : {std::pair{8u, 1u}, {8u, 4u}, {64u, 2u}}) {
        for (bool silu : {false, true}) {
          std::vector<float> out[2];
          for (int pf = 0; pf < 2; ++pf) {
            KernelOptions ko;
            ko.matvec_subgroup = 1, ko.matvec_int8 = 1, ko.matvec_prefetch = pf;
            ko.matvec_lanes = lanes, ko.matvec_rows_per_thread = rpt;
            auto o = e.op(ko);
            ASSERT_TRUE(matvec_uses_int8(o, W));
            auto yb = e.upload(std::vector<float>(size_t(T) * N));
            e.rec.begin();
            if (silu) matmul_silu(o, W, xb, 0, K, 2 * K, {yb, 0}, N, T, false);
            else matmul(o, W, {xb, 0}, 2 * K, {yb, 0}, N, T, false);
            e.rec.submit();
            out[pf] = e.download(yb, size_t(T) * N);
          }
          EXPECT_EQ(std::memcmp(out[0].data(), out[1].data(), out[0].size() * 4), 0)
              << dtype_name(t) << " T=" << T << " lanes=" << lanes << " rpt=" << rpt << " silu=" << silu;
        }
      }
    }
  }
}

// --dequant-magic: integer quants to f32 through the 2^23 mantissa trick give the same bits as
// int->float conversions, in the decode kernel (matvec) and the per-row matmul, for every format.
TEST(Ops, DequantMagicIsBitExact) {
  auto& e = env();
  const uint32_t K = 512, N = 19;
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q4_K, DType::Q8_0, DType::Q6_K}) {
    auto blocks = random_blocks(t, K, N, 21);
    auto W = upload_weight(*e.ctx, pack_weight(t, blocks.data(), K, N), "w");
    for (uint32_t T : {1u, 9u}) {  // 1: matvec.wgsl; 9: matmul (tiled or per row)
      auto xb = e.upload(randn(size_t(T) * K, 5));
      std::vector<float> out[2];
      for (int magic = 0; magic < 2; ++magic) {
        KernelOptions ko;
        ko.dequant_magic = magic;
        auto o = e.op(ko);
        auto yb = e.upload(std::vector<float>(size_t(T) * N));
        e.rec.begin();
        matmul(o, W, {xb, 0}, K, {yb, 0}, N, T, false);
        e.rec.submit();
        out[magic] = e.download(yb, size_t(T) * N);
      }
      EXPECT_EQ(std::memcmp(out[0].data(), out[1].data(), out[0].size() * 4), 0) << dtype_name(t) << " T=" << T;
    }
  }
}

// --matvec-int8: activations rounded to int8 per weight block (d = max|x| / 127), products summed
// exactly in i32. Bound per output: the sum over blocks of d / 2 * sum |w| (the rounding of each
// activation is at most d / 2), plus f32 rounding (1e-5 of sum |w x|). Checked against the f64
// product of the dequantized weights, which any error in nibble order, scales or mins exceeds.
TEST(Ops, MatvecInt8WithinQuantizationBound) {
  auto& e = env();
  const uint32_t K = 768, N = 37;
  for (DType t : {DType::Q4_0, DType::Q4_1, DType::Q4_K, DType::Q8_0, DType::Q6_K}) {
    auto blocks = random_blocks(t, K, N, 31);
    auto W = upload_weight(*e.ctx, pack_weight(t, blocks.data(), K, N), "w");
    std::vector<float> wf(size_t(K) * N);
    dequantize(t, blocks.data(), wf.data(), wf.size());
    for (uint32_t T : {1u, 3u}) {
      for (const char* pro : {"none", "silu"}) {
        const bool silu = std::string(pro) == "silu";
        const uint32_t xs = silu ? 2 * K : K;
        auto x = randn(size_t(T) * xs, 6);
        auto xb = e.upload(x);
        KernelOptions ko;
        ko.matvec_subgroup = 1, ko.matvec_int8 = 1;
        auto o = e.op(ko);
        auto yb = e.upload(std::vector<float>(size_t(T) * N));
        e.rec.begin();
        if (silu) matmul_silu(o, W, xb, 0, K, xs, {yb, 0}, N, T, false);
        else matmul(o, W, {xb, 0}, K, {yb, 0}, N, T, false);
        e.rec.submit();
        auto y = e.download(yb, size_t(T) * N);
        {  // the int8 path ran: its bits differ from the f32 path's
          KernelOptions kf;
          kf.matvec_subgroup = 1, kf.matvec_int8 = 0;
          auto of = e.op(kf);
          auto yf = e.upload(std::vector<float>(size_t(T) * N));
          e.rec.begin();
          if (silu) matmul_silu(of, W, xb, 0, K, xs, {yf, 0}, N, T, false);
          else matmul(of, W, {xb, 0}, K, {yf, 0}, N, T, false);
          e.rec.submit();
          EXPECT_NE(std::memcmp(e.download(yf, y.size()).data(), y.data(), y.size() * 4), 0) << dtype_name(t) << " " << pro;
        }
        const uint32_t be = t == DType::Q6_K ? 16 : 32;  // the GPU layout's block (activation block)
        for (uint32_t tt = 0; tt < T; ++tt) {
          std::vector<double> a(K);
          for (uint32_t k = 0; k < K; ++k) {
            const double g = x[size_t(tt) * xs + k];
            a[k] = silu ? float(float(g) / (1.0f + std::exp(-float(g)))) * x[size_t(tt) * xs + K + k] : g;
          }
          for (uint32_t n = 0; n < N; ++n) {
            double ref = 0, bound = 0, mag = 0;
            for (uint32_t b0 = 0; b0 < K; b0 += be) {
              double amax = 0, wabs = 0;
              for (uint32_t k = b0; k < b0 + be; ++k) {
                const double w = wf[size_t(n) * K + k];
                ref += w * a[k], mag += std::fabs(w * a[k]), wabs += std::fabs(w);
                amax = std::max(amax, std::fabs(a[k]));
              }
              bound += amax / 127.0 / 2.0 * wabs;
            }
            bound = bound * 1.001 + 1e-5 * mag + 1e-6;
            EXPECT_LE(std::fabs(y[size_t(tt) * N + n] - ref), bound)
                << dtype_name(t) << " T=" << T << " " << pro << " t=" << tt << " n=" << n << " ref " << ref;
          }
        }
      }
    }
  }
}

TEST(Ops, MatmulSwitchesGiveSameResults) {
  // Grouping prefill tokens, vec4 loads, rows and lanes per workgroup only change speed.
  auto& e = env();
  const uint32_t K = 256, N = 19, T = 8;  // T > 8 takes matmul_tiled (matmul_tiled_test.cpp)
  auto blocks = random_blocks(DType::Q4_1, K, N, 5);
  auto W = upload_weight(*e.ctx, pack_weight(DType::Q4_1, blocks.data(), K, N), "w");
  auto x = randn(size_t(T) * K, 3);
  auto xb = e.upload(x);
  std::vector<std::vector<float>> outs;
  // (rows per workgroup, lanes per row, prefill tokens per workgroup, vec4 activations)
  auto mk = [](uint32_t rows, uint32_t lanes, uint32_t tt, bool vec4) {
    KernelOptions k;
    k.matmul_rows_per_workgroup = rows;
    k.matmul_lanes_per_row = lanes;
    k.prefill_tokens_per_workgroup = tt;
    k.vec4_activations = vec4;
    return k;
  };
  for (KernelOptions ko : {mk(4, 32, 8, true), mk(1, 64, 1, false), mk(8, 16, 4, true), mk(2, 32, 16, false),
                           mk(64, 1, 8, true), mk(16, 1, 1, false)}) {
    auto yb = e.upload(std::vector<float>(size_t(T) * N));
    auto o = e.op(ko);
    e.rec.begin();
    matmul(o, W, {xb, 0}, K, {yb, 0}, N, T, false);
    e.rec.submit();
    outs.push_back(e.download(yb, size_t(T) * N));
  }
  for (size_t i = 1; i < outs.size(); ++i) expect_close(outs[i], outs[0], 2e-5f, "variant " + std::to_string(i));
}

// One argmax() launch over x[off .. off + n) into a fresh buffer of argmax_buffer_bytes() whose id
// word starts at `junk`; returns the id read back.
uint32_t run_argmax(GpuEnv& e, OpContext& o, const gpu::Buffer& x, uint32_t off, uint32_t n, uint32_t junk = 0) {
  gpu::Buffer ob(*e.ctx, argmax_buffer_bytes(), gpu::BufferKind::Storage, "am");
  ob.write(*e.ctx, 0, &junk, 4);
  e.rec.begin();
  argmax(o, {x, off}, n, ob);
  uint32_t got = 0;
  e.rec.read_after(ob, 0, 4);
  e.rec.submit(&got);
  return got;
}

TEST(Ops, EmbedRmsnormSiluArgmax) {
  auto& e = env();
  const uint32_t K = 96, N = 50, T = 3;
  auto blocks = random_blocks(DType::Q8_0, K, N, 9);
  std::vector<float> table(size_t(K) * N);
  dequantize(DType::Q8_0, blocks.data(), table.data(), table.size());
  auto W = upload_weight(*e.ctx, pack_weight(DType::Q8_0, blocks.data(), K, N), "emb");
  std::vector<uint32_t> toks = {49, 0, 27};
  gpu::Buffer tb(*e.ctx, 12, gpu::BufferKind::Storage, "tok");
  tb.write(*e.ctx, 0, toks.data(), 12);
  auto yb = e.upload(std::vector<float>(size_t(T) * K));
  auto o = e.op();
  e.rec.begin();
  embed(o, W, tb, T, {yb, 0});
  e.rec.submit();
  auto got = e.download(yb, size_t(T) * K);
  for (uint32_t t = 0; t < T; ++t)
    for (uint32_t k = 0; k < K; ++k) ASSERT_EQ(got[t * K + k], table[toks[t] * K + k]);
  // The table in row blocks [0, 20), [20, 40), [40, 50) (a table over one storage binding), one
  // call each: every row written by the block holding its id, the same bits; rows of ids outside a
  // block untouched (sentinel).
  const uint64_t rb = dtype_row_bytes(DType::Q8_0, K);
  auto ys = e.upload(std::vector<float>(size_t(T) * K, -7.0f));
  std::vector<GpuWeight> parts;
  for (uint32_t r0 : {0u, 20u, 40u})
    parts.push_back(upload_weight(*e.ctx, pack_weight(DType::Q8_0, blocks.data() + r0 * rb, K, std::min(20u, N - r0)), "emb"));
  e.rec.begin();
  embed(o, parts[1], tb, T, {ys, 0}, 20);
  e.rec.submit();
  auto one = e.download(ys, size_t(T) * K);
  for (uint32_t t = 0; t < T; ++t)
    for (uint32_t k = 0; k < K; ++k)
      ASSERT_EQ(one[t * K + k], toks[t] >= 20 && toks[t] < 40 ? table[toks[t] * K + k] : -7.0f) << t << " " << k;
  e.rec.begin();
  embed(o, parts[0], tb, T, {ys, 0}, 0);
  embed(o, parts[2], tb, T, {ys, 0}, 40);
  e.rec.submit();
  ASSERT_EQ(e.download(ys, size_t(T) * K), got) << "the split table's rows differ from the whole table's";

  const uint32_t D = 577;  // not a multiple of the workgroup size
  auto x = randn(size_t(T) * D, 1, 3.0f), w = randn(D, 2);
  auto xb = e.upload(x), wb = e.upload(w), nb = e.upload(std::vector<float>(x.size()));
  e.rec.begin();
  rmsnorm(o, {xb, 0}, D, wb, {nb, 0}, D, T, D, 1e-5f);
  e.rec.submit();
  std::vector<float> want(x.size());
  for (uint32_t t = 0; t < T; ++t) ref::rmsnorm(x.data() + t * D, w.data(), want.data() + t * D, D, 1e-5f);
  expect_close(e.download(nb, x.size()), want, 1e-5f, "rmsnorm");

  const uint32_t F = 131;
  auto gu = randn(size_t(T) * 2 * F, 4, 4.0f);
  auto gb = e.upload(gu), sb = e.upload(std::vector<float>(size_t(T) * F));
  e.rec.begin();
  silu_mul(o, gb, 0, F, 2 * F, T, F, {sb, 0});
  e.rec.submit();
  std::vector<float> ws(size_t(T) * F);
  for (uint32_t t = 0; t < T; ++t) ref::silu_mul(gu.data() + t * 2 * F, gu.data() + t * 2 * F + F, ws.data() + t * F, F);
  expect_close(e.download(sb, ws.size()), ws, 1e-5f, "silu_mul");

  // --argmax-loads 1, 4 and 64 (AL; 64 x 256 threads passes n = 1000 in one step); the maximum late
  // in the range, in a tail that is not a whole step, and tied with an earlier index (in another
  // thread's scan and in the same one).
  // Checked to fail: keeping the last maximum of a thread's scan (>=).
  for (uint32_t al : {1u, 4u, 64u}) {
    KernelOptions ko;
    ko.argmax_loads = al;
    auto oa = e.op(ko);
    for (uint32_t n : {1u, 255u, 1000u, 49152u, 49157u}) {
      auto v = randn(n + 3, n);
      if (n > 10) { v[3 + n - 2] = 50.0f; v[3 + n - 1] = 50.0f; v[3 + 5] = NAN; }  // tie -> lowest index
      if (n > 300) v[3 + n - 1 - 256] = 50.0f;  // a tie within one thread's scan (indices 256 apart)
      if (n == 49152u) v[3 + 7] = 50.0f;
      auto vb = e.upload(v);
      EXPECT_EQ(run_argmax(e, oa, vb, 3, n), ref::argmax(v.data() + 3, n)) << "n=" << n << " AL=" << al;
    }
  }
}

// --argmax-workgroups G: the logits in G contiguous chunks, one candidate each, then a second
// dispatch over the candidates: the same id as the CPU sampler's argmax for every G (1 = the one
// workgroup scan), with the maximum tied across chunks (lowest index wins), a chunk of NaN only
// (its candidate must not win), an all-NaN input (id 0), negative values only (a maximum equal to
// the scan's initial -FLT_MAX), masked (-inf) logits with a NaN first (the CPU twin once let the
// first -inf win there: id 1 against the GPU's 0) and vocabularies of the sizes in use (Qwen2.5 151936, Qwen3.5 248320).
// A buffer too small for G's candidates is an error.
// Checked to fail: a chunk's candidate written with its index within the chunk; STAGE_FINAL
// skipping the last candidate. (A NaN-only chunk's candidate, (-FLT_MAX, 0xffffffff), loses every
// comparison by the index rule, so STAGE_FINAL's skip of it is defensive, not tested.)
TEST(Ops, ArgmaxWorkgroups) {
  auto& e = env();
  for (uint32_t g : {1u, 2u, 7u, 75u, 256u}) {
    KernelOptions ko;
    ko.argmax_workgroups = g;
    auto o = e.op(ko);
    for (uint32_t n : {1u, 300u, 4099u, 151936u, 248320u}) {
      const uint32_t want_g = std::min(g, (n + 255) / 256);
      EXPECT_EQ(argmax_workgroups(o, n), want_g) << "n=" << n;
      for (int shape = 0; shape < 6; ++shape) {
        auto v = randn(n + 5, n + shape);
        if (shape == 1 && n > 300) {  // ties in different chunks: the first must win
          v[5 + n / 3] = 60.0f, v[5 + n - 1] = 60.0f, v[5 + 2 * n / 3] = 60.0f;
          for (uint32_t i = 0; i < std::min<uint32_t>(n, 256); ++i) v[5 + i] = NAN;  // the first chunk NaN only
        }
        if (shape == 2) std::fill(v.begin() + 5, v.end(), NAN);                      // every value NaN: id 0
        if (shape == 3) for (float& f : v) f = -3.402823466e38f;                      // all at -FLT_MAX: id 0
        if (shape == 3 && n > 1) v[5 + n - 1] = -1e30f, v[5 + n / 2] = -1e30f;        // ... but two larger
        if (shape == 4) std::fill(v.begin() + 5, v.end(), -INFINITY);                  // masked logits
        if (shape == 4 && n > 2) v[5] = NAN, v[5 + n - 1] = -1e30f;  // only the last one unmasked
        if (shape == 5) std::fill(v.begin() + 5, v.end(), -INFINITY), v[5] = NAN;      // [NaN, -inf, ...]: id 0
        if (shape == 5 && n > 2) v[5 + n - 1] = -3.402823466e38f;  // ... -FLT_MAX last: it wins (id n - 1)
        auto vb = e.upload(v);
        EXPECT_EQ(run_argmax(e, o, vb, 5, n), ref::argmax(v.data() + 5, n)) << "n=" << n << " G=" << g << " shape=" << shape;
      }
    }
  }
  KernelOptions ko;
  ko.argmax_workgroups = 8;
  auto o = e.op(ko);
  EXPECT_EQ(run_argmax(e, o, e.upload(std::vector<float>{1.0f, 2.0f}), 0, 0, 77), 0u);  // n = 0: id 0
  gpu::Buffer small(*e.ctx, 4, gpu::BufferKind::Storage, "am");
  auto vb = e.upload(randn(4096, 9));
  e.rec.begin();
  EXPECT_THROW(argmax(o, {vb, 0}, 4096, small), Error);
  e.rec.submit();
}

// add_bias (Qwen2 Q/K/V biases; Gemma 3 residual adds), gelu_mul (Gemma 3 GeGLU) and scale
// (Gemma 3 embedding scale) vs their CPU twins, at sizes that are not multiples of 64 and with
// offsets and row strides; elements outside the written ranges keep their values.
TEST(Ops, AddBiasGeluMulScale) {
  auto& e = env();
  auto o = e.op();
  const uint32_t T = 3, N = 131, stride = 140, off = 5;
  auto y = randn(off + size_t(T) * stride, 11), b = randn(N, 12);
  auto yb = e.upload(y), bb = e.upload(b);
  e.rec.begin();
  add_bias(o, bb, N, {yb, off}, stride, T, "bias");
  e.rec.submit();
  std::vector<float> want = y;
  for (uint32_t t = 0; t < T; ++t)
    for (uint32_t i = 0; i < N; ++i) want[off + t * stride + i] += b[i];
  EXPECT_EQ(e.download(yb, want.size()), want) << "add_bias";  // one f32 add: exact

  const uint32_t F = 131;
  auto gu = randn(size_t(T) * 2 * F, 13, 4.0f);
  auto gb = e.upload(gu), ob = e.upload(std::vector<float>(size_t(T) * F));
  e.rec.begin();
  gelu_mul(o, gb, 0, F, 2 * F, T, F, {ob, 0});
  e.rec.submit();
  std::vector<float> wg(size_t(T) * F);
  for (uint32_t t = 0; t < T; ++t)
    for (uint32_t i = 0; i < F; ++i) wg[t * F + i] = ref::gelu_tanh(gu[t * 2 * F + i]) * gu[t * 2 * F + F + i];
  expect_close(e.download(ob, wg.size()), wg, 1e-5f, "gelu_mul");
  EXPECT_NEAR(ref::gelu_tanh(1.0f), 0.841192f, 1e-6f);  // 0.5 (1 + tanh(sqrt(2/pi) 1.044715))
  EXPECT_NEAR(ref::gelu_tanh(-3.0f), -0.00363739f, 1e-6f);

  auto x = randn(200, 14);
  auto xb = e.upload(x);
  e.rec.begin();
  scale(o, {xb, 7}, 150, 25.3f, "scale");
  e.rec.submit();
  std::vector<float> ws = x;
  for (uint32_t i = 0; i < 150; ++i) ws[7 + i] *= 25.3f;
  EXPECT_EQ(e.download(xb, ws.size()), ws) << "scale";  // one f32 multiply: exact
}

TEST(Ops, RopeBothLayouts) {
  auto& e = env();
  const uint32_t T = 5, H = 3, HD = 64, pos0 = 37;
  for (uint32_t rot : {64u, 32u}) {
    for (bool neox : {false, true}) {
      auto table = rope_table(128, rot, 10000.0);
      auto x = randn(size_t(T) * H * HD, rot + neox);
      auto xb = e.upload(x), tb = e.upload(table);
      auto o = e.op();
      e.rec.begin();
      rope(o, {xb, 0}, H * HD, T, H, HD, rot, pos0, tb, neox);
      e.rec.submit();
      std::vector<float> want = x;
      for (uint32_t t = 0; t < T; ++t) ref::rope(want.data() + t * H * HD, H, HD, rot, pos0 + t, table.data(), neox);
      expect_close(e.download(xb, x.size()), want, 1e-6f, "rope");
    }
  }
}

TEST(Ops, KvStoreAndAttentionGqa) {
  auto& e = env();
  for (uint32_t HD : {64u, 36u}) {
    const uint32_t Hq = 6, Hkv = 2, kv_dim = Hkv * HD, pos0 = 70, T = 9, ctx_len = 128;
    const float scale = 1.0f / std::sqrt(float(HD));
    // Existing cache rows [0, pos0) plus T new rows written by kv_store from a [T, q|k|v] buffer.
    auto cache_k = randn(size_t(ctx_len) * kv_dim, 1), cache_v = randn(size_t(ctx_len) * kv_dim, 2);
    const uint32_t stride = Hq * HD + 2 * kv_dim;
    auto qkv = randn(size_t(T) * stride, 3);
    auto kb = e.upload(cache_k), vb = e.upload(cache_v), qb = e.upload(qkv);
    auto ob = e.upload(std::vector<float>(size_t(T) * Hq * HD));
    auto o = e.op();
    e.rec.begin();
    kv_store(o, qb, Hq * HD, Hq * HD + kv_dim, stride, T, kv_dim, pos0, kb, vb);
    attention(o, {T, pos0, Hq, Hkv, HD, scale}, {qb, 0}, stride, kb, vb, {ob, 0}, Hq * HD);
    e.rec.submit();
    for (uint32_t t = 0; t < T; ++t)
      for (uint32_t i = 0; i < kv_dim; ++i) {
        cache_k[(pos0 + t) * kv_dim + i] = qkv[t * stride + Hq * HD + i];
        cache_v[(pos0 + t) * kv_dim + i] = qkv[t * stride + Hq * HD + kv_dim + i];
      }
    EXPECT_EQ(e.download(kb, cache_k.size()), cache_k);
    std::vector<float> want(size_t(T) * Hq * HD);
    for (uint32_t t = 0; t < T; ++t)
      ref::attention(qkv.data() + t * stride, cache_k.data(), cache_v.data(), want.data() + t * Hq * HD,
                     pos0 + t, Hq, Hkv, HD, scale);
    expect_close(e.download(ob, want.size()), want, 1e-5f, "attention HD=" + std::to_string(HD));
  }
}

TEST(Ops, AttentionFlashMatchesCpu) {
  // Register-tiled flash attention (attention_flash.wgsl, T > 1): head dims 32, 64, 96, 128, 192, 256, GQA
  // groups 1, 3, 4, T = 2..70 and 512 over caches 0..3000 (ragged row blocks and key tiles, the
  // causal diagonal inside a tile and on tile edges, rows that see no key of a split), split over
  // keys and not, q/out with strides and offsets like the models'. Must match the CPU reference,
  // take the flash kernel, write nothing outside its rows and give bit-identical results twice.
  auto& e = env();
  struct Case { uint32_t HD, Hq, Hkv, T, pos0; float qs = 2.0f; };
  const std::vector<Case> cases = {
      {64, 3, 3, 2, 0},     {64, 9, 3, 17, 37},   {64, 9, 3, 70, 300}, {64, 3, 3, 5, 1},    {64, 9, 3, 44, 31},
      {64, 8, 2, 33, 32},   {64, 4, 1, 64, 63},   {64, 9, 3, 22, 3000}, {64, 3, 1, 512, 0}, {64, 1, 1, 512, 700},
      {128, 8, 2, 7, 90},   {128, 4, 1, 40, 33},  {128, 2, 2, 70, 1000}, {32, 9, 3, 21, 64}, {96, 6, 2, 13, 95},
      {64, 9, 3, 20, 100, 40.0f}, {256, 8, 2, 37, 61}, {256, 4, 1, 20, 300}, {192, 2, 2, 9, 17}};
  for (const Case& c : cases) {
    const uint32_t kv_dim = c.Hkv * c.HD, ctx_len = c.pos0 + c.T, Q = c.Hq * c.HD;
    const uint32_t q_stride = Q + 2 * kv_dim, q_off = 4, o_stride = Q + 8, o_off = 3;  // as llama's qkv_
    const float scale = 1.0f / std::sqrt(float(c.HD));
    const std::string what = "HD=" + std::to_string(c.HD) + " Hq=" + std::to_string(c.Hq) + " Hkv=" +
                             std::to_string(c.Hkv) + " T=" + std::to_string(c.T) + " pos0=" + std::to_string(c.pos0);
    auto ck = randn(size_t(ctx_len) * kv_dim, c.T * 7 + 1), cv = randn(size_t(ctx_len) * kv_dim, c.T * 7 + 2);
    auto q = randn(q_off + size_t(c.T) * q_stride, c.T * 7 + 3, c.qs);
    auto kb = e.upload(ck), vb = e.upload(cv), qb = e.upload(q);
    std::vector<float> want(size_t(c.T) * Q);
    for (uint32_t t = 0; t < c.T; ++t)
      ref::attention(q.data() + q_off + t * q_stride, ck.data(), cv.data(), want.data() + t * Q, c.pos0 + t, c.Hq, c.Hkv,
                     c.HD, scale);
    gpu::Buffer scratch(*e.ctx, attention_split_floats(c.T, c.Hq, c.HD) * 4, gpu::BufferKind::Storage, "split");
    for (bool split : {false, true}) {
      KernelOptions ko;
      ko.attention_prefill_split = split;
      ko.attention_flash = 1;
      ko.attention_flash_lanes = 0;  // the Q-block kernel (the lanes kernel: Ops.AttentionFlashLanes*)
      ko.attention_flash_wide = true;  // head dims 160..256 (--attn-flash-wide-heads)
      auto o = e.op(ko);
      ASSERT_TRUE(attention_flash_used(o, {c.T, c.pos0, c.Hq, c.Hkv, c.HD, scale})) << what;
      std::vector<float> first;
      for (int run = 0; run < 2; ++run) {
        auto ob = e.upload(std::vector<float>(o_off + size_t(c.T) * o_stride, NAN));
        e.rec.set_traffic_log(true);
        e.rec.begin();
        attention(o, {c.T, c.pos0, c.Hq, c.Hkv, c.HD, scale}, {qb, q_off}, q_stride, kb, vb, {ob, o_off}, o_stride, &scratch);
        e.rec.submit();
        const auto disp = e.rec.last_dispatches();
        e.rec.set_traffic_log(false);
        ASSERT_FALSE(disp.empty());
        EXPECT_EQ(disp[0].label, "attention_flash") << what;
        if (!split) {
          EXPECT_EQ(disp.size(), 1u) << what;
        }
        auto all = e.download(ob, o_off + size_t(c.T) * o_stride);
        std::vector<float> got(want.size());
        for (uint32_t t = 0; t < c.T; ++t) {
          for (uint32_t i = 0; i < Q; ++i) got[t * Q + i] = all[o_off + t * o_stride + i];
          for (uint32_t i = Q; i < o_stride; ++i) ASSERT_TRUE(std::isnan(all[o_off + t * o_stride + i])) << what << " wrote outside its row";
        }
        expect_close(got, want, c.qs > 10 ? 1e-3f : 1e-5f, what + (split ? " split" : ""));
        if (run == 0) first = got;
        else EXPECT_EQ(std::memcmp(first.data(), got.data(), got.size() * 4), 0) << what << " not deterministic";
      }
    }
  }
}

TEST(Ops, AttentionFlashUnrollIsBitExact) {
  // --attn-flash-unroll (KernelOptions::attention_flash_unroll): the generated register tile (UNROLL 1)
  // and the loop form (UNROLL 0) perform the same operations in the same order, so every output bit
  // agrees, with and without the key split, over ragged row blocks, tiles and GQA groups.
  auto& e = env();
  if (!attention_flash_unrolled(e.op(KernelOptions{})))
    GTEST_SKIP() << "the generated form is off on this adapter (" << e.ctx->info().name << "): its compiler may not finish it";
  struct Case { uint32_t HD, Hq, Hkv, T, pos0, W = 0; };  // W: sliding window (--attn-flash-window)
  for (const Case& c : std::vector<Case>{{64, 9, 3, 17, 37}, {64, 3, 1, 70, 300}, {128, 4, 1, 40, 33}, {32, 9, 3, 21, 64}, {96, 6, 2, 13, 95},
                                         {256, 8, 2, 19, 40}, {192, 6, 2, 21, 50}, {64, 9, 3, 70, 300, 40}}) {
    const uint32_t kv_dim = c.Hkv * c.HD, ctx_len = c.pos0 + c.T, Q = c.Hq * c.HD;
    const float scale = 1.0f / std::sqrt(float(c.HD));
    const std::string what = "HD=" + std::to_string(c.HD) + " Hq=" + std::to_string(c.Hq) + " T=" + std::to_string(c.T) +
                             " pos0=" + std::to_string(c.pos0) + " W=" + std::to_string(c.W);
    auto kb = e.upload(randn(size_t(ctx_len) * kv_dim, c.T + 11)), vb = e.upload(randn(size_t(ctx_len) * kv_dim, c.T + 12));
    auto qb = e.upload(randn(size_t(c.T) * Q, c.T + 13, 2.0f));
    gpu::Buffer scratch(*e.ctx, attention_split_floats(c.T, c.Hq, c.HD) * 4, gpu::BufferKind::Storage, "split");
    for (bool split : {false, true}) {
      std::vector<float> out[2];
      for (uint8_t unroll : {0, 1}) {
        KernelOptions ko;
        ko.attention_flash = 1;
        ko.attention_flash_lanes = 0;  // the Q-block kernel (the lanes kernel: Ops.AttentionFlashLanes*)
        ko.attention_prefill_split = split;
        ko.attention_flash_unroll = unroll;
        ko.attention_flash_wide = ko.attention_flash_window = true;
        auto o = e.op(ko);
        ASSERT_EQ(attention_flash_unrolled(o), unroll == 1);
        ASSERT_TRUE(attention_flash_used(o, {c.T, c.pos0, c.Hq, c.Hkv, c.HD, scale, c.W})) << what;
        auto ob = e.upload(std::vector<float>(size_t(c.T) * Q, NAN));
        e.rec.begin();
        attention(o, {c.T, c.pos0, c.Hq, c.Hkv, c.HD, scale, c.W}, {qb, 0}, Q, kb, vb, {ob, 0}, Q, &scratch);
        e.rec.submit();
        out[unroll] = e.download(ob, size_t(c.T) * Q);
      }
      ASSERT_FALSE(std::isnan(out[1][0])) << what;
      EXPECT_EQ(std::memcmp(out[0].data(), out[1].data(), out[0].size() * 4), 0) << what << (split ? " split" : "");
    }
  }
}

TEST(Ops, AttentionFlashPrefetchIsBitExact) {
  // --attn-flash-prefetch (KernelOptions::attention_flash_prefetch, attention_flash.wgsl PF): the next
  // key tile's K/V rows reach the same workgroup arrays through registers, so every output bit agrees
  // with the plain loads, with and without the key split, over ragged row blocks, ragged last key
  // tiles, single-tile splits and GQA groups.
  auto& e = env();
  struct Case { uint32_t HD, Hq, Hkv, T, pos0, W = 0; };  // W: sliding window (--attn-flash-window)
  uint32_t taken = 0, taken_wide = 0;
  for (const Case& c : std::vector<Case>{{64, 9, 3, 17, 37}, {64, 3, 1, 70, 300}, {128, 4, 1, 40, 33}, {32, 9, 3, 21, 64},
                                         {96, 6, 2, 13, 95}, {64, 9, 3, 76, 185}, {256, 8, 2, 19, 40},
                                         {192, 6, 2, 21, 50}, {64, 9, 3, 70, 300, 40}}) {
    const uint32_t kv_dim = c.Hkv * c.HD, ctx_len = c.pos0 + c.T, Q = c.Hq * c.HD;
    const float scale = 1.0f / std::sqrt(float(c.HD));
    const std::string what = "HD=" + std::to_string(c.HD) + " Hq=" + std::to_string(c.Hq) + " T=" + std::to_string(c.T) +
                             " pos0=" + std::to_string(c.pos0) + " W=" + std::to_string(c.W);
    auto kb = e.upload(randn(size_t(ctx_len) * kv_dim, c.T + 21)), vb = e.upload(randn(size_t(ctx_len) * kv_dim, c.T + 22));
    auto qb = e.upload(randn(size_t(c.T) * Q, c.T + 23, 2.0f));
    gpu::Buffer scratch(*e.ctx, attention_split_floats(c.T, c.Hq, c.HD) * 4, gpu::BufferKind::Storage, "split");
    for (bool split : {false, true}) {
      std::vector<float> out[2];
      for (bool pf : {false, true}) {
        KernelOptions ko;
        ko.attention_flash = 1;
        ko.attention_flash_lanes = 0;  // the Q-block kernel (the lanes kernel: Ops.AttentionFlashLanes*)
        ko.attention_prefill_split = split;
        ko.attention_flash_prefetch = pf;
        ko.attention_flash_wide = ko.attention_flash_window = true;
        auto o = e.op(ko);
        ASSERT_TRUE(attention_flash_used(o, {c.T, c.pos0, c.Hq, c.Hkv, c.HD, scale, c.W})) << what;
        const bool took = pf && attention_flash_prefetch(o, attention_flash_tile(o, c.HD), c.HD);
        taken += took;
        taken_wide += took && c.HD > 128;
        auto ob = e.upload(std::vector<float>(size_t(c.T) * Q, NAN));
        e.rec.begin();
        attention(o, {c.T, c.pos0, c.Hq, c.Hkv, c.HD, scale, c.W}, {qb, 0}, Q, kb, vb, {ob, 0}, Q, &scratch);
        e.rec.submit();
        out[pf] = e.download(ob, size_t(c.T) * Q);
      }
      ASSERT_FALSE(std::isnan(out[1][0])) << what;
      EXPECT_EQ(std::memcmp(out[0].data(), out[1].data(), out[0].size() * 4), 0) << what << (split ? " split" : "");
    }
  }
  EXPECT_GT(taken, 0u) << "no case took the prefetching form on this adapter";
  // The wide-head 16 x 16 tile with prefetch (HD 192 fits it in 32 KiB too; HD 256 needs 48 KiB).
  EXPECT_GT(taken_wide, 0u) << "no wide-head case took the prefetching form on this adapter";
}

TEST(Ops, AttentionFlashLanesMatchesCpu) {
  // --attn-flash-lanes N (attention_flash_sg.wgsl): query rows in registers, each row's head dim over N
  // subgroup lanes. Head dims 32..256, GQA groups 1..4, ragged row blocks and key tiles, the causal
  // diagonal inside a tile, rows that see no key of a split, sliding windows, strided q/out with
  // offsets; lanes 4 and 8 (and 16 / 32 where the adapter's subgroups are that wide), 32..256 threads,
  // with and without the prefetch. Must take the lanes kernel, match the CPU reference, write nothing
  // outside its rows, give the same bits twice, and with the prefetch the same bits as without; also
  // with explicit rows per thread and keys per softmax group.
  auto& e = env();
  if (!e.ctx->has_subgroups()) GTEST_SKIP() << "adapter without subgroups: the lanes kernel never applies";
  const uint32_t sg_lo = e.ctx->measured_subgroup_sizes().first;
  // rows / keys: --attn-flash-lanes-rows / --attn-flash-lanes-keys (0: the rule's).
  struct Case { uint32_t HD, Hq, Hkv, T, pos0, lanes, threads, W = 0; float qs = 2.0f; uint32_t rows = 0, keys = 0; };
  const std::vector<Case> cases = {
      {256, 8, 2, 33, 70, 8, 256, 0, 2.0f, 1, 2}, {128, 4, 1, 40, 33, 8, 64, 0, 2.0f, 4, 32},
      {64, 9, 3, 17, 37, 4, 128},  {64, 3, 3, 2, 0, 8, 64},      {64, 9, 3, 70, 300, 8, 128}, {128, 8, 2, 7, 90, 8, 128},
      {128, 4, 1, 40, 33, 4, 256}, {32, 9, 3, 21, 64, 8, 32},    {96, 6, 2, 13, 95, 8, 64},   {256, 8, 2, 37, 61, 8, 128},
      {256, 4, 1, 20, 300, 8, 64}, {192, 2, 2, 9, 17, 4, 128},   {64, 9, 3, 70, 300, 8, 128, 40},
      {256, 8, 2, 45, 100, 8, 128, 30}, {64, 9, 3, 20, 100, 8, 128, 0, 40.0f}, {128, 2, 2, 70, 1000, 16, 128},
      {256, 8, 2, 33, 70, 16, 256}, {256, 8, 2, 33, 70, 32, 128}, {64, 1, 1, 130, 0, 8, 128}};
  uint32_t ran = 0, pf_taken = 0, split_runs = 0;
  const bool sw = e.ctx->info().is_software();
  for (const Case& c : cases) {
    if (c.lanes > sg_lo) continue;  // wider than this adapter's subgroups: the other kernel (checked below)
    // Software adapters (CI's lavapipe, where the kernel is off by default) compile the larger
    // generated register tiles for minutes: there, the cases of at most 12 vec4 of query per thread and
    // one head-dim-256 case (the hardware default's shape); GPUs run every case.
    {
      KernelOptions lo;
      lo.attention_flash_lanes = c.lanes;
      lo.attention_flash_lanes_threads = c.threads;
      lo.attention_flash_lanes_rows = c.rows;
      lo.attention_flash_lanes_keys = c.keys;
      const FlashTile t = attention_flash_lanes_tile(e.op(lo), c.HD);
      const bool hd256 = c.HD == 256 && c.W == 0 && c.lanes == 8 && c.threads == 128;
      if (sw && t.rm * (c.HD / 4 / c.lanes) > 12 && !hd256) continue;
    }
    const uint32_t kv_dim = c.Hkv * c.HD, ctx_len = c.pos0 + c.T, Q = c.Hq * c.HD;
    const uint32_t q_stride = Q + 2 * kv_dim, q_off = 4, o_stride = Q + 8, o_off = 3;
    const float scale = 1.0f / std::sqrt(float(c.HD));
    const AttentionShape shape{c.T, c.pos0, c.Hq, c.Hkv, c.HD, scale, c.W};
    const std::string what = "HD=" + std::to_string(c.HD) + " Hq=" + std::to_string(c.Hq) + " Hkv=" + std::to_string(c.Hkv) +
                             " T=" + std::to_string(c.T) + " pos0=" + std::to_string(c.pos0) + " lanes=" +
                             std::to_string(c.lanes) + " threads=" + std::to_string(c.threads) + " W=" + std::to_string(c.W) +
                             " rows=" + std::to_string(c.rows) + " keys=" + std::to_string(c.keys);
    auto ck = randn(size_t(ctx_len) * kv_dim, c.T * 5 + 1), cv = randn(size_t(ctx_len) * kv_dim, c.T * 5 + 2);
    auto q = randn(q_off + size_t(c.T) * q_stride, c.T * 5 + 3, c.qs);
    std::vector<float> want(size_t(c.T) * Q);
    for (uint32_t t = 0; t < c.T; ++t) {  // (with a window: the reference over the window's rows only)
      const uint32_t pos = c.pos0 + t, first = c.W && pos + 1 > c.W ? pos + 1 - c.W : 0;
      ref::attention(q.data() + q_off + t * q_stride, ck.data() + size_t(first) * kv_dim, cv.data() + size_t(first) * kv_dim,
                     want.data() + t * Q, pos - first, c.Hq, c.Hkv, c.HD, scale);
    }
    // No kernel may read below the forward's first window: NaN there would show.
    const uint32_t first0 = c.W && c.pos0 + 1 > c.W ? c.pos0 + 1 - c.W : 0;
    std::fill(ck.begin(), ck.begin() + size_t(first0) * kv_dim, NAN);
    std::fill(cv.begin(), cv.begin() + size_t(first0) * kv_dim, NAN);
    auto kb = e.upload(ck), vb = e.upload(cv), qb = e.upload(q);
    gpu::Buffer scratch(*e.ctx, attention_split_floats(c.T, c.Hq, c.HD) * 4, gpu::BufferKind::Storage, "split");
    for (bool split : {false, true}) {
      std::vector<float> first;
      for (bool pf : {false, true}) {
        KernelOptions ko;
        ko.attention_prefill_split = split;
        ko.attention_flash = 1;
        ko.attention_flash_wide = ko.attention_flash_window = true;
        ko.attention_flash_lanes = c.lanes;
        ko.attention_flash_lanes_threads = c.threads;
        ko.attention_flash_lanes_rows = c.rows;
        ko.attention_flash_lanes_keys = c.keys;
        ko.attention_flash_prefetch = pf;
        auto o = e.op(ko);
        ASSERT_TRUE(attention_flash_used(o, shape)) << what;
        const FlashTile t = attention_flash_lanes_tile(o, c.HD);
        ASSERT_TRUE(t.lanes && t.bc) << what;
        ASSERT_EQ(t.threads(), c.threads) << what;
        if (c.rows) {
          ASSERT_EQ(t.rm, c.rows) << what;
        }
        if (c.keys) {
          ASSERT_EQ(t.jk, std::min(c.keys, t.bc)) << what;
        }
        pf_taken += pf && attention_flash_prefetch(o, t, c.HD);
        for (int run = 0; run < 2; ++run) {
          auto ob = e.upload(std::vector<float>(o_off + size_t(c.T) * o_stride, NAN));
          e.rec.set_traffic_log(true);
          e.rec.begin();
          attention(o, shape, {qb, q_off}, q_stride, kb, vb, {ob, o_off}, o_stride, &scratch);
          e.rec.submit();
          const auto disp = e.rec.last_dispatches();
          e.rec.set_traffic_log(false);
          ASSERT_FALSE(disp.empty());
          EXPECT_EQ(disp[0].label, "attention_flash_sg") << what;
          if (!split) {
            EXPECT_EQ(disp.size(), 1u) << what;
          }
          split_runs += split && disp.size() > 1;  // attention_flash_sg + attention_combine
          auto all = e.download(ob, o_off + size_t(c.T) * o_stride);
          for (uint32_t i = 0; i < o_off; ++i) ASSERT_TRUE(std::isnan(all[i])) << what << " wrote before its first row";
          std::vector<float> got(want.size());
          for (uint32_t tt = 0; tt < c.T; ++tt) {
            for (uint32_t i = 0; i < Q; ++i) got[tt * Q + i] = all[o_off + tt * o_stride + i];
            for (uint32_t i = Q; i < o_stride; ++i)
              ASSERT_TRUE(std::isnan(all[o_off + tt * o_stride + i])) << what << " wrote outside its row";
          }
          expect_close(got, want, c.qs > 10 ? 1e-3f : 1e-5f, what + (split ? " split" : "") + (pf ? " pf" : ""));
          if (first.empty()) {
            first = got;
          } else {
            EXPECT_EQ(std::memcmp(first.data(), got.data(), got.size() * 4), 0)
                << what << (split ? " split" : "") << (pf ? " pf" : "") << ": not the same bits as the first run";
          }
        }
      }
    }
    ++ran;
  }
  EXPECT_GE(ran, sw ? 8u : 16u) << "too few cases ran on this adapter (smallest subgroup " << sg_lo << ")";
  EXPECT_GT(pf_taken, 0u) << "no case took the prefetching form";
  EXPECT_GT(split_runs, 0u) << "no case took the key split";
}

TEST(Ops, AttentionFlashLanesTileRule) {
  // attention_flash_lanes_tile: off at N = 0, N wider than the smallest subgroup or not dividing
  // head dim / 4; otherwise rows per thread with <= 64 query floats, K and V tiles within the
  // workgroup memory, JK dividing BC; attention_flash_pick falls back to the Q-block tile.
  auto& e = env();
  KernelOptions ko;
  ko.attention_flash = 1;
  ko.attention_flash_wide = true;
  ko.attention_flash_lanes = 0;
  EXPECT_FALSE(attention_flash_pick(e.op(ko), 256).lanes) << "on with --attn-flash-lanes 0";
  // The adapter default: 8 lanes at head dims >= 128 on hardware adapters with subgroups of >= 8.
  ko.attention_flash_lanes = kFlashLanesAuto;
  const bool hw = !e.ctx->info().is_software() && e.ctx->has_subgroups() && e.ctx->measured_subgroup_sizes().first >= 8;
  for (uint32_t HD : {64u, 128u, 256u}) {
    const FlashTile t = attention_flash_pick(e.op(ko), HD);
    EXPECT_EQ(t.lanes, hw && HD >= 128) << HD;
    if (t.lanes) {
      EXPECT_EQ(t.tx, 8u) << HD;
    }
  }
  if (!e.ctx->has_subgroups()) GTEST_SKIP() << "adapter without subgroups";
  const uint32_t sg_lo = e.ctx->measured_subgroup_sizes().first;
  ko.attention_flash_lanes = 2 * sg_lo;
  if (ko.attention_flash_lanes <= 32) {
    EXPECT_EQ(attention_flash_lanes_tile(e.op(ko), 256).bc, 0u) << "lanes above the subgroup size";
  }
  ko.attention_flash_lanes = 8;
  EXPECT_EQ(attention_flash_lanes_tile(e.op(ko), 36).bc, 0u) << "9 vec4 over 8 lanes";
  EXPECT_FALSE(attention_flash_pick(e.op(ko), 36).lanes);
  for (uint32_t lanes : {4u, 8u})
    for (uint32_t HD : {32u, 64u, 128u, 256u}) {
      ko.attention_flash_lanes = lanes;
      const FlashTile t = attention_flash_lanes_tile(e.op(ko), HD);
      if (lanes > sg_lo) {
        EXPECT_EQ(t.bc, 0u);
        continue;
      }
      ASSERT_TRUE(t.lanes && t.bc) << lanes << " " << HD;
      EXPECT_LE(t.rm * HD / lanes, 64u) << HD;
      EXPECT_EQ(t.bc % t.jk, 0u);
      EXPECT_EQ(t.threads(), 256u);  // (--attn-flash-lanes-threads 0)
      EXPECT_LE(t.workgroup_bytes(HD), e.ctx->info().limits.maxComputeWorkgroupStorageSize) << HD;
      EXPECT_TRUE(attention_flash_pick(e.op(ko), HD).lanes) << HD;
    }
}

TEST(Ops, AttentionFlashCoverage) {
  // Head dims the flash kernel does not cover fall back to attention_tiled.wgsl; T = 1 (decode) and
  // --no-attn-flash never take it.
  auto& e = env();
  KernelOptions ko;
  ko.attention_flash = 1;
  ko.attention_flash_wide = false;  // (on by default since 2026-12-07)
  for (uint32_t HD : {192u, 256u})  // wide heads only with --attn-flash-wide-heads
    EXPECT_FALSE(attention_flash_used(e.op(ko), {2, 0, 4, 2, HD, 1.0f})) << HD;
  ko.attention_flash_wide = true;
  auto o = e.op(ko);
  for (uint32_t HD : {32u, 64u, 96u, 128u, 192u, 256u}) EXPECT_TRUE(attention_flash_used(o, {2, 0, 4, 2, HD, 1.0f})) << HD;
  for (uint32_t HD : {24u, 36u, 80u, 288u, 512u}) EXPECT_FALSE(attention_flash_used(o, {2, 0, 4, 2, HD, 1.0f})) << HD;
  EXPECT_FALSE(attention_flash_used(o, {1, 100, 4, 2, 64, 1.0f}));
  ko.attention_flash = 0;
  ko.attention_chunk = 0;  // nor the short-chunk route to it
  EXPECT_FALSE(attention_flash_used(e.op(ko), {8, 0, 4, 2, 64, 1.0f}));
  for (uint32_t HD : {32u, 64u, 96u, 128u, 192u, 256u}) {
    const FlashTile t = attention_flash_tile(o, HD);
    EXPECT_LE(t.workgroup_bytes(HD), e.ctx->info().limits.maxComputeWorkgroupStorageSize) << HD;
    EXPECT_LE(t.workgroup_bytes(HD), 49152u) << HD << ": more than 48 KiB of workgroup memory";
  }
}

// causal_conv: GPU vs CPU twin over a chain of calls sharing one state (prefill, decode steps,
// short prefills with T < L-1), every variant; and the CPU twin vs a direct zero-padded conv over
// the whole sequence (independent of how the sequence was split).
TEST(Ops, CausalConvChainedStateAllVariants) {
  auto& e = env();
  const std::vector<uint32_t> chunks = {7, 1, 1, 2, 5, 1};  // sum 17
  const uint32_t Ttot = 17;
  for (uint32_t L : {2u, 3u, 4u}) {
    for (uint32_t C : {1u, 71u, 130u}) {
      for (int variant = 0; variant < 6; ++variant) {
        const bool gin = variant & 1, gout = variant & 2, silu = variant == 3 || variant == 4, bias = variant >= 4;
        // One source buffer [T, 3C + 5] holding gate_in | gate_out | x (as LFM2's in_proj output).
        const uint32_t S = 3 * C + 5;
        auto src = randn(size_t(Ttot) * S, L * 100 + C + variant);
        auto w = randn(size_t(C) * L, 7 + C), bv = randn(C, 8);
        auto sb = e.upload(src), wb = e.upload(w), bb = e.upload(bv);
        auto stb = e.upload(std::vector<float>(size_t(L - 1) * C + 3));  // state at offset 3
        auto yb = e.upload(std::vector<float>(size_t(Ttot) * (C + 2)));
        std::vector<float> st_cpu(size_t(L - 1) * C), y_cpu(size_t(Ttot) * (C + 2));
        auto o = e.op();
        uint32_t t0 = 0;
        for (uint32_t T : chunks) {
          const uint32_t base = t0 * S, ys = C + 2;
          e.rec.begin();
          causal_conv(o, {T, C, L, silu}, {sb, base + 2 * C}, S, gin ? F32Rows{&sb, base, S} : F32Rows{},
                      gout ? F32Rows{&sb, base + C, S} : F32Rows{}, wb, bias ? &bb : nullptr, {stb, 3},
                      {yb, t0 * ys}, ys);
          e.rec.submit();
          ref::causal_conv(src.data() + base + 2 * C, S, gin ? src.data() + base : nullptr, S,
                           gout ? src.data() + base + C : nullptr, S, w.data(), bias ? bv.data() : nullptr,
                           st_cpu.data(), y_cpu.data() + size_t(t0) * ys, ys, T, C, L, silu);
          t0 += T;
        }
        const std::string what = "L=" + std::to_string(L) + " C=" + std::to_string(C) + " v=" + std::to_string(variant);
        expect_close(e.download(yb, y_cpu.size()), y_cpu, 1e-5f, "causal_conv y " + what);
        auto st_gpu = e.download(stb, st_cpu.size() + 3);
        EXPECT_EQ(std::vector<float>(st_gpu.begin() + 3, st_gpu.end()), st_cpu) << what;
        // Direct formula: y[t] = sum_j w[j] * u[t - (L-1) + j], u = 0 before the sequence start.
        for (uint32_t t = 0; t < Ttot; ++t)
          for (uint32_t c = 0; c < C; ++c) {
            auto u = [&](int64_t r) {
              if (r < 0) return 0.0f;
              const float* row = src.data() + size_t(r) * S;
              return row[2 * C + c] * (gin ? row[c] : 1.0f);
            };
            float a = 0;
            for (uint32_t j = 0; j < L; ++j) a += w[c * L + j] * u(int64_t(t) - int64_t(L - 1) + j);
            if (bias) a += bv[c];
            if (silu) a = a / (1 + std::exp(-a));
            if (gout) a *= src[size_t(t) * S + C + c];
            ASSERT_NEAR(y_cpu[size_t(t) * (C + 2) + c], a, 1e-5f * (1 + std::fabs(a))) << what << " t=" << t;
          }
        for (uint32_t i = 0; i + 1 < L; ++i)  // final state = last L-1 gated inputs
          for (uint32_t c = 0; c < C; ++c) {
            const float* row = src.data() + size_t(Ttot - (L - 1) + i) * S;
            ASSERT_EQ(st_cpu[size_t(i) * C + c], row[2 * C + c] * (gin ? row[c] : 1.0f)) << what;
          }
      }
    }
  }
}

// fuse_conv_state: the one-dispatch causal conv (forwards of <= 8 tokens) gives the same bits in
// y and the state as the two-dispatch form, over a chain of calls (decode steps, T = 2..8, and a
// 9-token chunk that takes the two-dispatch form on both sides), every variant.
TEST(Ops, CausalConvFusedStateSameBitsAsTwoDispatches) {
  auto& e = env();
  const std::vector<uint32_t> chunks = {1, 1, 3, 8, 9, 1, 2};
  uint32_t Ttot = 0;
  for (uint32_t T : chunks) Ttot += T;
  for (uint32_t L : {2u, 3u, 4u}) {
    for (uint32_t C : {1u, 71u, 130u}) {
      for (int variant = 0; variant < 6; ++variant) {
        const bool gin = variant & 1, gout = variant & 2, silu = variant == 3 || variant == 4, bias = variant >= 4;
        const uint32_t S = 3 * C + 5, ys = C + 2;
        auto src = randn(size_t(Ttot) * S, L * 100 + C + variant + 9);
        auto w = randn(size_t(C) * L, 7 + C), bv = randn(C, 8);
        auto sb = e.upload(src), wb = e.upload(w), bb = e.upload(bv);
        std::vector<gpu::Buffer> st, y;
        for (int f = 0; f < 2; ++f) {
          st.push_back(e.upload(std::vector<float>(size_t(L - 1) * C + 3)));
          y.push_back(e.upload(std::vector<float>(size_t(Ttot) * ys)));
        }
        uint32_t t0 = 0;
        for (uint32_t T : chunks) {
          for (int f = 0; f < 2; ++f) {
            KernelOptions ko;
            ko.fuse_conv_state = f == 1;
            auto o = e.op(ko);
            const uint32_t base = t0 * S;
            e.rec.set_traffic_log(true);
            e.rec.begin();
            causal_conv(o, {T, C, L, silu}, {sb, base + 2 * C}, S, gin ? F32Rows{&sb, base, S} : F32Rows{},
                        gout ? F32Rows{&sb, base + C, S} : F32Rows{}, wb, bias ? &bb : nullptr, {st[f], 3},
                        {y[f], t0 * ys}, ys);
            e.rec.submit();
            EXPECT_EQ(e.rec.last_dispatches().size(), f == 1 && T <= kFusedConvMaxTokens ? 1u : 2u) << "T=" << T;
            e.rec.set_traffic_log(false);
          }
          t0 += T;
        }
        const std::string what = "L=" + std::to_string(L) + " C=" + std::to_string(C) + " v=" + std::to_string(variant);
        auto y0 = e.download(y[0], size_t(Ttot) * ys), y1 = e.download(y[1], size_t(Ttot) * ys);
        auto s0 = e.download(st[0], size_t(L - 1) * C + 3), s1 = e.download(st[1], size_t(L - 1) * C + 3);
        EXPECT_EQ(0, std::memcmp(y0.data(), y1.data(), y0.size() * 4)) << "y " << what;
        EXPECT_EQ(0, std::memcmp(s0.data(), s1.data(), s0.size() * 4)) << "state " << what;
      }
    }
  }
}

TEST(Ops, CausalConvRejectsBadArguments) {
  auto& e = env();
  auto a = e.upload(std::vector<float>(64)), b = e.upload(std::vector<float>(64));
  auto o = e.op();
  e.rec.begin();
  EXPECT_THROW(causal_conv(o, {1, 4, 1, false}, {a, 0}, 4, {}, {}, a, nullptr, {b, 0}, {b, 16}, 4), Error);
  EXPECT_THROW(causal_conv(o, {1, 4, 3, false}, {a, 0}, 4, {}, {}, a, nullptr, {b, 0}, {b, 16}, 4), Error);
  EXPECT_THROW(causal_conv(o, {1, 4, 3, false}, {a, 0}, 4, {}, {}, a, nullptr, {a, 0}, {b, 0}, 4), Error);
  e.rec.submit();
}

TEST(Ops, AttentionSplitKeysMatchesCpu) {
  // Flash-decoding split over keys: 1..3 query tokens at short and long positions, with empty
  // splits for earlier tokens of a causal block; result must match the CPU reference.
  auto& e = env();
  for (uint32_t HD : {64u, 36u}) {
    for (auto [pos0, T] : {std::pair{0u, 1u}, {70u, 1u}, {300u, 2u}, {1000u, 3u}, {500u, 40u}}) {
      const uint32_t Hq = 6, Hkv = 2, kv_dim = Hkv * HD, ctx_len = 1024;
      const float scale = 1.0f / std::sqrt(float(HD));
      auto ck = randn(size_t(ctx_len) * kv_dim, pos0 + 1), cv = randn(size_t(ctx_len) * kv_dim, pos0 + 2);
      auto q = randn(size_t(T) * Hq * HD, pos0 + 3);
      auto kb = e.upload(ck), vb = e.upload(cv), qb = e.upload(q);
      std::vector<float> want(size_t(T) * Hq * HD);
      for (uint32_t t = 0; t < T; ++t)
        ref::attention(q.data() + t * Hq * HD, ck.data(), cv.data(), want.data() + t * Hq * HD, pos0 + t, Hq, Hkv, HD, scale);
      gpu::Buffer scratch(*e.ctx, attention_split_floats(64, Hq, HD) * 4, gpu::BufferKind::Storage, "split");
      for (int variant = 0; variant < 3; ++variant) {
        const bool split = variant > 0;
        KernelOptions ko;
        ko.attention_decode_split = split;
        ko.attention_ilp = variant != 2;
        ko.attention_tiled_prefill = false;  // this test covers the per-row kernel (tiled: below)
        ko.attention_decode_gqa = 0;         // ... also for T = 1 (decode kernel: AttentionDecodeGqa*)
        ko.attention_flash = 0;
        ko.attention_chunk = 0;  // nor the short-chunk route to it
        auto o = e.op(ko);
        auto ob = e.upload(std::vector<float>(want.size(), NAN));
        e.rec.set_traffic_log(true);
        e.rec.begin();
        attention(o, {T, pos0, Hq, Hkv, HD, scale}, {qb, 0}, Hq * HD, kb, vb, {ob, 0}, Hq * HD, &scratch);
        e.rec.submit();
        const size_t n_disp = e.rec.last_dispatches().size();
        e.rec.set_traffic_log(false);
        EXPECT_EQ(n_disp, split && pos0 + T > 128 ? 2u : 1u) << "split path taken";
        expect_close(e.download(ob, want.size()), want, 1e-5f,
                     "variant=" + std::to_string(variant) + " HD=" + std::to_string(HD) + " pos0=" + std::to_string(pos0));
      }
    }
  }
}

TEST(Ops, AttentionSlidingWindowMatchesCpu) {
  // Sliding-window attention (AttentionShape::window, Gemma 3's local layers): token t at position
  // p sees keys [p - W + 1, p]. Every dense kernel that takes a window (per-row with and without the
  // key split, the GQA decode kernel with and without it, the tiled prefill kernel with and without
  // it, the flash kernel with --attn-flash-window with and without it; without that switch the flash
  // kernel declines windowed shapes) against the CPU reference run on the window's rows only. The
  // cache rows below the forward's first window are NaN: a kernel that read them (a masked dense
  // pass) would return NaN.
  auto& e = env();
  struct Case { uint32_t HD, Hq, Hkv, T, pos0, W; };
  uint32_t flash_split_runs = 0;  // windowed flash forwards that took the key split
  const std::vector<Case> cases = {{64, 4, 1, 1, 299, 7},    {256, 4, 1, 1, 700, 512}, {64, 6, 2, 3, 300, 64},
                                   {64, 4, 1, 40, 500, 33},  {256, 4, 1, 17, 90, 20},  {32, 4, 4, 70, 130, 1},
                                   {64, 4, 1, 5, 2, 512},    {64, 9, 3, 70, 300, 40},  {128, 8, 2, 90, 1000, 200},
                                   {64, 3, 1, 300, 0, 100}};
  for (const Case& c : cases) {
    const uint32_t kv_dim = c.Hkv * c.HD, ctx_len = c.pos0 + c.T, Q = c.Hq * c.HD;
    const float scale = 1.0f / std::sqrt(float(c.HD));
    const std::string what = "HD=" + std::to_string(c.HD) + " Hq=" + std::to_string(c.Hq) + " Hkv=" + std::to_string(c.Hkv) +
                             " T=" + std::to_string(c.T) + " pos0=" + std::to_string(c.pos0) + " W=" + std::to_string(c.W);
    auto ck = randn(size_t(ctx_len) * kv_dim, c.T + c.pos0 + 1), cv = randn(size_t(ctx_len) * kv_dim, c.T + c.pos0 + 2);
    auto q = randn(size_t(c.T) * Q, c.T + c.pos0 + 3, 2.0f);
    std::vector<float> want(size_t(c.T) * Q);
    for (uint32_t t = 0; t < c.T; ++t) {
      const uint32_t pos = c.pos0 + t, first = pos + 1 > c.W ? pos + 1 - c.W : 0;
      ref::attention(q.data() + size_t(t) * Q, ck.data() + size_t(first) * kv_dim, cv.data() + size_t(first) * kv_dim,
                     want.data() + size_t(t) * Q, pos - first, c.Hq, c.Hkv, c.HD, scale);
    }
    const uint32_t first0 = c.pos0 + 1 > c.W ? c.pos0 + 1 - c.W : 0;  // no kernel may read below this row
    std::fill(ck.begin(), ck.begin() + size_t(first0) * kv_dim, NAN);
    std::fill(cv.begin(), cv.begin() + size_t(first0) * kv_dim, NAN);
    auto kb = e.upload(ck), vb = e.upload(cv), qb = e.upload(q);
    gpu::Buffer scratch(*e.ctx, attention_split_floats(c.T, c.Hq, c.HD) * 4, gpu::BufferKind::Storage, "split");
    // Paths: 0 per-row, 1 decode GQA (T = 1) / tiled (T > 1), 2 flash (T > 1, --attn-flash-window); without
    // --attn-flash-window the flash kernel declines windows.
    KernelOptions flash;
    flash.attention_flash = 1;
    flash.attention_flash_wide = true;
    flash.attention_flash_window = false;  // (on by default since 2026-12-07)
    EXPECT_FALSE(attention_flash_used(e.op(flash), {c.T, c.pos0, c.Hq, c.Hkv, c.HD, scale, c.W})) << what;
    flash.attention_flash_window = true;
    EXPECT_EQ(attention_flash_used(e.op(flash), {c.T, c.pos0, c.Hq, c.Hkv, c.HD, scale, c.W}), c.T > 1) << what;
    for (int path = 0; path < 3; ++path) {
      if (path == 2 && c.T == 1) continue;
      for (bool split : {false, true}) {
        KernelOptions ko;
        ko.attention_decode_split = split;
        ko.attention_prefill_split = split;
        ko.attention_decode_split_min = 0;  // split decode keys as soon as there are two tiles
        ko.attention_decode_split_len = 64;
        ko.attention_tiled_prefill = path != 0;
        ko.attention_decode_gqa = path != 0 ? 1 : 0;
        ko.attention_flash = path == 2 ? 1 : 0;
        ko.attention_flash_lanes = 0;  // the Q-block kernel (windows in the lanes kernel: Ops.AttentionFlashLanes*)
        ko.attention_flash_wide = ko.attention_flash_window = path == 2;
        ko.attention_chunk = 0;  // nor the short-chunk route to it
        auto o = e.op(ko);
        const AttentionShape as{c.T, c.pos0, c.Hq, c.Hkv, c.HD, scale, c.W};
        auto ob = e.upload(std::vector<float>(want.size(), NAN));
        e.rec.set_traffic_log(true);
        e.rec.begin();
        attention(o, as, {qb, 0}, Q, kb, vb, {ob, 0}, Q, &scratch);
        e.rec.submit();
        const auto disp = e.rec.last_dispatches();
        e.rec.set_traffic_log(false);
        ASSERT_FALSE(disp.empty());
        const std::string lbl = disp[0].label;
        if (path == 1 && c.T > 1) {
          EXPECT_EQ(lbl, "attention_tiled") << what;
        }
        if (path == 2) {
          EXPECT_EQ(lbl, "attention_flash") << what;
          flash_split_runs += split && disp.size() > 1;  // attention_flash + attention_combine
        }
        expect_close(e.download(ob, want.size()), want, 1e-5f,
                     what + " path=" + std::to_string(path) + " split=" + std::to_string(split) + " " + lbl);
      }
    }
  }
  EXPECT_GT(flash_split_runs, 0u) << "no windowed flash case took the key split";
}

TEST(Ops, AttentionTiledMatchesCpu) {
  // Multi-query tiled attention (T > 1): head dims 24, 64 (and 256, Qwen3.5), GQA groups 1, 3, 4,
  // T = 2..70 over cache lengths 0..300 (ragged row and key tiles, rows that see no key of a split),
  // split over keys and not, q/out with strides and offsets like the models'. Must match the CPU
  // reference, take the tiled kernel, and give bit-identical results when run twice.
  auto& e = env();
  // qs: standard deviation of q; 40 gives scores spread over hundreds (exp overflows f32 unless the
  // running max really is the max of every key seen).
  struct Case { uint32_t HD, Hq, Hkv, T, pos0; float qs = 2.0f; };
  const std::vector<Case> cases = {{24, 3, 3, 2, 0},   {24, 9, 3, 17, 37},  {24, 9, 3, 70, 300}, {64, 3, 3, 5, 1},
                                   {64, 9, 3, 44, 300}, {64, 9, 3, 70, 0},  {64, 6, 2, 33, 129}, {256, 8, 2, 7, 90},
                                   {36, 4, 1, 3, 65},   {64, 9, 3, 20, 100, 40.0f}};
  for (const Case& c : cases) {
    const uint32_t kv_dim = c.Hkv * c.HD, ctx_len = c.pos0 + c.T, Q = c.Hq * c.HD;
    const uint32_t q_stride = Q + 2 * kv_dim, q_off = 4, o_stride = Q + 8, o_off = 3;  // as llama's qkv_
    const float scale = 1.0f / std::sqrt(float(c.HD));
    const std::string what = "HD=" + std::to_string(c.HD) + " Hq=" + std::to_string(c.Hq) + " Hkv=" +
                             std::to_string(c.Hkv) + " T=" + std::to_string(c.T) + " pos0=" + std::to_string(c.pos0);
    auto ck = randn(size_t(ctx_len) * kv_dim, c.T * 7 + 1), cv = randn(size_t(ctx_len) * kv_dim, c.T * 7 + 2);
    auto q = randn(q_off + size_t(c.T) * q_stride, c.T * 7 + 3, c.qs);
    auto kb = e.upload(ck), vb = e.upload(cv), qb = e.upload(q);
    std::vector<float> want(size_t(c.T) * Q);
    for (uint32_t t = 0; t < c.T; ++t)
      ref::attention(q.data() + q_off + t * q_stride, ck.data(), cv.data(), want.data() + t * Q, c.pos0 + t, c.Hq, c.Hkv,
                     c.HD, scale);
    gpu::Buffer scratch(*e.ctx, attention_split_floats(c.T, c.Hq, c.HD) * 4, gpu::BufferKind::Storage, "split");
    for (bool split : {false, true}) {
      KernelOptions ko;
      ko.attention_prefill_split = split;
      ko.attention_flash = 0;  // this test covers attention_tiled.wgsl (flash: below)
      ko.attention_chunk = 0;  // nor the short-chunk route to it
      auto o = e.op(ko);
      std::vector<float> first;
      for (int run = 0; run < 2; ++run) {
        auto ob = e.upload(std::vector<float>(o_off + size_t(c.T) * o_stride, NAN));
        e.rec.set_traffic_log(true);
        e.rec.begin();
        attention(o, {c.T, c.pos0, c.Hq, c.Hkv, c.HD, scale}, {qb, q_off}, q_stride, kb, vb, {ob, o_off}, o_stride, &scratch);
        e.rec.submit();
        const auto disp = e.rec.last_dispatches();
        e.rec.set_traffic_log(false);
        ASSERT_FALSE(disp.empty());
        EXPECT_EQ(disp[0].label, "attention_tiled") << what;
        if (!split) {
          EXPECT_EQ(disp.size(), 1u) << what;
        }
        auto all = e.download(ob, o_off + size_t(c.T) * o_stride);
        std::vector<float> got(want.size());
        for (uint32_t t = 0; t < c.T; ++t) {
          for (uint32_t i = 0; i < Q; ++i) got[t * Q + i] = all[o_off + t * o_stride + i];
          for (uint32_t i = Q; i < o_stride; ++i) ASSERT_TRUE(std::isnan(all[o_off + t * o_stride + i])) << what << " wrote outside its row";
        }
        // Scores of hundreds turn f32 rounding of a score (~1e-5 of it) into ~1e-3 relative weight changes.
        expect_close(got, want, c.qs > 10 ? 1e-3f : 1e-5f, what + (split ? " split" : ""));
        if (run == 0) first = got;
        else EXPECT_EQ(std::memcmp(first.data(), got.data(), got.size() * 4), 0) << what << " not deterministic";
      }
    }
  }
}

TEST(Ops, AttentionChunkTakesFlashForShortChunksOverLongCaches) {
  // KernelOptions::attention_chunk: a chat turn's new tokens over a long cache (the multi-turn shape,
  // 80 tokens with SmolLM2's 9 / 3 heads of 64, over 900 cached keys here, and awkward ones: T = 2,
  // T = kAttnChunkMaxTokens, pos0 = T, head dims 32 and 128) takes attention_flash.wgsl (with its key
  // split + combine past two 32-key tiles) where --attn-flash is off (--no-attn-flash; on by default
  // since 2026-12-03) and matches the CPU twin; with the switch off the same forward takes
  // attention_tiled.wgsl.
  auto& e = env();
  struct Case { uint32_t HD, Hq, Hkv, T, pos0; };
  const std::vector<Case> cases = {{64, 9, 3, 80, 900}, {64, 9, 3, 2, 2}, {128, 8, 2, 37, 201}, {64, 4, 1, 128, 130},
                                   {32, 6, 2, 9, 150}};
  for (const Case& c : cases) {
    const uint32_t kv_dim = c.Hkv * c.HD, ctx_len = c.pos0 + c.T, Q = c.Hq * c.HD;
    const float scale = 1.0f / std::sqrt(float(c.HD));
    const std::string what = "HD=" + std::to_string(c.HD) + " Hq=" + std::to_string(c.Hq) + " Hkv=" +
                             std::to_string(c.Hkv) + " T=" + std::to_string(c.T) + " pos0=" + std::to_string(c.pos0);
    auto ck = randn(size_t(ctx_len) * kv_dim, c.T + 11), cv = randn(size_t(ctx_len) * kv_dim, c.T + 12);
    auto q = randn(size_t(c.T) * Q, c.T + 13, 2.0f);
    auto kb = e.upload(ck), vb = e.upload(cv), qb = e.upload(q);
    std::vector<float> want(size_t(c.T) * Q);
    for (uint32_t t = 0; t < c.T; ++t)
      ref::attention(q.data() + t * Q, ck.data(), cv.data(), want.data() + t * Q, c.pos0 + t, c.Hq, c.Hkv, c.HD, scale);
    gpu::Buffer scratch(*e.ctx, attention_split_floats(c.T, c.Hq, c.HD) * 4, gpu::BufferKind::Storage, "split");
    const AttentionShape as{c.T, c.pos0, c.Hq, c.Hkv, c.HD, scale};
    KernelOptions dflt;
    dflt.attention_flash = 0;
    EXPECT_FALSE(attention_chunk_used(e.op(dflt), as)) << what << ": off by default (H200 A/B, 2026-12-02)";
    for (uint8_t chunk : {uint8_t(0), uint8_t(1)}) {
      KernelOptions ko;
      ko.attention_flash = 0;
      ko.attention_chunk = chunk;
      auto o = e.op(ko);
      ASSERT_EQ(attention_chunk_used(o, as), chunk != 0) << what;
      auto ob = e.upload(std::vector<float>(want.size(), NAN));
      e.rec.set_traffic_log(true);
      e.rec.begin();
      attention(o, as, {qb, 0}, Q, kb, vb, {ob, 0}, Q, &scratch);
      e.rec.submit();
      const auto disp = e.rec.last_dispatches();
      e.rec.set_traffic_log(false);
      ASSERT_FALSE(disp.empty()) << what;
      // (the flash kernel in either form: the lanes one where --attn-flash-lanes takes the head dim)
      const std::string lbl = disp[0].label;
      if (chunk) {
        EXPECT_TRUE(lbl == "attention_flash" || lbl == "attention_flash_sg") << what << ": " << lbl;
      } else {
        EXPECT_EQ(lbl, "attention_tiled") << what;
      }
      if (chunk && c.pos0 + c.T > 64) {
        EXPECT_EQ(disp.size(), 2u) << what << ": key split + combine";
      }
      expect_close(e.download(ob, want.size()), want, 1e-5f, what + " chunk=" + std::to_string(chunk));
    }
  }
}

TEST(Ops, AttentionChunkLeavesPrefillsAlone) {
  // Control: a prefill from an empty cache (512 or 4096 tokens, or a turn's 80 tokens at position 0),
  // a chunk longer than kAttnChunkMaxTokens (a 512-token prefill chunk late in a long prompt), fewer
  // cached keys than new tokens, and decode never take the short-chunk route: the same dispatches
  // (kernels, their order, declared traffic) with attention_chunk on and off.
  auto& e = env();
  const uint32_t HD = 64, Hq = 9, Hkv = 3, kv_dim = Hkv * HD;
  KernelOptions on, off;
  on.attention_flash = off.attention_flash = 0;  // the hardware adapters' default
  on.attention_chunk = 1;
  off.attention_chunk = 0;
  for (auto [T, pos0] : {std::pair{4096u, 0u}, {512u, 3584u}, {kAttnChunkMaxTokens + 1, 3000u}, {2u, 1u}, {1u, 2700u}})
    EXPECT_FALSE(attention_chunk_used(e.op(on), {T, pos0, Hq, Hkv, HD, 0.125f})) << T << " " << pos0;
  EXPECT_FALSE(attention_chunk_used(e.op(on), {80, 2700, Hq, Hkv, HD, 0.125f, 512})) << "sliding window";
  for (auto [T, pos0] : {std::pair{512u, 0u}, {80u, 0u}, {80u, 79u}, {kAttnChunkMaxTokens + 1, 700u}, {1u, 2700u}}) {
    EXPECT_FALSE(attention_chunk_used(e.op(on), {T, pos0, Hq, Hkv, HD, 0.125f})) << T << " " << pos0;
    auto kb = e.upload(randn(size_t(pos0 + T) * kv_dim, 1)), vb = e.upload(randn(size_t(pos0 + T) * kv_dim, 2));
    auto qb = e.upload(randn(size_t(T) * Hq * HD, 3)), ob = e.upload(std::vector<float>(size_t(T) * Hq * HD));
    gpu::Buffer scratch(*e.ctx, attention_split_floats(T, Hq, HD) * 4, gpu::BufferKind::Storage, "split");
    std::vector<std::pair<std::string, uint64_t>> plan[2];
    for (int i = 0; i < 2; ++i) {
      auto o = e.op(i ? on : off);
      e.rec.set_traffic_log(true);
      e.rec.begin();
      attention(o, {T, pos0, Hq, Hkv, HD, 0.125f}, {qb, 0}, Hq * HD, kb, vb, {ob, 0}, Hq * HD, &scratch);
      e.rec.submit();
      for (const auto& d : e.rec.last_dispatches()) plan[i].push_back({d.label, d.traffic.total()});
      e.rec.set_traffic_log(false);
    }
    EXPECT_EQ(plan[0], plan[1]) << "T=" << T << " pos0=" << pos0;
    EXPECT_NE(plan[1].front().first, "attention_flash") << "T=" << T << " pos0=" << pos0;
    EXPECT_NE(plan[1].front().first, "attention_flash_sg") << "T=" << T << " pos0=" << pos0;
  }
}

TEST(Ops, AttentionTiledSplitsWhenFewTiles) {
  // The multi-turn shape (44 new tokens over a 1700-token cache, 9 heads over 3 KV heads) has 27
  // row tiles: with --attn-prefill-split it must split over keys (2 dispatches), without it not.
  auto& e = env();
  const uint32_t HD = 64, Hq = 9, Hkv = 3, T = 44, pos0 = 1700, kv_dim = Hkv * HD;
  auto kb = e.upload(randn(size_t(pos0 + T) * kv_dim, 1)), vb = e.upload(randn(size_t(pos0 + T) * kv_dim, 2));
  auto qb = e.upload(randn(size_t(T) * Hq * HD, 3)), ob = e.upload(std::vector<float>(size_t(T) * Hq * HD));
  gpu::Buffer scratch(*e.ctx, attention_split_floats(64, Hq, HD) * 4, gpu::BufferKind::Storage, "split");
  for (bool split : {false, true}) {
    KernelOptions ko;
    ko.attention_prefill_split = split;
    ko.attention_flash = 0;
    ko.attention_chunk = 0;  // nor the short-chunk route to it
    auto o = e.op(ko);
    e.rec.set_traffic_log(true);
    e.rec.begin();
    attention(o, {T, pos0, Hq, Hkv, HD, 0.125f}, {qb, 0}, Hq * HD, kb, vb, {ob, 0}, Hq * HD, &scratch);
    e.rec.submit();
    EXPECT_EQ(e.rec.last_dispatches().size(), split ? 2u : 1u);
    e.rec.set_traffic_log(false);
  }
}

TEST(Ops, AttentionDecodeGqaMatchesCpu) {
  // Decode attention (T = 1) with one workgroup per (KV head, key split) serving the whole GQA
  // group (attention_decode.wgsl): head dims 24/36/64/128/256, groups 1/3/4/8, caches 1..3000 keys,
  // unsplit and split (several split lengths, ragged last split, splits shorter and longer than a
  // tile), q/out at offsets; must match the CPU reference, take the decode kernel, write nothing
  // outside its rows and be bit-identical when run twice. Scores of hundreds (qs = 40) check the
  // running max.
  auto& e = env();
  // Each case with its (split_min, split_len) settings: {1 << 30, 256} never splits; {100, 64}
  // splits past 100 keys into half-tile splits; {100, 300} into ragged multi-tile splits.
  using Splits = std::vector<std::pair<uint32_t, uint32_t>>;
  const Splits never = {{1u << 30, 256}}, both = {{1u << 30, 256}, {100, 64}}, multi = {{100, 300}};
  struct Case { uint32_t HD, Hq, Hkv, pos0; Splits splits; float qs = 2.0f; };
  const std::vector<Case> cases = {{64, 9, 3, 0, never},      {64, 9, 3, 1, never},     {64, 9, 3, 128, both},
                                   {64, 9, 3, 767, multi},    {64, 9, 3, 2999, {{1024, 256}}},
                                   {24, 3, 3, 300, both},     {36, 4, 1, 130, both},    {128, 8, 2, 400, multi},
                                   {256, 8, 2, 200, both},    {64, 8, 1, 129, never},   {64, 6, 2, 300, both, 40.0f}};
  for (const Case& c : cases) {
    const uint32_t kv_dim = c.Hkv * c.HD, n_keys = c.pos0 + 1, Q = c.Hq * c.HD, q_off = 4, o_off = 3;
    const float scale = 1.0f / std::sqrt(float(c.HD));
    const std::string what = "HD=" + std::to_string(c.HD) + " Hq=" + std::to_string(c.Hq) + " Hkv=" +
                             std::to_string(c.Hkv) + " pos0=" + std::to_string(c.pos0);
    auto ck = randn(size_t(n_keys) * kv_dim, c.pos0 * 3 + 1), cv = randn(size_t(n_keys) * kv_dim, c.pos0 * 3 + 2);
    auto q = randn(q_off + size_t(Q), c.pos0 * 3 + 3, c.qs);
    auto kb = e.upload(ck), vb = e.upload(cv), qb = e.upload(q);
    std::vector<float> want(Q);
    ref::attention(q.data() + q_off, ck.data(), cv.data(), want.data(), c.pos0, c.Hq, c.Hkv, c.HD, scale);
    gpu::Buffer scratch(*e.ctx, attention_split_floats(1, c.Hq, c.HD) * 4, gpu::BufferKind::Storage, "split");
    for (auto [smin, slen] : c.splits) for (bool sg : {true, false}) {
      KernelOptions ko;
      ko.attention_decode_subgroups = sg;
      ko.attention_decode_gqa = 1;
      ko.attention_decode_split_min = smin;
      ko.attention_decode_split_len = slen;
      auto o = e.op(ko);
      ASSERT_TRUE(attention_decode_applies(o, {1, c.pos0, c.Hq, c.Hkv, c.HD, scale})) << what;
      const std::string w = what + " split_min=" + std::to_string(smin) + " split_len=" + std::to_string(slen) + (sg ? " sg" : "");
      std::vector<float> first;
      for (int run = 0; run < 2; ++run) {
        auto ob = e.upload(std::vector<float>(o_off + Q + 5, NAN));
        e.rec.set_traffic_log(true);
        e.rec.begin();
        attention(o, {1, c.pos0, c.Hq, c.Hkv, c.HD, scale}, {qb, q_off}, 0, kb, vb, {ob, o_off}, Q, &scratch);
        e.rec.submit();
        const auto disp = e.rec.last_dispatches();
        e.rec.set_traffic_log(false);
        ASSERT_FALSE(disp.empty());
        EXPECT_EQ(disp.size(), n_keys > smin && n_keys > std::max(slen, (n_keys + 31) / 32) ? 2u : 1u) << w;
        auto all = e.download(ob, o_off + Q + 5);
        std::vector<float> got(all.begin() + o_off, all.begin() + o_off + Q);
        for (uint32_t i = 0; i < o_off; ++i) ASSERT_TRUE(std::isnan(all[i])) << w << " wrote before its row";
        for (uint32_t i = o_off + Q; i < all.size(); ++i) ASSERT_TRUE(std::isnan(all[i])) << w << " wrote after its row";
        expect_close(got, want, c.qs > 10 ? 1e-3f : 1e-5f, w);
        if (run == 0) first = got;
        else EXPECT_EQ(std::memcmp(first.data(), got.data(), got.size() * 4), 0) << w << " not deterministic";
      }
    }
  }
}

// --attn-decode-k-batch (KB: K-row vec4 loaded together) is a scheduling knob: outputs bit-identical
// for KB 1, 8 and 32 (halved to the head dim's divisor: 32 at HD 128 is 32), head dims 36 (HD4 = 9:
// every KB falls back to 1) unsplit and 128 split.
// Checked to fail: summing the KB block's products in reverse (u = KB - 1 .. 0) fails HD 128.
TEST(Ops, AttentionDecodeKBatchIsBitExact) {
  auto& e = env();
  for (auto [HD, split_len] : {std::pair{36u, 4096u}, std::pair{128u, 64u}}) {
    const uint32_t Hq = 6, Hkv = 2, pos0 = 300, kv_dim = Hkv * HD, Q = Hq * HD;
    auto kb = e.upload(randn(size_t(pos0 + 1) * kv_dim, HD + 1)), vb = e.upload(randn(size_t(pos0 + 1) * kv_dim, HD + 2));
    auto qb = e.upload(randn(Q, HD + 3, 2.0f));
    gpu::Buffer scratch(*e.ctx, attention_split_floats(1, Hq, HD) * 4, gpu::BufferKind::Storage, "split");
    std::vector<float> first;
    for (uint32_t k : {1u, 8u, 32u}) {  // (each a pipeline compile on lavapipe, ~10 s: kept short)
      KernelOptions ko;
      ko.attention_decode_gqa = 1, ko.attention_decode_split_min = 0, ko.attention_decode_split_len = split_len;
      ko.attention_decode_k_batch = k;
      ko.attention_decode_prefetch = 0;  // the prefetch loads a thread's whole share and ignores KB
      auto o = e.op(ko);
      auto ob = e.upload(std::vector<float>(Q));
      e.rec.begin();
      attention(o, {1, pos0, Hq, Hkv, HD, 0.125f}, {qb, 0}, 0, kb, vb, {ob, 0}, Q, &scratch);
      e.rec.submit();
      auto got = e.download(ob, Q);
      if (k == 1) first = got;
      else EXPECT_EQ(std::memcmp(first.data(), got.data(), Q * 4), 0)
          << "HD=" << HD << " split_len=" << split_len << " KB=" << k << " differs from KB=1";
    }
  }
}

// --attn-decode-late-v (LV: V loaded in the PV phase, 8 vec4 at a time for all G heads) keeps every
// head's products in key order: bit-identical to LV 0, at head dims 64 and 128 (KPT 16 and 32, two
// and four V batches), ragged last key tiles, unsplit and split, a sliding window.
TEST(Ops, AttentionDecodeLateVIsBitExact) {
  auto& e = env();
  struct Case { uint32_t HD, Hq, Hkv, pos0, split_len, window; };
  for (const Case& c : {Case{64, 9, 3, 300, 4096, 0}, Case{128, 6, 2, 200, 64, 0}, Case{128, 12, 2, 517, 128, 0},
                        Case{64, 4, 2, 400, 4096, 150}}) {
    const uint32_t kv_dim = c.Hkv * c.HD, Q = c.Hq * c.HD;
    auto kb = e.upload(randn(size_t(c.pos0 + 1) * kv_dim, c.HD + 31)), vb = e.upload(randn(size_t(c.pos0 + 1) * kv_dim, c.HD + 32));
    auto qb = e.upload(randn(Q, c.HD + 33, 2.0f));
    gpu::Buffer scratch(*e.ctx, attention_split_floats(1, c.Hq, c.HD) * 4, gpu::BufferKind::Storage, "split");
    std::vector<float> out[2];
    for (bool lv : {false, true}) {
      KernelOptions ko;
      ko.attention_decode_gqa = 1, ko.attention_decode_split_min = 0, ko.attention_decode_split_len = c.split_len;
      ko.attention_decode_late_v = lv;
      auto o = e.op(ko);
      AttentionShape s{1, c.pos0, c.Hq, c.Hkv, c.HD, 0.125f};
      s.window = c.window;
      ASSERT_TRUE(attention_decode_applies(o, s));
      auto ob = e.upload(std::vector<float>(Q, NAN));
      e.rec.begin();
      attention(o, s, {qb, 0}, 0, kb, vb, {ob, 0}, Q, &scratch);
      e.rec.submit();
      out[lv] = e.download(ob, Q);
    }
    ASSERT_FALSE(std::isnan(out[1][0]));
    EXPECT_EQ(std::memcmp(out[0].data(), out[1].data(), Q * 4), 0)
        << "HD=" << c.HD << " split_len=" << c.split_len << " window=" << c.window << ": LV 1 differs from LV 0";
  }
}

// --attn-decode-key-lanes (KL threads per key in the score phase, partial dot products summed by
// subgroup shuffles): matches the CPU reference at head dims 64 and 128 with KL 2 / 4 / 8, ragged
// last tiles (KT = 128 / KL keys per tile), unsplit and split (splits shorter than, equal to and
// longer than a tile), a sliding window; deterministic; KL 1 is the plain kernel. Without
// subgroups the kernel takes KL 1 (no shuffles).
// Checked to fail: the shuffle loop stopping one step early (off < KL / 2).
namespace {
// A decode attention case: random K/V cache rows 0..pos0 and a query (seeds from `seed`) on the GPU,
// and the CPU reference's output over the visible keys (with a window, its first key as key 0).
struct DecodeCase {
  uint32_t HD, Hq, Hkv, pos0, split_len, window;
};
struct DecodeInputs {
  gpu::Buffer kb, vb, qb;
  std::vector<float> want;
};
DecodeInputs decode_inputs(GpuEnv& e, const DecodeCase& c, uint32_t seed) {
  const uint32_t kv_dim = c.Hkv * c.HD, Q = c.Hq * c.HD, n_keys = c.pos0 + 1;
  auto ck = randn(size_t(n_keys) * kv_dim, c.HD + seed), cv = randn(size_t(n_keys) * kv_dim, c.HD + seed + 1);
  auto q = randn(Q, c.HD + seed + 2, 2.0f);
  const uint32_t k_lo = c.window && n_keys > c.window ? n_keys - c.window : 0;
  std::vector<float> want(Q);
  ref::attention(q.data(), ck.data() + size_t(k_lo) * kv_dim, cv.data() + size_t(k_lo) * kv_dim, want.data(),
                 c.pos0 - k_lo, c.Hq, c.Hkv, c.HD, 1.0f / std::sqrt(float(c.HD)));
  return {e.upload(ck), e.upload(cv), e.upload(q), std::move(want)};
}
// One launch of the decode kernel for case c under ko (gqa on, splits of c.split_len from any length):
// its output, Q floats (NaN where unwritten); empty, with a test failure, if the kernel does not apply.
std::vector<float> decode_run(GpuEnv& e, KernelOptions ko, const DecodeCase& c, const DecodeInputs& in,
                              gpu::Buffer& scratch) {
  ko.attention_decode_gqa = 1, ko.attention_decode_split_min = 0, ko.attention_decode_split_len = c.split_len;
  auto o = e.op(ko);
  AttentionShape s{1, c.pos0, c.Hq, c.Hkv, c.HD, 1.0f / std::sqrt(float(c.HD))};
  s.window = c.window;
  if (!attention_decode_applies(o, s)) {
    ADD_FAILURE() << "the decode kernel does not apply";
    return {};
  }
  const uint32_t Q = c.Hq * c.HD;
  auto ob = e.upload(std::vector<float>(Q, NAN));
  e.rec.begin();
  attention(o, s, {in.qb, 0}, 0, in.kb, in.vb, {ob, 0}, Q, &scratch);
  e.rec.submit();
  return e.download(ob, Q);
}
}  // namespace

TEST(Ops, AttentionDecodeKeyLanesMatchCpu) {
  auto& e = env();
  if (!e.ctx->has_subgroups()) GTEST_SKIP() << "adapter without subgroups: KL is always 1";
  using Case = DecodeCase;
  for (const Case& c : {Case{64, 9, 3, 300, 4096, 0}, Case{128, 6, 2, 200, 16, 0}, Case{128, 12, 2, 517, 128, 0},
                        Case{64, 4, 2, 400, 40, 150}}) {
    const uint32_t Q = c.Hq * c.HD;
    const DecodeInputs in = decode_inputs(e, c, 41);
    gpu::Buffer scratch(*e.ctx, attention_split_floats(1, c.Hq, c.HD) * 4, gpu::BufferKind::Storage, "split");
    for (uint32_t kl : {2u, 4u, 8u}) {
      KernelOptions ko;
      ko.attention_decode_key_lanes = kl;
      const std::string w = "HD=" + std::to_string(c.HD) + " split_len=" + std::to_string(c.split_len) +
                            " window=" + std::to_string(c.window) + " KL=" + std::to_string(kl);
      std::vector<float> first;
      for (int run = 0; run < 2; ++run) {
        auto got = decode_run(e, ko, c, in, scratch);
        ASSERT_EQ(got.size(), Q) << w;
        expect_close(got, in.want, 1e-5f, w);
        if (run == 0) first = got;
        else EXPECT_EQ(std::memcmp(first.data(), got.data(), Q * 4), 0) << w << " not deterministic";
      }
    }
  }
}

// --attn-decode-threads (NT) and --attn-decode-prefetch (PF: a tile's K and V shares held in
// registers, the first tile loaded before the query, the next while the current one is used): the
// former default (NT 128, KL 1) and the GPU default (NT 256, KL 2) match the CPU reference, and PF 1
// is bit-identical to PF 0 for each: head dims 128 (several tiles per split, a ragged last one) and 64
// (a sliding window, splits shorter than a tile). (Few cases: lavapipe compiles each variant in ~5-10 s.)
// Checked to fail: the next tile's K loaded from kb instead of kn (PF differs from PF 0).
TEST(Ops, AttentionDecodeThreadsAndPrefetch) {
  auto& e = env();
  using Case = DecodeCase;
  std::vector<std::pair<uint32_t, uint32_t>> shapes{{128, 1}};  // (NT, KL)
  if (e.ctx->has_subgroups()) shapes.push_back({256, 2});
  for (const Case& c : {Case{128, 12, 2, 517, 300, 0}, Case{64, 4, 2, 400, 40, 150}}) {
    const uint32_t Q = c.Hq * c.HD;
    const DecodeInputs in = decode_inputs(e, c, 61);
    gpu::Buffer scratch(*e.ctx, attention_split_floats(1, c.Hq, c.HD) * 4, gpu::BufferKind::Storage, "split");
    for (const auto& [nt, kl] : shapes) {
        std::vector<float> out[2];
        for (bool pf : {false, true}) {
          KernelOptions ko;
          ko.attention_decode_threads = nt, ko.attention_decode_key_lanes = kl, ko.attention_decode_prefetch = pf;
          out[pf] = decode_run(e, ko, c, in, scratch);
          ASSERT_EQ(out[pf].size(), Q);
        }
        const std::string w = "HD=" + std::to_string(c.HD) + " split_len=" + std::to_string(c.split_len) +
                              " window=" + std::to_string(c.window) + " NT=" + std::to_string(nt) +
                              " KL=" + std::to_string(kl);
        expect_close(out[0], in.want, 1e-5f, w);
        EXPECT_EQ(std::memcmp(out[0].data(), out[1].data(), Q * 4), 0) << w << ": PF 1 differs from PF 0";
    }
  }
}

TEST(Ops, AttentionDecodeGqaSwitch) {
  // --no-attn-decode-gqa (0) keeps the per-row kernel; T > 1 never takes the decode kernel.
  auto& e = env();
  KernelOptions ko;
  ko.attention_decode_gqa = 0;
  EXPECT_FALSE(attention_decode_applies(e.op(ko), {1, 10, 9, 3, 64, 0.125f}));
  ko.attention_decode_gqa = 1;
  EXPECT_TRUE(attention_decode_applies(e.op(ko), {1, 10, 9, 3, 64, 0.125f}));
  EXPECT_FALSE(attention_decode_applies(e.op(ko), {2, 10, 9, 3, 64, 0.125f}));
  EXPECT_FALSE(attention_decode_applies(e.op(ko), {1, 10, 64, 1, 256, 0.125f}));  // group too large: per-row kernel
}

// Continuous batching over a KV pool (--batch-decode-attn): attention_decode_batch() over several
// sequences whose caches are rows of one buffer gives each sequence's output bit-identical to
// attention() of that sequence alone, bound to its own range of the pool (as the per-sequence path
// of a batched forward binds it): positions from 5 to 300 (so with 64-key splits some sequences
// split and some do not, and the launch's largest split count exceeds most), query rows out of
// order, split on and off, key lanes 1 and 8 where the adapter has subgroups, head dims 64 and 128.
// Checked to fail: a sequence's records placed at the launch's split count of another row
// (((j * Hq + h) * n_split ...) with j = 0), and the merge taking the launch's n_split for every row.
TEST(Ops, AttentionDecodeBatchBitIdenticalToEachAlone) {
  auto& e = env();
  struct Case { uint32_t HD, Hq, Hkv; bool split; uint32_t kl; bool pf = false; uint32_t nt = 0; };
  std::vector<Case> cases{{64, 9, 3, true, 1}, {64, 9, 3, false, 1}, {128, 12, 2, true, 1}, {64, 9, 3, true, 1, true, 128}};
  if (e.ctx->has_subgroups()) cases.push_back({128, 12, 2, true, 8});
  if (e.ctx->has_subgroups()) cases.push_back({128, 12, 2, true, 2, true, 256});
  const std::vector<uint32_t> pos = {300, 5, 200, 130, 64};
  const std::vector<uint32_t> rows = {3, 0, 4, 1, 2};  // each sequence's row of q and out
  const uint32_t stride = 320, n = uint32_t(pos.size());  // pool rows per sequence (a multiple of 64)
  for (const Case& c : cases) {
    const uint32_t kv_dim = c.Hkv * c.HD, Q = c.Hq * c.HD, q_stride = Q + 2 * kv_dim;
    auto kb = e.upload(randn(size_t(n) * stride * kv_dim, c.HD + 51)), vb = e.upload(randn(size_t(n) * stride * kv_dim, c.HD + 52));
    auto qb = e.upload(randn(size_t(n) * q_stride, c.HD + 53, 2.0f));
    gpu::Buffer scratch(*e.ctx, attention_split_floats(1, c.Hq, c.HD) * 4, gpu::BufferKind::Storage, "split");
    KernelOptions ko;
    // (PF: 200-key splits, two 128-key tiles each, so the next tile's loads run in the batched launch)
    ko.attention_decode_gqa = 1, ko.attention_decode_split_min = 0, ko.attention_decode_split_len = c.pf ? 200 : 64;
    ko.attention_decode_split = c.split, ko.attention_decode_key_lanes = c.kl;
    ko.attention_decode_prefetch = c.pf, ko.attention_decode_threads = c.nt;
    auto o = e.op(ko);
    const float scale = 1.0f / std::sqrt(float(c.HD));
    // Alone: each sequence's range of the pool, its output at its row.
    auto alone = e.upload(std::vector<float>(size_t(n) * Q, NAN));
    std::vector<uint32_t> tab;
    uint32_t max_split = 1;
    uint64_t keys = 0;
    for (uint32_t j = 0; j < n; ++j) {
      const AttentionShape s{1, pos[j], c.Hq, c.Hkv, c.HD, scale};
      ASSERT_TRUE(attention_decode_applies(o, s));
      const uint64_t off = uint64_t(j) * stride * kv_dim * 4, bytes = uint64_t(stride) * kv_dim * 4;
      e.rec.begin();
      attention(o, s, {qb, rows[j] * q_stride}, 0, gpu::Binding(kb, off, bytes), gpu::Binding(vb, off, bytes),
                {alone, rows[j] * Q}, Q, &scratch);
      e.rec.submit();
      const DecodeSplit d = attention_decode_split(o, s, &scratch);
      tab.insert(tab.end(), {rows[j], pos[j], j * stride, d.n_split > 1 ? d.split_len : pos[j] + 1});
      max_split = std::max(max_split, d.n_split);
      keys += pos[j] + 1;
    }
    EXPECT_EQ(max_split > 1, c.split);
    // Together: one launch over the pool (table entries after 3 unrelated ones: tab_off 3).
    std::vector<uint32_t> padded(12, 0xFFFFFFFFu);
    padded.insert(padded.end(), tab.begin(), tab.end());
    gpu::Buffer tb(*e.ctx, padded.size() * 4, gpu::BufferKind::Storage, "tab");
    tb.write(*e.ctx, 0, padded.data(), padded.size() * 4);
    // Records past a sequence's own splits are never written: NaN there fails a merge that reads them.
    auto part = e.upload(std::vector<float>(size_t(n) * c.Hq * max_split * (c.HD + 2), NAN));
    auto together = e.upload(std::vector<float>(size_t(n) * Q, NAN));
    e.rec.begin();
    const uint32_t d = attention_decode_batch(o, {1, 0, c.Hq, c.Hkv, c.HD, scale}, {qb, 0}, q_stride, kb, vb, {together, 0}, Q, tb,
                                              3, n, max_split, keys, &part);
    e.rec.submit();
    EXPECT_EQ(d, c.split ? 2u : 1u);
    const auto a = e.download(alone, size_t(n) * Q), b = e.download(together, size_t(n) * Q);
    ASSERT_FALSE(std::isnan(a[0]));
    for (uint32_t j = 0; j < n; ++j)
      EXPECT_EQ(std::memcmp(a.data() + size_t(rows[j]) * Q, b.data() + size_t(rows[j]) * Q, Q * 4), 0)
          << "HD=" << c.HD << " split=" << c.split << " KL=" << c.kl << " PF=" << c.pf << " NT=" << c.nt << " sequence " << j << " at position " << pos[j];
  }
  // Refused: a scratch too small for the launch, more than 32 splits, a window.
  KernelOptions ko;
  ko.attention_decode_gqa = 1;
  auto o = e.op(ko);
  gpu::Buffer small(*e.ctx, 64, gpu::BufferKind::Storage, "small");
  const AttentionShape s{1, 0, 4, 2, 64, 1.0f};
  EXPECT_THROW(attention_decode_batch(o, s, {small, 0}, 0, small, small, {small, 0}, 0, small, 0, 2, 4, 0, &small), Error);
  EXPECT_THROW(attention_decode_batch(o, s, {small, 0}, 0, small, small, {small, 0}, 0, small, 0, 2, 33, 0, &small), Error);
  AttentionShape w = s;
  w.window = 8;
  EXPECT_THROW(attention_decode_batch(o, w, {small, 0}, 0, small, small, {small, 0}, 0, small, 0, 2, 1, 0, nullptr), Error);
}

// Continuous batching over a KV pool (--batch-rope-kv): rope_kv_store_rows() over the rows of three
// sequences (prefill rows and one-token rows, out of order in src) writes q rows and both caches
// bit-identical to rope_kv_store() per sequence into its own range of the pool; both pair layouts,
// partial rotary dims. Checked to fail: the cache row taken from the position instead of the entry.
TEST(Ops, RopeKvStoreRowsBitIdenticalToEachSequence) {
  auto& e = env();
  const uint32_t Hq = 4, Hkv = 2, HD = 16, kv_dim = Hkv * HD, Q = Hq * HD, stride = Q + 2 * kv_dim, ctx = 64;
  struct Seq { uint32_t row0, T, pos0; };
  const std::vector<Seq> seqs = {{5, 1, 40}, {0, 5, 0}, {6, 2, 17}};  // rows [5], [0, 5), [6, 8)
  const uint32_t rows = 8;
  const std::vector<float> table = rope_table(ctx, 12, 10000.0f);
  auto tb = e.upload(table);
  for (bool neox : {false, true}) {
    const std::vector<float> src = randn(size_t(rows) * stride, neox ? 61 : 62);
    auto s1 = e.upload(src), s2 = e.upload(src);
    auto k1 = e.upload(std::vector<float>(size_t(seqs.size()) * ctx * kv_dim, 0.0f)), v1 = e.upload(std::vector<float>(size_t(seqs.size()) * ctx * kv_dim, 0.0f));
    auto k2 = e.upload(std::vector<float>(size_t(seqs.size()) * ctx * kv_dim, 0.0f)), v2 = e.upload(std::vector<float>(size_t(seqs.size()) * ctx * kv_dim, 0.0f));
    auto o = e.op(KernelOptions{});
    std::vector<uint32_t> tab;
    e.rec.begin();
    for (uint32_t j = 0; j < seqs.size(); ++j) {
      const Seq& q = seqs[j];
      const uint64_t off = uint64_t(j) * ctx * kv_dim * 4, bytes = uint64_t(ctx) * kv_dim * 4;
      rope_kv_store(o, s1, q.row0 * stride, stride, q.row0 * stride + Q, q.row0 * stride + Q + kv_dim, stride, q.T, Hq, Hkv, HD, 12,
                    q.pos0, tb, neox, gpu::Binding(k1, off, bytes), gpu::Binding(v1, off, bytes));
      for (uint32_t t = 0; t < q.T; ++t) tab.insert(tab.end(), {q.row0 + t, q.pos0 + t, j * ctx + q.pos0 + t, 0});
    }
    e.rec.submit();
    gpu::Buffer rb(*e.ctx, tab.size() * 4, gpu::BufferKind::Storage, "rows");
    rb.write(*e.ctx, 0, tab.data(), tab.size() * 4);
    e.rec.begin();
    rope_kv_store_rows(o, s2, 0, stride, Q, Q + kv_dim, stride, Hq, Hkv, HD, 12, tb, neox, k2, v2, rb, 0, rows);
    e.rec.submit();
    const size_t nc = seqs.size() * ctx * kv_dim;
    const auto a = e.download(s1, size_t(rows) * stride), b = e.download(s2, size_t(rows) * stride);
    for (uint32_t r = 0; r < rows; ++r)  // q rows (rotated in place); k / v rows of src are not read back
      EXPECT_EQ(std::memcmp(a.data() + size_t(r) * stride, b.data() + size_t(r) * stride, Q * 4), 0) << "neox=" << neox << " q row " << r;
    EXPECT_EQ(e.download(k1, nc), e.download(k2, nc)) << "neox=" << neox << ": key caches differ";
    EXPECT_EQ(e.download(v1, nc), e.download(v2, nc)) << "neox=" << neox << ": value caches differ";
  }
}
