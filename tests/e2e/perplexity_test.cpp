// llama.cpp's perplexity method (runtime/perplexity.h) and Model::forward_nll on the tiny LFM2
// fixture (tests/fixtures/lfm2_tiny; attention and recurrent conv layers, so every chunk needs a
// new sequence):
//   - perplexity_stats: llama.cpp's mean / PPL / standard error formula on known numbers
//   - perplexity_plan / perplexity_chunk: chunk count, scored positions, BOS replacement, the
//     "need 2 * n_ctx tokens" error
//   - forward_nll: WebGPU (NLL on the device, several prefill submissions) == the CPU default
//     (host logits, one token at a time) at every scored position; unscored positions are 0
//   - perplexity_chunks == a direct computation from per-token logits (the CPU model, fresh
//     sequence per chunk, double log-softmax of positions n_ctx/2 .. n_ctx-2), on both backends,
//     the WebGPU one also in micro-batches (--ubatch-size 1 and 5: decode kernels, ragged ends)
// Tolerance: 1e-4 absolute per NLL (WebGPU vs CPU f32 logits, as the parity tests), 1e-5
// relative on PPL for the same backend.
#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "kernels/nll.h"
#include "models/registry.h"
#include "models/source.h"
#include "parity_util.h"
#include "runtime/perplexity.h"

using namespace wgllm;
using namespace wgllm::test;

namespace {

struct Fx {
  std::unique_ptr<ModelSource> src = ModelSource::open(fixture("lfm2_tiny/lfm2_tiny.f32.gguf"));
  std::unique_ptr<Model> cpu, gpu;
  Fx() {
    ModelOptions o;
    o.context_length = 256;
    o.prefill_chunk = 24;  // a chunk of 64 tokens is three submissions, the scored half spans two
    o.backend = BackendKind::CPU;
    cpu = create_model(*src, o);
    o.backend = BackendKind::WebGPU;
    gpu = create_model(*src, o);
  }
};
Fx& fx() {
  static Fx f;
  return f;
}

std::vector<int32_t> tokens_of(size_t n, uint32_t vocab, uint32_t seed) {
  std::vector<int32_t> t(n);
  uint32_t x = seed;
  for (auto& v : t) {
    x = x * 1664525u + 1013904223u;
    v = int32_t((x >> 8) % vocab);
  }
  return t;
}

// The direct computation: for each chunk a fresh CPU sequence, one token at a time, the double
// log-softmax of the logits at positions first .. n_ctx - 2 against the next file token.
PerplexityResult direct(Model& m, const std::vector<int32_t>& toks, uint32_t n_ctx, uint32_t n_chunks, int32_t bos) {
  double sum = 0, sum2 = 0;
  uint64_t count = 0;
  for (uint32_t c = 0; c < n_chunks; ++c) {
    auto seq = m.new_sequence(n_ctx);
    std::vector<float> l;
    for (uint32_t t = 0; t + 1 < n_ctx; ++t) {
      const int32_t id = t == 0 && bos >= 0 ? bos : toks[size_t(c) * n_ctx + t];
      m.forward(*seq, std::span<const int32_t>(&id, 1), &l);
      if (t < n_ctx / 2) continue;
      const int32_t next = toks[size_t(c) * n_ctx + t + 1];
      const float mx = *std::max_element(l.begin(), l.end());
      double z = 0;
      for (float v : l) z += std::exp(double(v) - mx);
      const double nll = std::log(z) + mx - l[size_t(next)];
      sum += nll;
      sum2 += nll * nll;
      ++count;
    }
  }
  return perplexity_stats(sum, sum2, count);
}

}  // namespace

TEST(Perplexity, StatsAsLlamaCpp) {
  // NLLs {1, 2, 3}: mean 2, E[x^2] - mean^2 = 14/3 - 4 = 2/3, stderr = sqrt((2/3) / 2) * e^2.
  const PerplexityResult r = perplexity_stats(6.0, 14.0, 3);
  EXPECT_DOUBLE_EQ(r.mean_nll, 2.0);
  EXPECT_NEAR(r.ppl, std::exp(2.0), 1e-12);
  EXPECT_NEAR(r.ppl_stderr, std::sqrt(1.0 / 3.0) * std::exp(2.0), 1e-12);
  EXPECT_EQ(perplexity_stats(2.0, 4.0, 1).ppl_stderr, 0.0);  // one token: no spread
  EXPECT_EQ(perplexity_stats(0, 0, 0).ppl, 0.0);
}

TEST(Perplexity, PlanAndChunks) {
  PerplexityOptions o;
  o.n_ctx = 8;
  EXPECT_THROW(perplexity_plan(15, o), Error);  // fewer than 2 * n_ctx
  PerplexityPlan p = perplexity_plan(35, o);
  EXPECT_EQ(p.n_chunks, 4u);  // floor(35 / 8); the 3 tokens left over are not used
  EXPECT_EQ(p.first, 4u);
  EXPECT_EQ(p.scored(), 4u * 3u);  // positions 4, 5, 6 score tokens 5, 6, 7
  o.max_chunks = 2;
  EXPECT_EQ(perplexity_plan(35, o).n_chunks, 2u);
  o.max_chunks = 0;
  EXPECT_THROW(perplexity_plan(35, o), Error);
  o.max_chunks = -1;
  o.bos = 99;
  std::vector<int32_t> toks(35);
  for (int i = 0; i < 35; ++i) toks[size_t(i)] = 100 + i;
  std::vector<int32_t> ids, targets;
  perplexity_chunk(toks, p, o, 2, &ids, &targets);
  EXPECT_EQ(ids, (std::vector<int32_t>{99, 117, 118, 119, 120, 121, 122, 123}));
  EXPECT_EQ(targets, (std::vector<int32_t>{-1, -1, -1, -1, 121, 122, 123, -1}));
  EXPECT_THROW(perplexity_chunk(toks, p, o, 4, &ids, &targets), Error);
}

TEST(Perplexity, ForwardNllGpuEqualsCpu) {
  auto& f = fx();
  const uint32_t V = f.src->config.vocab;
  const auto ids = tokens_of(64, V, 7);
  std::vector<int32_t> targets(64, -1);
  for (size_t t = 20; t < 63; ++t) targets[t] = ids[t + 1];
  targets[30] = -1;  // a hole inside the scored range
  std::vector<float> g, c;
  auto sg = f.gpu->new_sequence(64), sc = f.cpu->new_sequence(64);
  f.gpu->forward_nll(*sg, ids, targets, &g);
  f.cpu->forward_nll(*sc, ids, targets, &c);
  ASSERT_EQ(g.size(), 64u);
  ASSERT_EQ(c.size(), 64u);
  EXPECT_EQ(sg->n_past(), 64u);
  EXPECT_EQ(sc->n_past(), 64u);
  double max_diff = 0;
  for (size_t t = 0; t < 64; ++t) {
    if (targets[t] < 0) {
      EXPECT_EQ(g[t], 0.0f) << t;
      EXPECT_EQ(c[t], 0.0f) << t;
      continue;
    }
    EXPECT_GT(c[t], 0.1f) << "degenerate NLL at " << t;
    max_diff = std::max(max_diff, double(std::fabs(g[t] - c[t])));
  }
  std::printf("forward_nll |gpu - cpu| max %.2e\n", max_diff);
  EXPECT_LE(max_diff, 1e-4);
  // Targets out of range and size mismatches are errors that leave the sequence alone.
  auto s2 = f.gpu->new_sequence(64);
  targets[40] = int32_t(V);
  EXPECT_THROW(f.gpu->forward_nll(*s2, ids, targets, &g), Error);
  EXPECT_THROW(f.gpu->forward_nll(*s2, ids, std::span<const int32_t>(targets).first(10), &g), Error);
  EXPECT_EQ(s2->n_past(), 0u);
}

TEST(Perplexity, ChunksEqualDirectComputation) {
  auto& f = fx();
  const uint32_t V = f.src->config.vocab;
  const auto toks = tokens_of(3 * 64 + 5, V, 11);
  PerplexityOptions o;
  o.n_ctx = 64;
  o.bos = 1;
  const PerplexityResult want = direct(*f.cpu, toks, 64, 3, 1);
  std::vector<uint32_t> seen;
  const PerplexityResult c = perplexity_chunks(*f.cpu, toks, o, [&](uint32_t d, uint32_t n, double) {
    seen.push_back(d);
    EXPECT_EQ(n, 3u);
  });
  const PerplexityResult g = perplexity_chunks(*f.gpu, toks, o);
  std::printf("ppl direct %.6f +/- %.6f  cpu %.6f  gpu %.6f (%llu tokens)\n", want.ppl, want.ppl_stderr, c.ppl, g.ppl,
              (unsigned long long)g.scored);
  EXPECT_EQ(seen, (std::vector<uint32_t>{1, 2, 3}));
  EXPECT_EQ(c.scored, 3u * 31u);
  EXPECT_EQ(g.scored, want.scored);
  EXPECT_EQ(g.chunks, 3u);
  EXPECT_EQ(g.chunk_ppl.size(), 3u);
  // Each chunk's own mean NLL (equal tokens scored per chunk): their mean is the whole mean, and
  // the running PPL after chunk 2 is exp of the first two's mean.
  ASSERT_EQ(g.chunk_nll.size(), 3u);
  EXPECT_NEAR((g.chunk_nll[0] + g.chunk_nll[1] + g.chunk_nll[2]) / 3, g.mean_nll, 1e-12);
  EXPECT_NEAR(std::exp((g.chunk_nll[0] + g.chunk_nll[1]) / 2), g.chunk_ppl[1], 1e-9 * g.chunk_ppl[1]);
  EXPECT_NE(g.chunk_nll[0], g.chunk_nll[1]);
  EXPECT_NEAR(c.ppl, want.ppl, 1e-5 * want.ppl);
  EXPECT_NEAR(c.ppl_stderr, want.ppl_stderr, 1e-4 * want.ppl_stderr);
  EXPECT_NEAR(g.ppl, want.ppl, 1e-4 * want.ppl);
  EXPECT_GT(want.ppl_stderr, 0.0);
  // Micro-batches (--ubatch-size): 1 token per forward (every position through the decode kernels)
  // and 5 (ragged: 64 = 12 x 5 + 4) score the same tokens and agree with the direct value.
  for (uint32_t ub : {1u, 5u}) {
    PerplexityOptions u = o;
    u.ubatch = ub;
    const PerplexityResult gu = perplexity_chunks(*f.gpu, toks, u);
    EXPECT_EQ(gu.scored, want.scored) << ub;
    EXPECT_NEAR(gu.ppl, want.ppl, 1e-4 * want.ppl) << ub;
  }
  // Two chunks only (--chunks 2) is the first two chunks' value.
  o.max_chunks = 2;
  const PerplexityResult g2 = perplexity_chunks(*f.gpu, toks, o);
  EXPECT_NEAR(g2.ppl, g.chunk_ppl[1], 1e-9 * g2.ppl);
}
