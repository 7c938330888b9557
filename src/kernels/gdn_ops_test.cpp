// Gated DeltaNet / Qwen3.5 ops: each GPU op against its CPU twin (kernels/gdn_ref.h) at awkward
// sizes, and the chunked delta rule (CPU twin and GPU) against the plain per-token recurrence.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/gdn_ops.h"
#include "kernels/gdn_ref.h"

using namespace wgllm;
using namespace wgllm::kernels;

namespace {

struct Env {
  std::unique_ptr<gpu::Context> ctx = gpu::Context::create();
  gpu::PipelineCache cache{*ctx};
  gpu::Recorder rec{*ctx};
  OpContext op(KernelOptions o = {}) { return OpContext{*ctx, cache, rec, o}; }
  gpu::Buffer upload(const std::vector<float>& v) {
    gpu::Buffer b(*ctx, std::max<size_t>(v.size(), 1) * 4, gpu::BufferKind::Storage, "t");
    if (!v.empty()) b.write(*ctx, 0, v.data(), v.size() * 4);
    return b;
  }
  std::vector<float> download(const gpu::Buffer& b, size_t n) {
    std::vector<float> v(n);
    b.read(*ctx, 0, v.data(), n * 4);
    return v;
  }
};
Env& env() {
  static Env e;
  return e;
}

std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

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
