// Gated DeltaNet / Qwen3.5 ops: each GPU op against its CPU twin (kernels/gdn_ref.h) at awkward
// sizes, and the chunked delta rule (CPU twin and GPU) against the plain per-token recurrence.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/error.h"
#include "kernels/gdn_ops.h"
#include "kernels/gdn_ref.h"
#include "kernels/ref.h"
#include "kernels/kernel_test_env.h"

using namespace wgllm;
using namespace wgllm::kernels;
using namespace wgllm::kernels::testing;

namespace {

// |got - want| <= tol * max|want| + 1e-6 everywhere.
void expect_close(const std::vector<float>& got, const std::vector<float>& want, float tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  float mx = 0;
  for (float v : want) mx = std::max(mx, std::fabs(v));
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= tol * mx + 1e-6f) && ++bad < 5)
      ADD_FAILURE() << what << " [" << i << "] got " << got[i] << " want " << want[i];
  EXPECT_EQ(bad, 0u) << what;
}

// Random delta-rule operands in the model's layout: qkv rows [q | k | v] (q, k L2-normalised),
// gates rows [g | beta]; rows past T are NaN so that any read past the sequence poisons results.
struct GdnCase {
  uint32_t T, NK, NV, DK, DV, rows;
  uint32_t stride() const { return 2 * NK * DK + NV * DV + 3; }  // + 3: padding columns
  std::vector<float> qkv, gates, state;
  GdnCase(uint32_t T_, uint32_t NK_, uint32_t NV_, uint32_t DK_, uint32_t DV_, uint32_t seed)
      : T(T_), NK(NK_), NV(NV_), DK(DK_), DV(DV_), rows(T_ + 5) {
    qkv = randn(size_t(rows) * stride(), seed);
    for (uint32_t t = 0; t < T; ++t) ref::l2norm_heads(&qkv[size_t(t) * stride()], 2 * NK, DK, DK, 1e-6f);
    std::mt19937 g(seed + 1);
    std::uniform_real_distribution<float> ug(-3.0f, 0.0f), ub(0.0f, 1.0f);
    gates.resize(size_t(rows) * 2 * NV);
    for (uint32_t t = 0; t < rows; ++t)
      for (uint32_t h = 0; h < NV; ++h) {
        gates[t * 2 * NV + h] = t % 7 == 3 ? 0.0f : -ug(g) * ug(g) / 3.0f;  // some steps without decay
        gates[t * 2 * NV + NV + h] = ub(g);
      }
    for (size_t i = size_t(T) * stride(); i < qkv.size(); ++i) qkv[i] = NAN;
    for (size_t i = size_t(T) * 2 * NV; i < gates.size(); ++i) gates[i] = NAN;
    state = randn(size_t(NV) * DK * DV, seed + 2, 0.3f);
  }
  ref::GdnArgs args(float* st, float* out) const {
    return ref::GdnArgs{qkv.data(), qkv.data() + NK * DK, qkv.data() + 2 * NK * DK, gates.data(), gates.data() + NV,
                        stride(), stride(), 2 * NV, st, out, NV * DV, T, NK, NV, DK, DV, 1.0f / std::sqrt(float(DK))};
  }
};

}  // namespace

TEST(GdnOps, HeadNormsL2AndRms) {
  auto& e = env();
  const uint32_t T = 5, H = 3, D = 70, hs = 75, stride = H * hs + 9, off = 2;
  auto x = randn(off + size_t(T) * stride, 1, 2.0f), w = randn(D, 2);
  for (bool l2 : {true, false}) {
    auto xb = e.upload(x), wb = e.upload(w);
    auto o = e.op();
    e.rec.begin();
    if (l2) l2norm_heads(o, {xb, off}, stride, hs, T, H, D, 1e-6f);
    else rmsnorm_heads(o, {xb, off}, stride, hs, T, H, D, wb, 1e-6f);
    e.rec.submit();
    std::vector<float> want = x;
    for (uint32_t t = 0; t < T; ++t) {
      float* r = want.data() + off + size_t(t) * stride;
      if (l2) ref::l2norm_heads(r, H, D, hs, 1e-6f);
      else ref::rmsnorm_heads(r, w.data(), H, D, hs, 1e-6f);
    }
    expect_close(e.download(xb, x.size()), want, 2e-6f, l2 ? "l2norm" : "rmsnorm_heads");
  }
}

TEST(GdnOps, GatedRmsnormSigmoidGateAndGates) {
  auto& e = env();
  const uint32_t T = 4, H = 3, D = 20, xs = H * D + 4, zs = H * D + 7;
  auto x = randn(size_t(T) * xs, 3, 2.0f), z = randn(size_t(T) * zs, 4, 3.0f), w = randn(D, 5);
  auto xb = e.upload(x), zb = e.upload(z), wb = e.upload(w);
  auto o = e.op();
  e.rec.begin();
  gated_rmsnorm(o, {xb, 1}, xs, {zb, 2}, zs, wb, T, H, D, 1e-6f);
  e.rec.submit();
  std::vector<float> want = x;
  for (uint32_t t = 0; t < T; ++t) ref::gated_rmsnorm(&want[1 + t * xs], &z[2 + t * zs], w.data(), H, D, 1e-6f);
  expect_close(e.download(xb, x.size()), want, 2e-6f, "gated_rmsnorm");

  const uint32_t N = 131;
  auto a = randn(size_t(T) * N, 6), g = randn(size_t(T) * (N + 5), 7, 4.0f);
  auto ab = e.upload(a), gb = e.upload(g);
  e.rec.begin();
  sigmoid_gate(o, {ab, 0}, N, {gb, 5}, N + 5, T, N);
  e.rec.submit();
  std::vector<float> wa = a;
  for (uint32_t t = 0; t < T; ++t) ref::sigmoid_gate(&wa[t * N], &g[5 + t * (N + 5)], N);
  expect_close(e.download(ab, a.size()), wa, 2e-6f, "sigmoid_gate");

  // Gates over a wide range of a + dt_bias (softplus branches: < -9, moderate, > 20).
  const uint32_t NV = 5, S = 2 * NV + 3;
  std::vector<float> src(size_t(T) * S);
  for (size_t i = 0; i < src.size(); ++i) src[i] = -30.0f + 60.0f * float((i * 37) % 101) / 100.0f;
  auto alog = randn(NV, 8), dt = randn(NV, 9);
  auto sb = e.upload(src), lb = e.upload(alog), db = e.upload(dt), ob = e.upload(std::vector<float>(size_t(T) * 2 * NV));
  e.rec.begin();
  gdn_gates(o, sb, 0, NV, S, lb, db, {ob, 0}, 2 * NV, T, NV);
  e.rec.submit();
  std::vector<float> wg(size_t(T) * 2 * NV);
  for (uint32_t t = 0; t < T; ++t)
    ref::gdn_gates(&src[t * S], &src[t * S + NV], alog.data(), dt.data(), &wg[t * 2 * NV], &wg[t * 2 * NV + NV], NV);
  auto got = e.download(ob, wg.size());
  for (size_t i = 0; i < wg.size(); ++i)
    EXPECT_NEAR(got[i], wg[i], 2e-6f * std::max(1.0f, std::fabs(wg[i]))) << i;
}

TEST(GdnOps, ChunkedCpuFormEqualsRecurrence) {
  for (uint32_t T : {1u, 2u, 63u, 64u, 65u, 130u})
    for (uint32_t C : {1u, 5u, 64u}) {
      GdnCase c(T, 2, 6, 12, 9, T * 3 + C);
      std::vector<float> s1 = c.state, s2 = c.state, o1(size_t(T) * c.NV * c.DV), o2 = o1;
      ref::gated_delta_rule(c.args(s1.data(), o1.data()));
      ref::gated_delta_rule_chunked(c.args(s2.data(), o2.data()), C);
      const std::string w = "T=" + std::to_string(T) + " C=" + std::to_string(C);
      expect_close(o2, o1, 1e-5f, "out " + w);
      expect_close(s2, s1, 1e-5f, "state " + w);
    }
}

// GPU step / chunked vs the CPU recurrence and the CPU chunked twin; NaN rows past T and a NaN-filled
// work buffer check that nothing past the sequence (the padding of a partial chunk) is used.
TEST(GdnOps, DeltaRuleGpuMatchesCpu) {
  auto& e = env();
  for (uint32_t T : {1u, 7u, 64u, 130u})
    for (uint32_t C : {64u, 16u, 1u}) {
      GdnCase c(T, 2, 6, 12, 70, T + 11 * C);
      std::vector<float> rs = c.state, ro(size_t(T) * c.NV * c.DV), cs = c.state, co = ro;
      ref::gated_delta_rule(c.args(rs.data(), ro.data()));
      ref::gated_delta_rule_chunked(c.args(cs.data(), co.data()), C);
      for (bool step : {false, true}) {
        if (step && T != 1) continue;
        auto qb = e.upload(c.qkv), gb = e.upload(c.gates), sb = e.upload(c.state);
        auto ob = e.upload(std::vector<float>(ro.size() + 8, NAN));
        KernelOptions ko;
        ko.gdn_chunk = C;
        auto wb = e.upload(std::vector<float>(gdn_chunk_work_floats(T, C, c.NV, c.DK, c.DV) + 16, NAN));
        auto o = e.op(ko);
        GdnOperands a{qb, 0, c.NK * c.DK, 2 * c.NK * c.DK, c.stride(), gb, 0, 2 * c.NV, sb, ob, 0, c.NV * c.DV,
                      T, c.NK, c.NV, c.DK, c.DV, 1.0f / std::sqrt(float(c.DK))};
        e.rec.begin();
        if (step) gdn_step(o, a);
        else gdn_chunked(o, a, wb);
        e.rec.submit();
        const std::string w = std::string(step ? "step" : "chunked") + " T=" + std::to_string(T) + " C=" + std::to_string(C);
        auto go = e.download(ob, ro.size()), gs = e.download(sb, rs.size());
        expect_close(go, ro, 2e-5f, "out vs recurrence " + w);
        expect_close(gs, rs, 2e-5f, "state vs recurrence " + w);
        if (!step) {
          expect_close(go, co, 2e-6f, "out vs chunked twin " + w);
          expect_close(gs, cs, 2e-6f, "state vs chunked twin " + w);
        }
      }
    }
}

// Tiled value-head order (llama.cpp qwen35 GGUF): moving every per-value-head quantity (v, g,
// beta, state) from grouped position hk*rep + r to tiled position r*NK + hk and running with
// tiled_v_heads must give the grouped result with outputs and states moved the same way.
TEST(GdnOps, TiledValueHeadsEqualPermutedGroupedHeads) {
  auto& e = env();
  for (uint32_t T : {1u, 7u, 70u}) {
    GdnCase c(T, 2, 6, 12, 20, 99 + T);
    const uint32_t rep = c.NV / c.NK;
    auto tiled_of = [&](uint32_t hg) { return (hg % rep) * c.NK + hg / rep; };  // grouped head -> tiled position
    std::vector<float> rs = c.state, ro(size_t(T) * c.NV * c.DV);
    ref::gated_delta_rule(c.args(rs.data(), ro.data()));  // grouped reference
    GdnCase t = c;                                          // the same data in tiled order
    for (uint32_t row = 0; row < c.rows; ++row)
      for (uint32_t hg = 0; hg < c.NV; ++hg) {
        const uint32_t ht = tiled_of(hg);
        for (uint32_t j = 0; j < c.DV; ++j)
          t.qkv[size_t(row) * c.stride() + 2 * c.NK * c.DK + ht * c.DV + j] =
              c.qkv[size_t(row) * c.stride() + 2 * c.NK * c.DK + hg * c.DV + j];
        t.gates[size_t(row) * 2 * c.NV + ht] = c.gates[size_t(row) * 2 * c.NV + hg];
        t.gates[size_t(row) * 2 * c.NV + c.NV + ht] = c.gates[size_t(row) * 2 * c.NV + c.NV + hg];
      }
    for (uint32_t hg = 0; hg < c.NV; ++hg)
      std::copy_n(&c.state[size_t(hg) * c.DK * c.DV], size_t(c.DK) * c.DV, &t.state[size_t(tiled_of(hg)) * c.DK * c.DV]);
    // CPU twin with tiled heads
    std::vector<float> ts = t.state, to(ro.size());
    ref::GdnArgs ta = t.args(ts.data(), to.data());
    ta.tiled_v_heads = true;
    ref::gated_delta_rule(ta);
    for (bool step : {false, true}) {
      if (step && T != 1) continue;
      auto qb = e.upload(t.qkv), gb = e.upload(t.gates), sb = e.upload(t.state);
      auto ob = e.upload(std::vector<float>(ro.size(), NAN));
      KernelOptions ko;
      ko.gdn_chunk = 16;
      auto wb = e.upload(std::vector<float>(gdn_chunk_work_floats(T, 16, c.NV, c.DK, c.DV), NAN));
      auto o = e.op(ko);
      GdnOperands a{qb, 0, c.NK * c.DK, 2 * c.NK * c.DK, c.stride(), gb, 0, 2 * c.NV, sb, ob, 0, c.NV * c.DV,
                    T, c.NK, c.NV, c.DK, c.DV, 1.0f / std::sqrt(float(c.DK))};
      a.tiled_v_heads = true;
      e.rec.begin();
      if (step) gdn_step(o, a);
      else gdn_chunked(o, a, wb);
      e.rec.submit();
      const auto go = e.download(ob, ro.size()), gs = e.download(sb, rs.size());
      // back to grouped order and compare with the grouped reference
      std::vector<float> go_g(go.size()), gs_g(gs.size()), to_g(to.size()), ts_g(ts.size());
      for (uint32_t hg = 0; hg < c.NV; ++hg) {
        const uint32_t ht = tiled_of(hg);
        for (uint32_t tt = 0; tt < T; ++tt)
          for (uint32_t j = 0; j < c.DV; ++j) {
            go_g[(size_t(tt) * c.NV + hg) * c.DV + j] = go[(size_t(tt) * c.NV + ht) * c.DV + j];
            to_g[(size_t(tt) * c.NV + hg) * c.DV + j] = to[(size_t(tt) * c.NV + ht) * c.DV + j];
          }
        std::copy_n(&gs[size_t(ht) * c.DK * c.DV], size_t(c.DK) * c.DV, &gs_g[size_t(hg) * c.DK * c.DV]);
        std::copy_n(&ts[size_t(ht) * c.DK * c.DV], size_t(c.DK) * c.DV, &ts_g[size_t(hg) * c.DK * c.DV]);
      }
      const std::string w = std::string(step ? "step" : "chunked") + " T=" + std::to_string(T);
      expect_close(to_g, ro, 0.0f, "CPU tiled vs grouped out " + w);  // same arithmetic, moved heads
      expect_close(ts_g, rs, 0.0f, "CPU tiled vs grouped state " + w);
      expect_close(go_g, ro, 2e-5f, "GPU tiled out " + w);
      expect_close(gs_g, rs, 2e-5f, "GPU tiled state " + w);
    }
  }
}

namespace {
std::vector<uint32_t> bits(const std::vector<float>& v) {
  std::vector<uint32_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * 4);
  return b;
}
}  // namespace

// The tiled scan (gdn_chunk_scan_tiled.wgsl, KernelOptions::gdn_scan_cols columns of the state per
// workgroup in workgroup memory) against the one-column-per-invocation scan (gdn_scan_cols = 0):
// the same bits in the output and the state, for tiles that do not divide DV (68, 9; 12 columns: not
// a power of two), a chunk
// larger than the tile's threads (C 64 x 8 columns: 2 pairs per thread), partial last chunks and
// a workgroup-memory limit that forces the tile to halve (gdn_scan_tile); the staged tile
// (--gdn-scan-stage: the chunk's W / q / k rows in workgroup memory) too wherever it fits, and after
// the staged prep (--gdn-prep-stage) where that fits as well; and the tile sizes chosen.
TEST(GdnOps, TiledScanSameBitsAsOneColumnScan) {
  auto& e = env();
  uint32_t staged_cases = 0, staged_ran = 0, prep_ran = 0;
  struct Shape { uint32_t T, NK, NV, DK, DV; };
  for (const Shape& s : {Shape{130, 2, 6, 12, 68}, Shape{37, 1, 2, 32, 9}, Shape{1, 1, 1, 8, 8}})
    for (uint32_t C : {1u, 16u, 64u})
      for (uint32_t cols : {1u, 8u, 12u, 64u}) {
        if ((cols == 1 || cols == 12) && C != 16) continue;  // compiling each variant dominates this test's time on lavapipe
        // The tile must exist on this device, else both arms would run the one-column kernel.
        ASSERT_GT(gdn_scan_tile(C, s.DK, cols, e.ctx->info().limits.maxComputeWorkgroupStorageSize).cols, 0u);
        GdnCase c(s.T, s.NK, s.NV, s.DK, s.DV, 300 + s.T + C);
        std::vector<std::vector<float>> outs, states;
        std::vector<std::string> labels;
        const uint64_t lim = e.ctx->info().limits.maxComputeWorkgroupStorageSize;
        const bool stage = gdn_scan_tile(C, s.DK, cols, lim, true).stage;
        const bool prep = gdn_prep_staged(true, C, s.DK, s.DV, lim);
        // one-column scan, tile, staged tile, staged tile after the staged prep, staged tile prefetching
        for (uint32_t arm : {0u, 1u, 2u, 3u, 4u}) {
          if (((arm == 2 || arm == 4) && !stage) || (arm == 3 && !(stage && prep))) continue;
          const uint32_t sc = arm ? cols : 0;
          labels.push_back(arm == 0 ? "one-column" : arm == 1 ? "tiled" : arm == 2 ? "staged"
                           : arm == 3 ? "staged after the staged prep" : "staged, prefetching");
          auto qb = e.upload(c.qkv), gb = e.upload(c.gates), sb = e.upload(c.state);
          auto ob = e.upload(std::vector<float>(size_t(s.T) * s.NV * s.DV + 8, NAN));
          KernelOptions ko;
          ko.gdn_chunk = C;
          ko.gdn_scan_cols = sc;
          ko.gdn_scan_stage = arm >= 2;
          ko.gdn_prep_stage = arm == 3;
          ko.gdn_scan_prefetch = arm == 4;
          auto wb = e.upload(std::vector<float>(gdn_chunk_work_floats(s.T, C, c.NV, c.DK, c.DV) + 16, NAN));
          auto o = e.op(ko);
          GdnOperands a{qb, 0, c.NK * c.DK, 2 * c.NK * c.DK, c.stride(), gb, 0, 2 * c.NV, sb, ob, 0, c.NV * c.DV,
                        s.T, c.NK, c.NV, c.DK, c.DV, 1.0f / std::sqrt(float(c.DK))};
          e.rec.begin();
          gdn_chunked(o, a, wb);
          e.rec.submit();
          outs.push_back(e.download(ob, size_t(s.T) * s.NV * s.DV + 8));
          states.push_back(e.download(sb, c.state.size()));
        }
        const std::string w = "T=" + std::to_string(s.T) + " DK=" + std::to_string(s.DK) + " DV=" + std::to_string(s.DV) +
                              " C=" + std::to_string(C) + " cols=" + std::to_string(cols);
        for (size_t i = 1; i < outs.size(); ++i) {
          const std::string what = w + " " + labels[i];
          EXPECT_EQ(bits(outs[0]), bits(outs[i])) << what << " out";
          EXPECT_EQ(bits(states[0]), bits(states[i])) << what << " state";
        }
        EXPECT_EQ(outs.size(), stage ? (prep ? 5u : 4u) : 2u);
        ++staged_cases;
        if (stage) ++staged_ran;
        if (stage && prep) ++prep_ran;
      }
  EXPECT_GT(staged_ran, staged_cases / 2) << "most cases must run the staged form too";
  EXPECT_GT(prep_ran, staged_cases / 3) << "and many the staged prep";
  const GdnScanTile a = gdn_scan_tile(16, 128, 8, 16384);
  EXPECT_EQ(a.cols, 8u);
  EXPECT_EQ(a.threads, 128u);
  const GdnScanTile b = gdn_scan_tile(256, 128, 64, 16384);  // 4 * ((128 + 256) * 64 + 512) > 16 KiB: halved to 8
  EXPECT_EQ(b.cols, 8u);
  EXPECT_EQ(b.threads, 256u);
  EXPECT_EQ(gdn_scan_tile(16, 128, 0, 16384).cols, 0u);
  EXPECT_EQ(gdn_scan_tile(256, 4096, 1, 16384).cols, 0u);  // not even one column fits
  EXPECT_EQ(gdn_scan_tile(256, 128, 12, 16384).cols, 6u);  // 12 -> 6
  // Staging: 2 * C * (DK / 4 + 1) vec4 beside the tile, never halving it; DK a multiple of 4.
  EXPECT_EQ(gdn_scan_stage_bytes(32, 128), 2u * 32 * 33 * 16);
  EXPECT_TRUE(gdn_scan_tile(32, 128, 8, 49152, true).stage);    // 5376 + 33792 bytes
  EXPECT_FALSE(gdn_scan_tile(32, 128, 8, 32768, true).stage);   // does not fit: not staged
  EXPECT_EQ(gdn_scan_tile(32, 128, 8, 32768, true).cols, 8u);   // and the tile is kept
  EXPECT_FALSE(gdn_scan_tile(16, 128, 8, 49152, false).stage);  // not asked
  EXPECT_FALSE(gdn_scan_tile(16, 126, 8, 49152, true).stage);   // DK % 4 != 0
  EXPECT_FALSE(gdn_scan_tile(16, 128, 0, 49152, true).stage);   // no tile
  // The staged prep: 4 C (DK + max(DK, DV) + 2) + 4 C^2 + 8 C bytes; DK, DV multiples of 4.
  EXPECT_TRUE(gdn_prep_staged(true, 32, 128, 128, 4 * 32 * 258 + 4 * 32 * 32 + 8 * 32));
  EXPECT_FALSE(gdn_prep_staged(true, 32, 128, 128, 4 * 32 * 258 + 4 * 32 * 32 + 8 * 32 - 1));
  EXPECT_FALSE(gdn_prep_staged(false, 16, 128, 128, 49152));
  EXPECT_FALSE(gdn_prep_staged(true, 16, 128, 70, 49152));
}

// gdn_decode_prep (one dispatch) against the unfused decode path causal_conv(SILU) + l2norm_heads
// + gdn_gates (with the conv's state update fused and not): the same bits in y, gates and the
// conv state, over three chained decode steps; and against the CPU twins within rounding.
// Awkward shapes: DK 72 and 130 (> 64: threads loop), value dims that are no multiple of 64.
TEST(GdnOps, DecodePrepSameBitsAsUnfusedAndMatchesCpu) {
  auto& e = env();
  struct Shape { uint32_t NK, NV, DK, DV, L; };
  for (const Shape& s : {Shape{1, 1, 16, 16, 4}, Shape{2, 6, 72, 40, 4}, Shape{3, 3, 130, 20, 3}, Shape{2, 4, 64, 128, 2}}) {
    const uint32_t VD = s.NV * s.DV, C = 2 * s.NK * s.DK + VD, x_off = 3;
    const uint32_t b_off = x_off + C + VD, a_off = b_off + s.NV, row = a_off + s.NV + 2;  // [pad | qkv | z | b | a | pad]
    const std::string what = "NK=" + std::to_string(s.NK) + " NV=" + std::to_string(s.NV) + " DK=" + std::to_string(s.DK) +
                             " DV=" + std::to_string(s.DV) + " L=" + std::to_string(s.L);
    auto w = randn(size_t(C) * s.L, 11 + C), alog = randn(s.NV, 12), dt = randn(s.NV, 13);
    auto wb = e.upload(w), lb = e.upload(alog), db = e.upload(dt);
    auto st0 = randn(size_t(s.L - 1) * C, 14 + C, 0.5f);  // a sequence already under way
    // Paths: 0 fused prep, 1 unfused with the one-dispatch conv, 2 unfused with the two-dispatch conv.
    std::vector<gpu::Buffer> st, y, g;
    for (int p = 0; p < 3; ++p) {
      st.push_back(e.upload(st0));
      y.push_back(e.upload(std::vector<float>(C + 4, NAN)));
      g.push_back(e.upload(std::vector<float>(2 * s.NV + 4, NAN)));
    }
    std::vector<float> st_cpu = st0, y_cpu(C), g_cpu(2 * s.NV);
    for (uint32_t step = 0; step < 3; ++step) {
      auto src = randn(row, 100 * step + C, 1.5f);
      auto sb = e.upload(src);
      for (int p = 0; p < 3; ++p) {
        KernelOptions ko;
        ko.fuse_conv_state = p == 1;
        auto o = e.op(ko);
        e.rec.set_traffic_log(true);
        e.rec.begin();
        if (p == 0) {
          gdn_decode_prep(o, {s.NK, s.NV, s.DK, s.DV, s.L, 1e-6f}, sb, x_off, a_off, b_off, wb, st[p], lb, db, {y[p], 2},
                          {g[p], 1});
        } else {
          causal_conv(o, {1, C, s.L, true}, {sb, x_off}, row, {}, {}, wb, nullptr, {st[p], 0}, {y[p], 2}, C);
          l2norm_heads(o, {y[p], 2}, C, s.DK, 1, 2 * s.NK, s.DK, 1e-6f);
          gdn_gates(o, sb, a_off, b_off, row, lb, db, {g[p], 1}, 2 * s.NV, 1, s.NV);
        }
        e.rec.submit();
        EXPECT_EQ(e.rec.last_dispatches().size(), size_t(p == 0 ? 1 : p == 1 ? 3 : 4)) << what;
        e.rec.set_traffic_log(false);
      }
      const std::string ws = what + " step " + std::to_string(step);
      auto y0 = e.download(y[0], C + 4), g0 = e.download(g[0], 2 * s.NV + 4), s0 = e.download(st[0], st0.size());
      for (int p = 1; p < 3; ++p) {
        EXPECT_EQ(bits(y0), bits(e.download(y[p], C + 4))) << ws << " y, path " << p;
        EXPECT_EQ(bits(g0), bits(e.download(g[p], 2 * s.NV + 4))) << ws << " gates, path " << p;
        EXPECT_EQ(bits(s0), bits(e.download(st[p], st0.size()))) << ws << " conv state, path " << p;
      }
      ref::causal_conv(src.data() + x_off, row, nullptr, 0, nullptr, 0, w.data(), nullptr, st_cpu.data(), y_cpu.data(), C,
                       1, C, s.L, true);
      ref::l2norm_heads(y_cpu.data(), 2 * s.NK, s.DK, s.DK, 1e-6f);
      ref::gdn_gates(src.data() + a_off, src.data() + b_off, alog.data(), dt.data(), g_cpu.data(), g_cpu.data() + s.NV, s.NV);
      expect_close(std::vector<float>(y0.begin() + 2, y0.begin() + 2 + C), y_cpu, 1e-5f, ws + " y vs cpu");
      expect_close(std::vector<float>(g0.begin() + 1, g0.begin() + 1 + 2 * s.NV), g_cpu, 1e-5f, ws + " gates vs cpu");
      EXPECT_EQ(s0, st_cpu) << ws << " conv state vs cpu";  // the state is a copy of inputs: exact
    }
  }
}

// gdn_step_norm (one dispatch) against gdn_step + gated_rmsnorm: the same bits in the output and
// the state over two chained steps (DV 40, 64, 130 and 300 > 256 threads, tiled heads once); and
// against the CPU recurrence + gated RMSNorm within rounding.
TEST(GdnOps, StepNormSameBitsAsUnfusedAndMatchesCpu) {
  auto& e = env();
  struct Shape { uint32_t NK, NV, DK, DV; bool tiled; };
  for (const Shape& s : {Shape{1, 2, 16, 40, false}, Shape{2, 4, 32, 64, true}, Shape{1, 3, 24, 130, false},
                         Shape{1, 2, 8, 300, false}}) {
    const std::string what = "NK=" + std::to_string(s.NK) + " NV=" + std::to_string(s.NV) + " DK=" + std::to_string(s.DK) +
                             " DV=" + std::to_string(s.DV);
    GdnCase c(1, s.NK, s.NV, s.DK, s.DV, 40 + s.DV);
    const uint32_t VD = s.NV * s.DV, S = c.stride(), z_off = 5, o_off = 2;
    auto z = randn(z_off + VD + 3, 41 + s.DV, 2.0f), nw = randn(s.DV, 42 + s.DV);
    auto qb = e.upload(c.qkv), gb = e.upload(c.gates), zb = e.upload(z), wb = e.upload(nw);
    std::vector<gpu::Buffer> st, out;
    for (int p = 0; p < 2; ++p) {
      st.push_back(e.upload(c.state));
      out.push_back(e.upload(std::vector<float>(o_off + VD + 3, NAN)));
    }
    std::vector<float> st_cpu = c.state, o_cpu(VD);
    const float eps = 1e-6f;
    for (uint32_t step = 0; step < 2; ++step) {
      for (int p = 0; p < 2; ++p) {
        const GdnOperands a{qb, 0, s.NK * s.DK, 2 * s.NK * s.DK, S, gb, 0, 2 * s.NV, st[p], out[p], o_off, VD,
                            1, s.NK, s.NV, s.DK, s.DV, 1.0f / std::sqrt(float(s.DK)), s.tiled};
        auto o = e.op();
        e.rec.set_traffic_log(true);
        e.rec.begin();
        if (p == 0) {
          gdn_step_norm(o, a, {zb, z_off}, wb, eps);
        } else {
          gdn_step(o, a);
          gated_rmsnorm(o, {out[p], o_off}, VD, {zb, z_off}, VD, wb, 1, s.NV, s.DV, eps);
        }
        e.rec.submit();
        EXPECT_EQ(e.rec.last_dispatches().size(), size_t(p == 0 ? 1 : 2)) << what;
        e.rec.set_traffic_log(false);
      }
      const std::string ws = what + " step " + std::to_string(step);
      auto o0 = e.download(out[0], o_off + VD + 3), s0 = e.download(st[0], c.state.size());
      EXPECT_EQ(bits(o0), bits(e.download(out[1], o_off + VD + 3))) << ws << " out";
      EXPECT_EQ(bits(s0), bits(e.download(st[1], c.state.size()))) << ws << " state";
      auto args = c.args(st_cpu.data(), o_cpu.data());
      args.tiled_v_heads = s.tiled;
      ref::gated_delta_rule(args);
      ref::gated_rmsnorm(o_cpu.data(), z.data() + z_off, nw.data(), s.NV, s.DV, eps);
      expect_close(std::vector<float>(o0.begin() + o_off, o0.begin() + o_off + VD), o_cpu, 2e-5f, ws + " out vs cpu");
      expect_close(s0, st_cpu, 2e-5f, ws + " state vs cpu");
    }
  }
}

// gdn_decode (the whole recurrent core in one dispatch) against gdn_decode_prep + gdn_step_norm
// (themselves bit-identical to the six unfused dispatches, tests above): with one thread per state
// column (--gdn-decode-row-split 1) the same bits in out, the conv state and the DeltaNet state over
// three chained decode steps; with 2 and 4 threads per column (rows split, another summation order)
// the same conv state bits; and the CPU twins within rounding for all three. Shapes: R = NV/NK of
// 1..4, tiled heads, DK > 64, DK not a multiple of 4 (the split halves to 2), R*DV > 256 and DV > 256
// (threads loop over columns).
TEST(GdnOps, DecodeFusedSameBitsAsPrepPlusStepNormAndMatchesCpu) {
  auto& e = env();
  struct Shape { uint32_t NK, NV, DK, DV, L; bool tiled; };
  for (const uint32_t rs : {1u, 2u, 4u})
  for (const Shape& s : {Shape{1, 1, 16, 16, 4, false}, Shape{2, 6, 72, 40, 4, true}, Shape{2, 4, 130, 20, 3, false},
                         Shape{1, 4, 32, 128, 4, false}, Shape{2, 2, 64, 300, 2, true}}) {
    const uint32_t KD = s.NK * s.DK, VD = s.NV * s.DV, C = 2 * KD + VD, x_off = 3;
    const uint32_t z_off = x_off + C, b_off = z_off + VD, a_off = b_off + s.NV, row = a_off + s.NV + 2;
    const float scale = 1.0f / std::sqrt(float(s.DK)), eps = 1e-6f;
    const std::string what = "NK=" + std::to_string(s.NK) + " NV=" + std::to_string(s.NV) + " DK=" + std::to_string(s.DK) +
                             " DV=" + std::to_string(s.DV) + " L=" + std::to_string(s.L) + " RS=" + std::to_string(rs);
    {
      auto o = e.op();
      o.opt.gdn_decode_row_split = rs;
      EXPECT_EQ(gdn_decode_row_split(o, {s.NK, s.NV, s.DK, s.DV, s.L, 1e-6f}), s.DK % rs ? rs / 2 : rs) << what;
    }
    auto w = randn(size_t(C) * s.L, 21 + C), alog = randn(s.NV, 22), dt = randn(s.NV, 23), nw = randn(s.DV, 24);
    auto wb = e.upload(w), lb = e.upload(alog), db = e.upload(dt), nb = e.upload(nw);
    auto cs0 = randn(size_t(s.L - 1) * C, 25 + C, 0.5f), ss0 = randn(size_t(s.NV) * s.DK * s.DV, 26 + C, 0.3f);
    std::vector<gpu::Buffer> cs, ss, out;
    for (int p = 0; p < 2; ++p) {
      cs.push_back(e.upload(cs0));
      ss.push_back(e.upload(ss0));
      out.push_back(e.upload(std::vector<float>(VD + 5, NAN)));
    }
    auto yb = e.upload(std::vector<float>(C, NAN)), gb = e.upload(std::vector<float>(2 * s.NV, NAN));
    std::vector<float> cs_cpu = cs0, ss_cpu = ss0, y_cpu(C), g_cpu(2 * s.NV), o_cpu(VD);
    for (uint32_t step = 0; step < 3; ++step) {
      auto src = randn(row, 200 * step + C, 1.5f);
      auto sb = e.upload(src);
      for (int p = 0; p < 2; ++p) {
        auto o = e.op();
        e.rec.set_traffic_log(true);
        e.rec.begin();
        if (p == 0) {
          o.opt.gdn_decode_row_split = rs;
          gdn_decode(o, {sb, x_off, z_off, a_off, b_off, wb, cs[p], lb, db, nb, ss[p], {out[p], 2},
                         {s.NK, s.NV, s.DK, s.DV, s.L, eps}, scale, eps, s.tiled});
        } else {
          gdn_decode_prep(o, {s.NK, s.NV, s.DK, s.DV, s.L, eps}, sb, x_off, a_off, b_off, wb, cs[p], lb, db, {yb, 0}, {gb, 0});
          const GdnOperands a{yb, 0, KD, 2 * KD, C, gb, 0, 2 * s.NV, ss[p], out[p], 2, VD,
                              1, s.NK, s.NV, s.DK, s.DV, scale, s.tiled};
          gdn_step_norm(o, a, {sb, z_off}, nb, eps);
        }
        e.rec.submit();
        EXPECT_EQ(e.rec.last_dispatches().size(), size_t(p == 0 ? 1 : 2)) << what;
        e.rec.set_traffic_log(false);
      }
      const std::string ws = what + " step " + std::to_string(step);
      auto o0 = e.download(out[0], VD + 5), c0 = e.download(cs[0], cs0.size()), s0 = e.download(ss[0], ss0.size());
      if (rs == 1) {
        EXPECT_EQ(bits(o0), bits(e.download(out[1], VD + 5))) << ws << " out";
        EXPECT_EQ(bits(s0), bits(e.download(ss[1], ss0.size()))) << ws << " state";
      }
      EXPECT_EQ(bits(c0), bits(e.download(cs[1], cs0.size()))) << ws << " conv state";
      ref::causal_conv(src.data() + x_off, row, nullptr, 0, nullptr, 0, w.data(), nullptr, cs_cpu.data(), y_cpu.data(), C,
                       1, C, s.L, true);
      ref::l2norm_heads(y_cpu.data(), 2 * s.NK, s.DK, s.DK, eps);
      ref::gdn_gates(src.data() + a_off, src.data() + b_off, alog.data(), dt.data(), g_cpu.data(), g_cpu.data() + s.NV, s.NV);
      ref::GdnArgs ra{y_cpu.data(), y_cpu.data() + KD, y_cpu.data() + 2 * KD, g_cpu.data(), g_cpu.data() + s.NV, C, C,
                      2 * s.NV, ss_cpu.data(), o_cpu.data(), VD, 1, s.NK, s.NV, s.DK, s.DV, scale, s.tiled};
      ref::gated_delta_rule(ra);
      ref::gated_rmsnorm(o_cpu.data(), src.data() + z_off, nw.data(), s.NV, s.DV, eps);
      expect_close(std::vector<float>(o0.begin() + 2, o0.begin() + 2 + VD), o_cpu, 2e-5f, ws + " out vs cpu");
      expect_close(s0, ss_cpu, 2e-5f, ws + " state vs cpu");
      EXPECT_EQ(c0, cs_cpu) << ws << " conv state vs cpu";
    }
  }
}

TEST(GdnOps, FusedDecodeOpsRejectBadArguments) {
  auto& e = env();
  auto src = e.upload(std::vector<float>(64)), w = e.upload(std::vector<float>(256)), st = e.upload(std::vector<float>(256));
  auto y = e.upload(std::vector<float>(64)), g = e.upload(std::vector<float>(8));
  auto o = e.op();
  e.rec.begin();
  EXPECT_NO_THROW(gdn_decode_prep(o, {1, 1, 8, 8, 4, 1e-6f}, src, 0, 30, 31, w, st, w, w, {y, 0}, {g, 0}));
  EXPECT_THROW(gdn_decode_prep(o, {1, 1, 8, 8, 4, 1e-6f}, src, 0, 30, 31, w, st, w, w, {st, 0}, {g, 0}), Error);  // y = state
  EXPECT_THROW(gdn_decode_prep(o, {1, 1, 8, 8, 4, 1e-6f}, src, 0, 30, 31, w, st, w, w, {y, 0}, {src, 0}), Error);  // gates = src
  EXPECT_THROW(gdn_decode_prep(o, {1, 1, 8, 8, 1, 1e-6f}, src, 0, 30, 31, w, st, w, w, {y, 0}, {g, 0}), Error);  // L = 1
  EXPECT_THROW(gdn_decode_prep(o, {0, 1, 8, 8, 4, 1e-6f}, src, 0, 30, 31, w, st, w, w, {y, 0}, {g, 0}), Error);  // NK = 0
  const GdnOperands two{src, 0, 8, 16, 24, g, 0, 2, st, y, 0, 8, 2, 1, 1, 8, 8, 0.3f};
  EXPECT_THROW(gdn_step_norm(o, two, {src, 0}, w, 1e-6f), Error);  // T = 2
  const GdnOperands one{src, 0, 8, 16, 24, g, 0, 2, st, y, 0, 8, 1, 1, 1, 8, 8, 0.3f};
  EXPECT_THROW(gdn_step_norm(o, one, {y, 0}, w, 1e-6f), Error);  // z = out
  auto ss = e.upload(std::vector<float>(256));
  EXPECT_NO_THROW(gdn_decode(o, {src, 0, 24, 33, 32, w, st, w, w, w, ss, {y, 0}, {1, 1, 8, 8, 4, 1e-6f}, 0.3f, 1e-6f}));
  EXPECT_THROW(gdn_decode(o, {src, 0, 24, 33, 32, w, st, w, w, w, st, {y, 0}, {1, 1, 8, 8, 4, 1e-6f}, 0.3f, 1e-6f}),
               Error);  // conv state = state
  EXPECT_THROW(gdn_decode(o, {src, 0, 24, 33, 32, w, st, w, w, w, ss, {src, 0}, {1, 1, 8, 8, 4, 1e-6f}, 0.3f, 1e-6f}),
               Error);  // out = proj
  EXPECT_THROW(gdn_decode(o, {src, 0, 24, 33, 32, w, st, w, w, w, ss, {y, 0}, {2, 3, 8, 8, 4, 1e-6f}, 0.3f, 1e-6f}),
               Error);  // NV % NK != 0
  EXPECT_TRUE(gdn_decode_fits({16, 32, 128, 128, 4}));   // Qwen3.5 / Qwen3-Next shapes
  EXPECT_FALSE(gdn_decode_fits({1, 32, 128, 128, 4}));   // 32 value heads of 128 on one key head
  // Each workgroup variable counts rounded up to 16 bytes: DK 1 (qs, ks: 4 -> 16 bytes each) and DV 3956 fill
  // exactly 16 KiB; DV 3964 would fit only without the rounding.
  EXPECT_TRUE(gdn_decode_fits({1, 1, 1, 3956, 4}));
  EXPECT_FALSE(gdn_decode_fits({1, 1, 1, 3964, 4}));
  EXPECT_THROW(gdn_decode(o, {src, 0, 24, 33, 32, w, st, w, w, w, ss, {y, 0}, {1, 64, 8, 64, 4, 1e-6f}, 0.3f, 1e-6f}),
               Error);  // workgroup memory
  for (uint32_t bad : {3u, 8u, 512u}) {  // row split: a column must not straddle two passes; WG / RS >= 1
    auto ob = e.op();
    ob.opt.gdn_decode_row_split = bad;
    EXPECT_THROW(gdn_decode_row_split(ob, {2, 6, 72, 40, 4, 1e-6f}), Error) << "RS " << bad;
    EXPECT_THROW(gdn_decode(ob, {src, 0, 24, 33, 32, w, st, w, w, w, ss, {y, 0}, {1, 1, 8, 8, 4, 1e-6f}, 0.3f, 1e-6f}),
                 Error) << "RS " << bad;
  }
  e.rec.submit();
}
