// Block-sparse attention (kernels/sparse_attention.h) against its CPU twins (kernels/sparse_ref.h)
// and against the masked-dense reference, on small shapes (head dims 32..128, blocks of 8..64 keys,
// a few blocks of context) so that the whole binary stays fast on lavapipe.
// Tolerances (absolute, on outputs that are convex combinations of N(0, 1) values):
//   per-row gather vs masked dense on the GPU: identical bits when every block 0..qb is selected
//   (same keys, same tiles); otherwise 2e-5 (the tiles' online-softmax rescaling happens at other
//   keys). Tiled gather (prefill, head dims 32/64/128) vs masked dense: 2e-5 (another kernel).
//   GPU vs CPU twin: 2e-5 (summation order of the softmax and the V sums differs).
//   CPU gather vs CPU masked dense: identical bits (same keys in the same order).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>

#include "core/error.h"
#include "kernels/ops.h"
#include "kernels/ref.h"
#include "kernels/sparse_attention.h"
#include "kernels/sparse_ref.h"
#include "kernels/kernel_test_env.h"

using namespace wgllm;
using namespace wgllm::kernels;
using namespace wgllm::kernels::testing;

namespace {

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

struct Case {
  uint32_t HD, Hq, Hkv, B, top_k, window, pos0, T;
  std::string name() const {
    return "HD=" + std::to_string(HD) + " Hq=" + std::to_string(Hq) + " Hkv=" + std::to_string(Hkv) + " B=" +
           std::to_string(B) + " k=" + std::to_string(top_k) + " W=" + std::to_string(window) + " pos0=" +
           std::to_string(pos0) + " T=" + std::to_string(T);
  }
  ref::SparseForward fwd() const { return {T, pos0, Hq, Hkv, HD, B, top_k, window}; }
  KernelOptions opt(uint32_t threshold = 0) const {
    KernelOptions o;
    o.sparse_attn = true;
    o.sparse_block = B;
    o.sparse_top_k = top_k;
    o.sparse_window = window;
    o.sparse_threshold = threshold;
    return o;
  }
};

// Shapes: prefill chunks spanning several query blocks (ragged first and last), decode (T = 1),
// GQA groups 1..4, block sizes below, at and above the 64-key tile.
const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {64, 4, 2, 16, 3, 2, 100, 37},  {64, 4, 1, 16, 2, 1, 150, 1},  {32, 3, 3, 8, 4, 3, 90, 20},
      {128, 8, 2, 64, 2, 1, 300, 9},  {64, 2, 2, 16, 5, 2, 230, 1},  {64, 4, 2, 32, 1, 2, 70, 60},
      {64, 4, 2, 16, 8, 2, 40, 30},   {64, 2, 1, 64, 4, 1, 100, 1},
  };
  return c;
}

// A random selection of the kind sparse_select writes: per query block and KV head, ascending ids,
// the own block qb always last, up to S - 1 random other blocks below it, kSparseNone after.
std::vector<uint32_t> random_index(const Case& c, uint32_t seed, bool all_blocks) {
  const ref::SparseForward f = c.fwd();
  const uint32_t S = f.slots();
  std::mt19937 g(seed);
  std::vector<uint32_t> idx(size_t(f.query_blocks()) * c.Hkv * S, kSparseNone);
  for (uint32_t i = 0; i < f.query_blocks(); ++i)
    for (uint32_t hk = 0; hk < c.Hkv; ++hk) {
      const uint32_t qb = f.qb0() + i;
      std::set<uint32_t> s{qb};
      if (all_blocks) {
        for (uint32_t b = 0; b < qb; ++b) s.insert(b);
      } else {
        const uint32_t want = std::uniform_int_distribution<uint32_t>(0, std::min(S - 1, qb))(g);
        while (s.size() < want + 1) s.insert(std::uniform_int_distribution<uint32_t>(0, qb - 1)(g));
      }
      uint32_t n = 0;
      for (uint32_t b : s) idx[(size_t(i) * c.Hkv + hk) * S + n++] = b;
    }
  return idx;
}

// CPU gather (or masked dense) of every row of the forward.
std::vector<float> cpu_attention(const Case& c, const std::vector<float>& q, uint32_t q_stride, const std::vector<float>& ck,
                                 const std::vector<float>& cv, const std::vector<uint32_t>& idx, bool masked) {
  const ref::SparseForward f = c.fwd();
  const float scale = 1.0f / std::sqrt(float(c.HD));
  std::vector<float> out(size_t(c.T) * c.Hq * c.HD);
  for (uint32_t t = 0; t < c.T; ++t) {
    const uint32_t pos = c.pos0 + t, i = pos / c.B - f.qb0();
    ref::attention_sparse(q.data() + size_t(t) * q_stride, ck.data(), cv.data(), out.data() + size_t(t) * c.Hq * c.HD, pos,
                          c.Hq, c.Hkv, c.HD, scale, idx.data() + size_t(i) * c.Hkv * f.slots(), f.slots(), c.B, masked);
  }
  return out;
}

TEST(SparseAttention, GatherEqualsMaskedDenseAndCpu) {
  auto& e = env();
  uint32_t seed = 1, n_tiled = 0;
  for (const Case& c : cases()) {
    for (bool all : {false, true}) {
      if (all && (c.pos0 + c.T - 1) / c.B + 1 > c.fwd().slots()) continue;  // all blocks must fit the slots
      const std::string what = c.name() + (all ? " all blocks" : " random selection");
      const uint32_t kv_dim = c.Hkv * c.HD, n = c.pos0 + c.T, Q = c.Hq * c.HD, q_stride = Q + 4;
      auto ck = randn(size_t(n) * kv_dim, seed++), cv = randn(size_t(n) * kv_dim, seed++);
      auto q = randn(size_t(c.T) * q_stride, seed++, 2.0f);
      const auto idx = random_index(c, seed++, all);
      auto kb = e.upload(ck), vb = e.upload(cv), qb = e.upload(q), ib = e.upload(idx);
      auto og = e.upload(std::vector<float>(size_t(c.T) * Q)), om = e.upload(std::vector<float>(size_t(c.T) * Q));
      auto ot = e.upload(std::vector<float>(size_t(c.T) * Q)), op = e.upload(std::vector<float>(size_t(c.T) * Q));
      auto o = e.op(c.opt());
      KernelOptions pko = c.opt();
      pko.attention_flash_prefetch = true;  // --attn-flash-prefetch: the gathered tiles through registers
      auto opf = e.op(pko);
      const AttentionShape s{c.T, c.pos0, c.Hq, c.Hkv, c.HD, 1.0f / std::sqrt(float(c.HD))};
      // The tiled kernel where it applies (prefill, head dims covered by a flash tile).
      const bool tiled = sparse_kernel(o, s) == SparseKernel::Tiled;
      n_tiled += tiled;
      e.rec.begin();
      attention_gather(o, s, {qb, 0}, q_stride, kb, vb, ib, {og, 0}, Q, SparseKernel::Rows);
      attention_gather(o, s, {qb, 0}, q_stride, kb, vb, ib, {om, 0}, Q, SparseKernel::MaskedDense);
      if (tiled) attention_gather(o, s, {qb, 0}, q_stride, kb, vb, ib, {ot, 0}, Q, SparseKernel::Tiled);
      if (tiled) attention_gather(opf, s, {qb, 0}, q_stride, kb, vb, ib, {op, 0}, Q, SparseKernel::Tiled);
      e.rec.submit();
      const auto gather = e.download(og, size_t(c.T) * Q), masked = e.download(om, size_t(c.T) * Q);
      const auto cpu = cpu_attention(c, q, q_stride, ck, cv, idx, false);
      EXPECT_EQ(cpu, cpu_attention(c, q, q_stride, ck, cv, idx, true)) << what << ": CPU gather != CPU masked dense";
      if (all)
        EXPECT_EQ(gather, masked) << what << ": same keys and tiles must give identical bits";
      else
        EXPECT_LE(max_abs_diff(gather, masked), 2e-5f) << what;
      EXPECT_LE(max_abs_diff(gather, cpu), 2e-5f) << what << " (gather vs CPU)";
      EXPECT_LE(max_abs_diff(masked, cpu), 2e-5f) << what << " (masked dense vs CPU)";
      if (tiled) {
        const auto t = e.download(ot, size_t(c.T) * Q);
        EXPECT_LE(max_abs_diff(t, masked), 2e-5f) << what << " (tiled gather vs masked dense)";
        EXPECT_LE(max_abs_diff(t, cpu), 2e-5f) << what << " (tiled gather vs CPU)";
        EXPECT_EQ(e.download(op, size_t(c.T) * Q), t) << what << " (--attn-flash-prefetch must give the same bits)";
      }
      if (all) {  // every block selected: the dense CPU attention
        std::vector<float> dense(size_t(c.T) * Q);
        for (uint32_t t = 0; t < c.T; ++t)
          ref::attention(q.data() + size_t(t) * q_stride, ck.data(), cv.data(), dense.data() + size_t(t) * Q, c.pos0 + t,
                         c.Hq, c.Hkv, c.HD, s.scale);
        EXPECT_LE(max_abs_diff(gather, dense), 2e-5f) << what << " (vs dense)";
      }
    }
  }
  EXPECT_GE(n_tiled, 4u) << "the tiled kernel must be covered";
}

TEST(SparseAttention, BlockMeansAndSelectionMatchCpu) {
  auto& e = env();
  uint32_t seed = 100;
  for (const Case& c : cases()) {
    const ref::SparseForward f = c.fwd();
    const uint32_t kv_dim = c.Hkv * c.HD, n = c.pos0 + c.T, S = f.slots(), q_stride = c.Hq * c.HD + 4;
    const uint32_t n_blocks = n / c.B;
    auto ck = randn(size_t(n) * kv_dim, seed++);
    auto q = randn(4 + size_t(c.T) * q_stride, seed++);
    auto kb = e.upload(ck), qb = e.upload(q);
    const KernelOptions ko = c.opt();
    SparseScratch sc = make_sparse_scratch(*e.ctx, ko, n + 5, c.T, c.Hkv, c.HD);
    auto o = e.op(ko);
    const AttentionShape s{c.T, c.pos0, c.Hq, c.Hkv, c.HD, 1.0f};
    e.rec.begin();
    sparse_block_means(o, s, kb, sc);
    sparse_select(o, s, {qb, 4}, q_stride, sc);
    e.rec.submit();
    std::vector<float> means(size_t(n_blocks) * kv_dim);
    ref::sparse_block_means(ck.data(), n_blocks, c.B, kv_dim, means.data());
    const auto gm = e.download(sc.means, means.size());
    EXPECT_LE(max_abs_diff(gm, means), 1e-6f) << c.name() << " block means";
    std::vector<uint32_t> want(size_t(f.query_blocks()) * c.Hkv * S);
    ref::sparse_select(f, q.data() + 4, q_stride, means.data(), want.data());
    const auto got = e.download<uint32_t>(sc.index, want.size());
    for (uint32_t i = 0; i < f.query_blocks(); ++i)
      for (uint32_t hk = 0; hk < c.Hkv; ++hk) {
        const uint32_t qb_ = f.qb0() + i, lo = qb_ + 1 >= c.window ? qb_ + 1 - c.window : 0;
        const size_t r = (size_t(i) * c.Hkv + hk) * S;
        const std::vector<uint32_t> g(got.begin() + r, got.begin() + r + S), w(want.begin() + r, want.begin() + r + S);
        const std::string what = c.name() + " qb=" + std::to_string(qb_) + " hk=" + std::to_string(hk);
        // Structure: ascending, sink first (when outside the window), window last, padding after.
        uint32_t cnt = 0;
        while (cnt < S && g[cnt] != kSparseNone) ++cnt;
        ASSERT_EQ(cnt, std::min(S, qb_ + 1)) << what;
        for (uint32_t a = cnt; a < S; ++a) EXPECT_EQ(g[a], kSparseNone) << what;
        EXPECT_TRUE(std::is_sorted(g.begin(), g.begin() + cnt) && std::adjacent_find(g.begin(), g.begin() + cnt) == g.begin() + cnt)
            << what;
        EXPECT_EQ(g[0], 0u) << what;
        for (uint32_t b = lo; b <= qb_; ++b) EXPECT_EQ(g[cnt - 1 - (qb_ - b)], b) << what << " window";
        if (g == w) continue;
        ASSERT_GT(lo, 1u) << what << ": rows differ without candidates";
        // Differences only between near-tied scores (GPU and CPU sums may round differently).
        const auto sc_cpu = ref::sparse_scores(f, q.data() + 4, q_stride, means.data(), qb_, hk, lo);
        std::vector<float> cand(sc_cpu.begin() + std::min<size_t>(1, sc_cpu.size()), sc_cpu.end());
        std::sort(cand.rbegin(), cand.rend());
        const float kth = cand[std::min<size_t>(c.top_k, cand.size()) - 1];
        float mag = 0;
        for (float v : cand) mag = std::max(mag, std::fabs(v));
        for (uint32_t a = 0; a < cnt; ++a)
          if (g[a] != 0 && g[a] < lo) {
            EXPECT_GE(sc_cpu[g[a]], kth - 1e-5f * (1 + mag)) << what << " top-k";
          }
      }
  }
}

TEST(SparseAttention, FullPathMatchesCpuAndThresholdKeepsDense) {
  auto& e = env();
  uint32_t seed = 200;
  for (const Case& c : cases()) {
    const ref::SparseForward f = c.fwd();
    const uint32_t kv_dim = c.Hkv * c.HD, n = c.pos0 + c.T, Q = c.Hq * c.HD, q_stride = Q + 2 * kv_dim, S = f.slots();
    auto ck = randn(size_t(n) * kv_dim, seed++), cv = randn(size_t(n) * kv_dim, seed++);
    auto q = randn(size_t(c.T) * q_stride, seed++, 2.0f);
    auto kb = e.upload(ck), vb = e.upload(cv), qb = e.upload(q);
    auto out = e.upload(std::vector<float>(size_t(c.T) * Q));
    const AttentionShape s{c.T, c.pos0, c.Hq, c.Hkv, c.HD, 1.0f / std::sqrt(float(c.HD))};
    // The threshold is the context after the forward (n keys): n takes the sparse path, n + 1 not.
    // The dense side runs for the prefill shapes of head dim 64 only: each other dense variant
    // (flash per head dim, the GQA decode kernel per group) costs 5-25 s of pipeline compile on a
    // cold lavapipe shader cache; tests/e2e/sparse_attention_e2e_test covers decode below the
    // threshold end to end.
    const bool check_dense = c.T > 1 && c.HD == 64;
    for (uint32_t threshold : {n, n + 1}) {
      if (threshold > n && !check_dense) continue;
      const KernelOptions ko = c.opt(threshold);
      SparseScratch sc = make_sparse_scratch(*e.ctx, ko, n, c.T, c.Hkv, c.HD);
      auto o = e.op(ko);
      e.rec.set_traffic_log(true);
      e.rec.begin();
      attention(o, s, {qb, 0}, q_stride, kb, vb, {out, 0}, Q, nullptr, &sc);
      e.rec.submit();
      bool sparse_ran = false;
      for (const auto& d : e.rec.last_dispatches()) sparse_ran |= d.label.find("sparse") != std::string::npos;
      const auto got = e.download(out, size_t(c.T) * Q);
      if (threshold > n) {
        EXPECT_FALSE(sparse_ran) << c.name() << ": below the threshold the dense path must run";
        auto o2 = e.op();  // switch off
        e.rec.begin();
        attention(o2, s, {qb, 0}, q_stride, kb, vb, {out, 0}, Q, nullptr, nullptr);
        e.rec.submit();
        EXPECT_EQ(got, e.download(out, size_t(c.T) * Q)) << c.name() << ": below the threshold, bits as with the switch off";
        continue;
      }
      EXPECT_TRUE(sparse_ran) << c.name();
      std::vector<float> means(size_t(n / c.B) * kv_dim);
      ref::sparse_block_means(ck.data(), n / c.B, c.B, kv_dim, means.data());
      std::vector<uint32_t> idx(size_t(f.query_blocks()) * c.Hkv * S);
      ref::sparse_select(f, q.data(), q_stride, means.data(), idx.data());
      ASSERT_EQ(e.download<uint32_t>(sc.index, idx.size()), idx) << c.name() << " (seeded data has no near-ties)";
      EXPECT_LE(max_abs_diff(got, cpu_attention(c, q, q_stride, ck, cv, idx, false)), 2e-5f) << c.name();
    }
  }
}

TEST(SparseAttention, CachedBlockMeansBitIdenticalToRecompute) {
  // A sequence's SparseMeansCache against recomputing every block mean each forward, over one
  // layer's life: a prefill chunk, decode steps across block boundaries, a rollback into the middle
  // of a complete block with different keys written from there (the rows after a snapshot
  // restore), more decode, then rows rewritten behind the cache's back (a session import) with
  // reset(). Every forward's output must have the same bits both ways, and a decode step that
  // completes no block must record no means dispatch.
  auto& e = env();
  const uint32_t HD = 32, Hq = 4, Hkv = 2, B = 8, kv_dim = Hkv * HD, Q = Hq * HD, ctx_len = 128;
  KernelOptions ko;
  ko.sparse_attn = true;
  ko.sparse_block = B;
  ko.sparse_top_k = 2;
  ko.sparse_window = 1;
  ko.sparse_threshold = 0;
  ko.attention_flash = 0;
  auto o = e.op(ko);
  SparseScratch sc = make_sparse_scratch(*e.ctx, ko, ctx_len, 40, Hkv, HD);
  SparseMeansCache cache = make_sparse_means_cache(*e.ctx, ko, ctx_len, kv_dim, "means");
  auto ck = randn(size_t(ctx_len) * kv_dim, 900), cv = randn(size_t(ctx_len) * kv_dim, 901);
  auto kb = e.upload(ck), vb = e.upload(cv);
  auto out = e.upload(std::vector<float>(size_t(40) * Q));
  uint32_t seed = 910;
  // One forward of T tokens at pos0 whose rows were just written: with the cache, then without.
  auto forward = [&](uint32_t pos0, uint32_t T, bool expect_means) {
    const std::string what = "pos0=" + std::to_string(pos0) + " T=" + std::to_string(T);
    auto q = randn(size_t(T) * Q, seed++, 2.0f);
    auto qb = e.upload(q);
    const AttentionShape s{T, pos0, Hq, Hkv, HD, 1.0f / std::sqrt(float(HD))};
    e.rec.set_traffic_log(true);
    e.rec.begin();
    attention(o, s, {qb, 0}, Q, kb, vb, {out, 0}, Q, nullptr, &sc, &cache);
    e.rec.submit();
    bool means_ran = false;
    for (const auto& d : e.rec.last_dispatches()) means_ran |= d.label == "sparse_means";
    e.rec.set_traffic_log(false);
    EXPECT_EQ(means_ran, expect_means) << what;
    EXPECT_EQ(cache.valid_blocks, (pos0 + T) / B) << what;
    const auto cached = e.download(out, size_t(T) * Q);
    e.rec.begin();
    attention(o, s, {qb, 0}, Q, kb, vb, {out, 0}, Q, nullptr, &sc, nullptr);
    e.rec.submit();
    EXPECT_EQ(cached, e.download(out, size_t(T) * Q)) << what << ": cached block means must give the recompute's bits";
  };
  forward(0, 37, true);                                        // blocks 0..3 complete
  for (uint32_t p = 37; p < 50; ++p) forward(p, 1, (p + 1) % B == 0);  // completes blocks 4 (at 39) and 5 (at 47)
  // Rollback to 42 (inside block 5, complete) with different keys from there on.
  auto nk = randn(size_t(ctx_len - 42) * kv_dim, 950);
  kb.write(*e.ctx, 42ull * kv_dim * 4, nk.data(), nk.size() * 4);
  std::copy(nk.begin(), nk.end(), ck.begin() + 42 * kv_dim);
  forward(42, 3, false);  // block 5 is incomplete again (45 rows), nothing new to compute
  for (uint32_t p = 45; p < 57; ++p) forward(p, 1, (p + 1) % B == 0);
  // Rows below the valid blocks rewritten without a forward (an import): reset() recomputes all.
  auto ik = randn(size_t(57) * kv_dim, 960);
  kb.write(*e.ctx, 0, ik.data(), ik.size() * 4);
  cache.reset();
  forward(57, 1, true);
}

TEST(SparseAttention, RejectsBadConfig) {
  KernelOptions o;
  o.sparse_window = 0;
  EXPECT_THROW(sparse_config(o), wgllm::Error);
  o.sparse_window = 1;
  o.sparse_block = 0;
  EXPECT_THROW(sparse_config(o), wgllm::Error);
  o.sparse_block = 64;
  o.sparse_top_k = kSparseMaxSlots;
  EXPECT_THROW(sparse_config(o), wgllm::Error);
}

}  // namespace
