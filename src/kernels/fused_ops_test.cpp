// The decode fusions of ops.h (matmul_norm, matmul_silu, matmul_gate, matmul_combine, rope_kv_store) and gdn_ops.h
// (qk_norm_rope_kv_store) against the unfused
// dispatch sequences they replace, BIT-IDENTICAL (memcmp of the outputs), over awkward sizes and
// every matmul variant switch, and against the CPU twins (kernels/ref.h) within tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "core/error.h"
#include "formats/dtype.h"
#include "kernels/gdn_ops.h"
#include "kernels/gdn_ref.h"
#include "kernels/ops.h"
#include "kernels/ref.h"
#include "kernels/rope_table.h"
#include "kernels/kernel_test_env.h"

using namespace wgllm;
using namespace wgllm::kernels;
using namespace wgllm::kernels::testing;

namespace {

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, float rel, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  float mx = 0;
  for (float v : want) mx = std::max(mx, std::fabs(v));
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::fabs(got[i] - want[i]) <= rel * mx + 1e-6f) && ++bad < 5)
      ADD_FAILURE() << what << " [" << i << "] gpu " << got[i] << " cpu " << want[i];
  EXPECT_EQ(bad, 0u) << what;
}

// Matmul variant switches the fused prologues must not break: adapter default (software: 64 rows
// x 1 lane, the barrier-free serial norm), 3 rows x 8 lanes (a lane tree, as on GPUs; odd rows)
// with scalar activation loads, and 2 rows x 1 lane (fewer threads than the 5 tokens of a group).
// (Each variant is a pipeline compile on lavapipe, seconds each: the list is kept short for CI.)
// Then the matrix-vector kernel (matvec.wgsl, --matvec-subgroup) both fused and unfused: subgroup
// reduction with default rows, the workgroup-memory tree with 3 rows and scalar loads, and 8 rows
// of 4 per thread (one activation block for four rows).
std::vector<KernelOptions> variants() {
  std::vector<KernelOptions> v(6);
  v[0].matvec_subgroup = v[1].matvec_subgroup = v[2].matvec_subgroup = 0;
  v[1].matmul_rows_per_workgroup = 3, v[1].matmul_lanes_per_row = 8;
  v[1].vec4_activations = false;
  v[2].matmul_rows_per_workgroup = 2, v[2].matmul_lanes_per_row = 1;
  v[3].matvec_subgroup = 1;
  v[4].matvec_subgroup = 1, v[4].matvec_subgroup_ops = false, v[4].matvec_rows_per_workgroup = 3;
  v[4].vec4_activations = false;
  v[5].matvec_subgroup = 1, v[5].matvec_rows_per_workgroup = 8, v[5].matvec_rows_per_thread = 4;
  return v;
}

// The kernel choice of a variant, for failure messages.
std::string kernel_name(const KernelOptions& ko) {
  return ko.matvec_subgroup == 1 ? (ko.matvec_subgroup_ops ? " matvec" : " matvec-tree") : " matmul";
}

}  // namespace

TEST(FusedOps, MatmulNormBitIdenticalToRmsnormThenMatmul) {
  auto& e = env();
  for (DType t : {DType::Q4_1, DType::Q6_K}) {  // 32- and 16-element GPU blocks
    const bool kq = dtype_block_elems(t) == 256;
    for (uint32_t K : {kq ? 256u : 96u, kq ? 768u : 800u}) {  // < and > the 256 sum-of-squares slots
      const uint32_t N = 37;
      auto blocks = random_blocks(t, K, N, K + N);
      ref::Matrix M{K, N, std::vector<float>(size_t(K) * N)};
      dequantize(t, blocks.data(), M.w.data(), uint64_t(K) * N);
      auto W = upload_weight(*e.ctx, pack_weight(t, blocks.data(), K, N), "w");
      for (uint32_t T : {1u, 5u}) {
        for (bool acc : {T > 1}) {
          const uint32_t xs = K + 4, ys = N + 3;
          auto x = randn(size_t(T) * xs + 4, T + K, 2.0f), nw = randn(K, K, 1.0f), y0 = randn(size_t(T) * ys + 2, N);
          auto xb = e.upload(x), nwb = e.upload(nw), hb = e.upload(std::vector<float>(size_t(T) * K));
          std::vector<float> want = y0, h(size_t(T) * K);
          for (uint32_t r = 0; r < T; ++r) ref::rmsnorm(x.data() + 4 + r * xs, nw.data(), h.data() + r * K, K, 1e-5f);
          ref::matmul(M, h.data(), K, want.data() + 2, ys, T, acc);
          for (const KernelOptions& ko : variants()) {
            auto o = e.op(ko);
            auto y1 = e.upload(y0), y2 = e.upload(y0);
            e.rec.begin();
            rmsnorm(o, {xb, 4}, xs, nwb, {hb, 0}, K, T, K, 1e-5f);
            matmul(o, W, {hb, 0}, K, {y1, 2}, ys, T, acc);
            matmul_norm(o, W, {xb, 4}, xs, nwb, 1e-5f, {y2, 2}, ys, T, acc);
            e.rec.submit();
            const std::string what = dtype_name(t) + " K=" + std::to_string(K) + " T=" + std::to_string(T) +
                                     " acc=" + std::to_string(acc) + " rows=" + std::to_string(ko.matmul_rows_per_workgroup) +
                                     " vec4=" + std::to_string(ko.vec4_activations) + kernel_name(ko);
            auto unfused = e.download(y1, y0.size()), fused = e.download(y2, y0.size());
            EXPECT_TRUE(same_bits(fused, unfused)) << what;
            expect_close(fused, want, 3e-5f, what);
          }
        }
      }
    }
  }
}

TEST(FusedOps, MatmulSiluBitIdenticalToSiluMulThenMatmul) {
  auto& e = env();
  for (DType t : {DType::Q4_1, DType::F32}) {
    for (uint32_t F : {96u, 544u}) {
      const uint32_t N = 29;
      auto blocks = random_blocks(t, F, N, F * 3 + N);
      ref::Matrix M{F, N, std::vector<float>(size_t(F) * N)};
      dequantize(t, blocks.data(), M.w.data(), uint64_t(F) * N);
      auto W = upload_weight(*e.ctx, pack_weight(t, blocks.data(), F, N), "w");
      for (uint32_t T : {1u, 8u}) {
        auto gu = randn(size_t(T) * 2 * F, F + T, 3.0f), y0 = randn(size_t(T) * N, N);
        auto gb = e.upload(gu), ab = e.upload(std::vector<float>(size_t(T) * F));
        std::vector<float> act(size_t(T) * F), want = y0;
        for (uint32_t r = 0; r < T; ++r) ref::silu_mul(gu.data() + r * 2 * F, gu.data() + r * 2 * F + F, act.data() + r * F, F);
        ref::matmul(M, act.data(), F, want.data(), N, T, true);
        for (const KernelOptions& ko : variants()) {
          auto o = e.op(ko);
          auto y1 = e.upload(y0), y2 = e.upload(y0);
          e.rec.begin();
          silu_mul(o, gb, 0, F, 2 * F, T, F, {ab, 0});
          matmul(o, W, {ab, 0}, F, {y1, 0}, N, T, true);
          matmul_silu(o, W, gb, 0, F, 2 * F, {y2, 0}, N, T, true);
          e.rec.submit();
          const std::string what = dtype_name(t) + " F=" + std::to_string(F) + " T=" + std::to_string(T) +
                                   " rows=" + std::to_string(ko.matmul_rows_per_workgroup) +
                                   " vec4=" + std::to_string(ko.vec4_activations) + kernel_name(ko);
          auto unfused = e.download(y1, y0.size()), fused = e.download(y2, y0.size());
          EXPECT_TRUE(same_bits(fused, unfused)) << what;
          expect_close(fused, want, 3e-5f, what);
        }
      }
    }
  }
}

TEST(FusedOps, RopeKvStoreBitIdenticalToRopeRopeKvStore) {
  auto& e = env();
  const uint32_t Hq = 6, Hkv = 2, ctx_len = 64;
  for (uint32_t HD : {64u, 36u}) {
    for (uint32_t rot : {HD, 16u}) {
      for (bool neox : {false, true}) {
        for (bool separate_rows : {false, true}) {  // llama: [q|k|v] rows; LFM2: [q rows][k rows][v rows]
          for (uint32_t T : {1u, 5u, 11u}) {
            const uint32_t pos0 = 9, Q = Hq * HD, KV = Hkv * HD;
            const uint32_t q_stride = separate_rows ? Q : Q + 2 * KV, kv_stride = separate_rows ? KV : Q + 2 * KV;
            const uint32_t k_off = separate_rows ? T * Q : Q, v_off = separate_rows ? T * (Q + KV) : Q + KV;
            const size_t n = size_t(T) * (Q + 2 * KV);
            auto table = rope_table(ctx_len, rot, 10000.0);
            auto src = randn(n, HD + rot + neox + T);
            auto tb = e.upload(table), s1 = e.upload(src), s2 = e.upload(src);
            auto zero = std::vector<float>(size_t(ctx_len) * KV);
            auto k1 = e.upload(zero), v1 = e.upload(zero), k2 = e.upload(zero), v2 = e.upload(zero);
            auto o = e.op();
            e.rec.begin();
            rope(o, {s1, 0}, q_stride, T, Hq, HD, rot, pos0, tb, neox);
            rope(o, {s1, k_off}, kv_stride, T, Hkv, HD, rot, pos0, tb, neox);
            kv_store(o, s1, k_off, v_off, kv_stride, T, KV, pos0, k1, v1);
            rope_kv_store(o, s2, 0, q_stride, k_off, v_off, kv_stride, T, Hq, Hkv, HD, rot, pos0, tb, neox, k2, v2);
            e.rec.submit();
            const std::string what = "HD=" + std::to_string(HD) + " rot=" + std::to_string(rot) + " neox=" +
                                     std::to_string(neox) + " sep=" + std::to_string(separate_rows) + " T=" + std::to_string(T);
            auto a = e.download(s1, n), b = e.download(s2, n);
            for (uint32_t t = 0; t < T; ++t)  // the q rows (k rows of src stay unrotated in the fused kernel)
              EXPECT_EQ(std::memcmp(a.data() + t * q_stride, b.data() + t * q_stride, Q * 4), 0) << what << " q t=" << t;
            EXPECT_TRUE(same_bits(e.download(k2, zero.size()), e.download(k1, zero.size()))) << what << " k cache";
            EXPECT_TRUE(same_bits(e.download(v2, zero.size()), e.download(v1, zero.size()))) << what << " v cache";
            // CPU twin: rotate each token's q and k heads, then the cache rows.
            std::vector<float> kwant(zero), qwant;
            auto kcache = e.download(k2, zero.size());
            for (uint32_t t = 0; t < T; ++t) {
              std::vector<float> q(src.begin() + t * q_stride, src.begin() + t * q_stride + Q);
              std::vector<float> k(src.begin() + k_off + t * kv_stride, src.begin() + k_off + t * kv_stride + KV);
              ref::rope(q.data(), Hq, HD, rot, pos0 + t, table.data(), neox);
              ref::rope(k.data(), Hkv, HD, rot, pos0 + t, table.data(), neox);
              expect_close(std::vector<float>(b.begin() + t * q_stride, b.begin() + t * q_stride + Q), q, 1e-6f, what + " q vs cpu");
              expect_close(std::vector<float>(kcache.begin() + (pos0 + t) * KV, kcache.begin() + (pos0 + t + 1) * KV), k, 1e-6f,
                           what + " k vs cpu");
            }
          }
        }
      }
    }
  }
}

// matmul_gate == sigmoid_gate + matmul, bit for bit (Qwen3.5's gated attention output): x rows of
// stride S with the gate g at the same element + g_off in another buffer, as the model lays them out.
// Checked to fail: matmul.wgsl's GATE written x / (1 + exp(-g)) fails the 12 per-row matmul cases.
TEST(FusedOps, MatmulGateBitIdenticalToSigmoidGateMatmul) {
  auto& e = env();
  for (DType t : {DType::Q4_1, DType::F32}) {
    const uint32_t K = 256, N = 29, S = 2 * K + 64, g_off = K;  // S: [q | gate | k | v] row
    auto blocks = random_blocks(t, K, N, K * 5 + N);
    ref::Matrix M{K, N, std::vector<float>(size_t(K) * N)};
    dequantize(t, blocks.data(), M.w.data(), uint64_t(K) * N);
    auto W = upload_weight(*e.ctx, pack_weight(t, blocks.data(), K, N), "w");
    for (uint32_t T : {1u, 5u}) {
      auto x = randn(size_t(T) * S, K + T, 2.0f), g = randn(size_t(T) * S, K + T + 1, 3.0f), y0 = randn(size_t(T) * N, N);
      auto gb = e.upload(g);
      std::vector<float> act(size_t(T) * K), want = y0;
      for (uint32_t r = 0; r < T; ++r) {
        std::copy_n(x.begin() + r * S, K, act.begin() + r * K);
        ref::sigmoid_gate(act.data() + r * K, g.data() + r * S + g_off, K);
      }
      ref::matmul(M, act.data(), K, want.data(), N, T, true);
      for (const KernelOptions& ko : variants()) {
        auto o = e.op(ko);
        auto x1 = e.upload(x), x2 = e.upload(x), y1 = e.upload(y0), y2 = e.upload(y0);
        e.rec.begin();
        sigmoid_gate(o, {x1, 0}, S, {gb, g_off}, S, T, K);
        matmul(o, W, {x1, 0}, S, {y1, 0}, N, T, true);
        matmul_gate(o, W, {x2, 0}, S, gb, g_off, {y2, 0}, N, T, true);
        e.rec.submit();
        const std::string what = dtype_name(t) + " T=" + std::to_string(T) + " rows=" +
                                 std::to_string(ko.matmul_rows_per_workgroup) + " vec4=" +
                                 std::to_string(ko.vec4_activations) + kernel_name(ko);
        auto unfused = e.download(y1, y0.size()), fused = e.download(y2, y0.size());
        EXPECT_TRUE(same_bits(fused, unfused)) << what;
        expect_close(fused, want, 3e-5f, what);
      }
    }
  }
}

// matmul_combine == attention_combine + matmul, bit for bit: a split attention over a random cache
// whose merge attention() defers to the output projection (--fuse-attn-combine), against the same
// attention merged by attention_combine and projected by matvec.wgsl with the same options. One
// token (the GQA decode kernel: 13 and 32 splits of 8 keys, 2 and 4 of 64) and three (the
// multi-query prefill kernel's key split); f32 and int8
// activations; 32- and 256-element weight blocks and f32 weights.
// Checked to fail: combined() dividing as num * (1.0 / den) fails the bit comparison.
TEST(FusedOps, MatmulCombineBitIdenticalToCombineMatmul) {
  auto& e = env();
  const uint32_t Hq = 4, Hkv = 2, HD = 64, Q = Hq * HD, KV = Hkv * HD, N = 40, ctx_len = 300;
  auto kc = e.upload(randn(size_t(ctx_len) * KV, 71)), vc = e.upload(randn(size_t(ctx_len) * KV, 72));
  for (DType t : {DType::Q4_1, DType::Q4_K, DType::F32}) {
    auto blocks = random_blocks(t, Q, N, Q * 3 + N);
    ref::Matrix M{Q, N, std::vector<float>(size_t(Q) * N)};
    dequantize(t, blocks.data(), M.w.data(), uint64_t(Q) * N);
    auto W = upload_weight(*e.ctx, pack_weight(t, blocks.data(), Q, N), "w");
    for (uint32_t T : {1u, 3u})
      for (uint32_t n_keys : {100u, 256u})
        for (uint32_t split_len : {8u, 64u})
          for (uint8_t i8 : {uint8_t(0), uint8_t(1)}) {
            if (T == 3 && (split_len == 64 || n_keys == 256)) continue;  // (pipeline compiles: kept short)
            KernelOptions ko;
            ko.matvec_subgroup = 1, ko.matvec_int8 = i8;
            ko.attention_decode_split_min = 0, ko.attention_decode_split_len = split_len;
            ko.attention_tiled_split_target = 64;  // T = 3: few row tiles, so the keys split
            auto o = e.op(ko);
            const AttentionShape as{T, n_keys - T, Hq, Hkv, HD, 0.125f};
            const std::string what = dtype_name(t) + " T=" + std::to_string(T) + " keys=" + std::to_string(n_keys) +
                                     " split_len=" + std::to_string(split_len) + " i8=" + std::to_string(i8);
            ASSERT_TRUE(attention_combine_fusable(o, W, T, HD)) << what;
            auto q = e.upload(randn(size_t(T) * Q, 73 + T, 0.5f));
            auto sc1 = e.upload(std::vector<float>(attention_split_floats(T, Hq, HD, 64)));
            auto sc2 = e.upload(std::vector<float>(attention_split_floats(T, Hq, HD, 64)));
            auto y0 = randn(size_t(T) * N, N + T);
            auto att = e.upload(std::vector<float>(size_t(T) * Q)), y1 = e.upload(y0), y2 = e.upload(y0);
            AttentionPartials parts;
            e.rec.begin();
            attention(o, as, {q, 0}, Q, kc, vc, {att, 0}, Q, &sc1);
            matmul(o, W, {att, 0}, Q, {y1, 0}, N, T, true);
            attention(o, as, {q, 0}, Q, kc, vc, {att, 0}, Q, &sc2, nullptr, nullptr, &parts);
            ASSERT_NE(parts.scratch, nullptr) << what << ": the keys were not split";
            EXPECT_GT(parts.n_split, 1u) << what;
            matmul_combine(o, W, parts, {y2, 0}, N, true);
            e.rec.submit();
            auto unfused = e.download(y1, y0.size()), fused = e.download(y2, y0.size());
            EXPECT_TRUE(same_bits(fused, unfused)) << what << " n_split=" << parts.n_split;
            if (!i8) {  // the projection of the merged output, against the CPU twin
              std::vector<float> want = y0, a = e.download(att, size_t(T) * Q);
              ref::matmul(M, a.data(), Q, want.data(), N, T, true);
              expect_close(fused, want, 3e-5f, what);
            }
          }
  }
  // Not fusable: switch off, or the per-row matmul kernel.
  KernelOptions off;
  off.matvec_subgroup = 1, off.fuse_attn_combine = false;
  auto blocks = random_blocks(DType::Q4_1, Q, N, 5);
  auto W = upload_weight(*e.ctx, pack_weight(DType::Q4_1, blocks.data(), Q, N), "w");
  EXPECT_FALSE(attention_combine_fusable(e.op(off), W, 1, HD));
  off.fuse_attn_combine = true, off.matvec_subgroup = 0;
  EXPECT_FALSE(attention_combine_fusable(e.op(off), W, 1, HD));
  off.matvec_subgroup = 1;
  EXPECT_FALSE(attention_combine_fusable(e.op(off), W, kFusedMaxTokens + 1, HD));
  EXPECT_TRUE(attention_combine_fusable(e.op(off), W, 1, HD));
}

// qk_norm_rope_kv_store == rmsnorm_heads (q) + rmsnorm_heads (k) + rope_kv_store, bit for bit: the q
// rows and both caches, [q | k | v] rows of LFM2 / Qwen3.5 (the q rows of Qwen3.5 are followed by
// its gate rows: q_stride = kv_stride = the whole row), head dims 64 (LFM2) and 256 (Qwen3.5),
// full and partial rotary dims, both pair layouts, one and several tokens.
// Checked to fail: the key norm written x * (scale * w) instead of head_norm's (x * scale) * w fails
// all 16 configurations (k cache bits), while the CPU comparison alone still passes.
TEST(FusedOps, QkNormRopeKvBitIdenticalToHeadNormsAndRopeKv) {
  auto& e = env();
  const uint32_t Hq = 4, Hkv = 2, ctx_len = 32;
  for (uint32_t HD : {64u, 256u})
    for (uint32_t rot : {HD, HD / 4})
      for (bool neox : {false, true})
        for (uint32_t T : {1u, 5u}) {
          const uint32_t pos0 = 7, Q = Hq * HD, KV = Hkv * HD, gate = neox ? Q : 0, S = Q + gate + 2 * KV;
          const uint32_t k_off = Q + gate, v_off = k_off + KV;
          const size_t n = size_t(T) * S;
          const float eps = 1e-6f;
          auto table = rope_table(ctx_len, rot, 10000.0);
          auto src = randn(n, HD + rot + neox + T, 3.0f);
          auto qw = randn(HD, 5 + HD), kw = randn(HD, 6 + HD);
          auto tb = e.upload(table), s1 = e.upload(src), s2 = e.upload(src), qb = e.upload(qw), kb = e.upload(kw);
          auto zero = std::vector<float>(size_t(ctx_len) * KV);
          auto k1 = e.upload(zero), v1 = e.upload(zero), k2 = e.upload(zero), v2 = e.upload(zero);
          auto o = e.op();
          e.rec.begin();
          rmsnorm_heads(o, {s1, 0}, S, HD, T, Hq, HD, qb, eps);
          rmsnorm_heads(o, {s1, k_off}, S, HD, T, Hkv, HD, kb, eps);
          rope_kv_store(o, s1, 0, S, k_off, v_off, S, T, Hq, Hkv, HD, rot, pos0, tb, neox, k1, v1);
          qk_norm_rope_kv_store(o, s2, 0, S, k_off, v_off, S, T, Hq, Hkv, HD, rot, pos0, tb, neox, qb, kb, eps, k2, v2);
          e.rec.submit();
          const std::string what = "HD=" + std::to_string(HD) + " rot=" + std::to_string(rot) + " neox=" +
                                   std::to_string(neox) + " T=" + std::to_string(T);
          auto a = e.download(s1, n), b = e.download(s2, n);
          for (uint32_t t = 0; t < T; ++t)  // the q rows (the fused kernel leaves src's k rows as they were)
            EXPECT_EQ(std::memcmp(a.data() + t * S, b.data() + t * S, Q * 4), 0) << what << " q t=" << t;
          EXPECT_TRUE(same_bits(e.download(k2, zero.size()), e.download(k1, zero.size()))) << what << " k cache";
          EXPECT_TRUE(same_bits(e.download(v2, zero.size()), e.download(v1, zero.size()))) << what << " v cache";
          // CPU twins: per-head RMSNorm then RoPE of each token's q and k heads; v copied.
          auto kcache = e.download(k2, zero.size()), vcache = e.download(v2, zero.size());
          for (uint32_t t = 0; t < T; ++t) {
            std::vector<float> q(src.begin() + t * S, src.begin() + t * S + Q);
            std::vector<float> k(src.begin() + k_off + t * S, src.begin() + k_off + t * S + KV);
            ref::rmsnorm_heads(q.data(), qw.data(), Hq, HD, HD, eps);
            ref::rmsnorm_heads(k.data(), kw.data(), Hkv, HD, HD, eps);
            ref::rope(q.data(), Hq, HD, rot, pos0 + t, table.data(), neox);
            ref::rope(k.data(), Hkv, HD, rot, pos0 + t, table.data(), neox);
            expect_close(std::vector<float>(b.begin() + t * S, b.begin() + t * S + Q), q, 2e-5f, what + " q vs cpu");
            const size_t row = size_t(pos0 + t) * KV;
            expect_close(std::vector<float>(kcache.begin() + row, kcache.begin() + row + KV), k, 2e-5f, what + " k vs cpu");
            EXPECT_EQ(std::memcmp(vcache.data() + row, src.data() + v_off + t * S, KV * 4), 0) << what << " v vs src";
          }
        }
}

TEST(FusedOps, MatmulQkvRopeKvBitIdenticalToMatmulRopeRopeKvStore) {
  auto& e = env();
  const uint32_t K = 64, Hq = 4, Hkv = 2, ctx_len = 32, pos0 = 7;
  for (uint32_t HD : {16u, 12u}) {
    const uint32_t Q = Hq * HD, KV = Hkv * HD, N = Q + 2 * KV;
    auto blocks = random_blocks(DType::Q8_0, K, N, HD);
    ref::Matrix M{K, N, std::vector<float>(size_t(K) * N)};
    dequantize(DType::Q8_0, blocks.data(), M.w.data(), uint64_t(K) * N);
    auto W = upload_weight(*e.ctx, pack_weight(DType::Q8_0, blocks.data(), K, N), "w");
    for (uint32_t rot : {HD, 8u}) {
      auto table = rope_table(ctx_len, rot, 10000.0);
      auto tb = e.upload(table);
      for (bool neox : {false, true}) {
        for (bool norm : {false, true}) {
          for (uint32_t T : {1u, 3u}) {
            auto x = randn(size_t(T) * K, HD + rot + T, 2.0f), nw = randn(K, 3);
            auto xb = e.upload(x), nwb = e.upload(nw), hb = e.upload(std::vector<float>(size_t(T) * K));
            const bool all_variants = neox && norm && T == 1;
            KernelOptions mv;
            mv.matvec_subgroup = 1;
            for (const KernelOptions& ko : all_variants ? variants() : std::vector<KernelOptions>{variants()[0], mv}) {
              auto o = e.op(ko);
              const auto zero = std::vector<float>(size_t(ctx_len) * KV), y0 = std::vector<float>(size_t(T) * N);
              auto y1 = e.upload(y0), y2 = e.upload(y0);
              auto k1 = e.upload(zero), v1 = e.upload(zero), k2 = e.upload(zero), v2 = e.upload(zero);
              e.rec.begin();
              if (norm) {
                matmul_norm(o, W, {xb, 0}, K, nwb, 1e-5f, {y1, 0}, N, T, false);
              } else {
                matmul(o, W, {xb, 0}, K, {y1, 0}, N, T, false);
              }
              rope(o, {y1, 0}, N, T, Hq, HD, rot, pos0, tb, neox);
              rope(o, {y1, Q}, N, T, Hkv, HD, rot, pos0, tb, neox);
              kv_store(o, y1, Q, Q + KV, N, T, KV, pos0, k1, v1);
              const QkvRopeKv rk{Q, KV, HD, rot, pos0, neox, &tb, k2, v2};
              matmul_qkv_rope_kv(o, W, {xb, 0}, K, norm ? &nwb : nullptr, 1e-5f, {y2, 0}, N, T, rk);
              e.rec.submit();
              const std::string what = "HD=" + std::to_string(HD) + " rot=" + std::to_string(rot) + " neox=" +
                                       std::to_string(neox) + " norm=" + std::to_string(norm) + " T=" + std::to_string(T) +
                                       " rows=" + std::to_string(ko.matmul_rows_per_workgroup) + kernel_name(ko);
              auto fused = e.download(y2, y0.size());
              EXPECT_TRUE(same_bits(fused, e.download(y1, y0.size()))) << what << " q|k|v rows";
              EXPECT_TRUE(same_bits(e.download(k2, zero.size()), e.download(k1, zero.size()))) << what << " k cache";
              EXPECT_TRUE(same_bits(e.download(v2, zero.size()), e.download(v1, zero.size()))) << what << " v cache";
              // CPU twin: (norm,) matmul, then rope of each token's q and k heads.
              std::vector<float> h = x, want(size_t(T) * N);
              if (norm)
                for (uint32_t t = 0; t < T; ++t) ref::rmsnorm(x.data() + t * K, nw.data(), h.data() + t * K, K, 1e-5f);
              ref::matmul(M, h.data(), K, want.data(), N, T, false);
              for (uint32_t t = 0; t < T; ++t) {
                ref::rope(want.data() + t * N, Hq, HD, rot, pos0 + t, table.data(), neox);
                ref::rope(want.data() + t * N + Q, Hkv, HD, rot, pos0 + t, table.data(), neox);
              }
              expect_close(fused, want, 3e-5f, what + " vs cpu");
            }
          }
        }
      }
    }
  }
}

// The projection in parts of different weight types ([q | k] Q8_0 and [v] Q4_0 as in Q4_K_M files
// whose V is Q6_K; or q, k, v alone) with Qwen2's biases: one matmul_qkv_rope_kv per part equals
// the unfused path (a matmul per part, add_bias, rope, rope, kv_store) bit for bit.
TEST(FusedOps, MatmulQkvRopeKvPartsWithBiasBitIdenticalToUnfusedPath) {
  auto& e = env();
  const uint32_t K = 64, Hq = 4, Hkv = 2, HD = 16, rot = 8, ctx_len = 16, pos0 = 5;
  const uint32_t Q = Hq * HD, KV = Hkv * HD, N = Q + 2 * KV;
  const auto table = rope_table(ctx_len, rot, 10000.0);
  auto tb = e.upload(table);
  // Each split: the rows each part covers and its weight type.
  struct Part { uint32_t row0, rows; DType type; };
  const std::vector<std::vector<Part>> splits{
      {{0, N, DType::Q8_0}},
      {{0, Q + KV, DType::Q8_0}, {Q + KV, KV, DType::Q4_0}},
      {{0, Q, DType::Q4_0}, {Q, KV, DType::Q8_0}, {Q + KV, KV, DType::Q4_0}}};
  KernelOptions mv;
  mv.matvec_subgroup = 1;
  for (size_t si = 0; si < splits.size(); ++si) {
    std::vector<GpuWeight> ws;
    ref::Matrix M{K, N, std::vector<float>(size_t(K) * N)};
    for (const Part& pt : splits[si]) {
      auto blocks = random_blocks(pt.type, K, pt.rows, 7 + pt.row0);
      dequantize(pt.type, blocks.data(), M.w.data() + size_t(pt.row0) * K, uint64_t(K) * pt.rows);
      ws.push_back(upload_weight(*e.ctx, pack_weight(pt.type, blocks.data(), K, pt.rows), "w"));
    }
    for (bool bias : {false, true}) {
      for (bool neox : {false, true}) {
        if (!neox && si != 1) continue;  // (pipelines compile slowly on software adapters)
        for (uint32_t T : {1u, 3u}) {
          const auto x = randn(size_t(T) * K, 11 + T, 2.0f), nw = randn(K, 3), bv = randn(N, 5, 0.5f);
          auto xb = e.upload(x), nwb = e.upload(nw), bb = e.upload(bv);
          const bool all = si == 1 && bias && T == 1;  // every kernel variant once
          for (const KernelOptions& ko : all ? std::vector<KernelOptions>{variants()[0], variants()[2], mv, variants()[5]}
                                             : std::vector<KernelOptions>{variants()[0], mv}) {
            auto o = e.op(ko);
            const auto zero = std::vector<float>(size_t(ctx_len) * KV), y0 = std::vector<float>(size_t(T) * N);
            auto y1 = e.upload(y0), y2 = e.upload(y0);
            auto k1 = e.upload(zero), v1 = e.upload(zero), k2 = e.upload(zero), v2 = e.upload(zero);
            e.rec.begin();
            for (size_t i = 0; i < ws.size(); ++i)
              matmul_norm(o, ws[i], {xb, 0}, K, nwb, 1e-5f, {y1, splits[si][i].row0}, N, T, false);
            if (bias) add_bias(o, bb, N, {y1, 0}, N, T, "bias");
            rope(o, {y1, 0}, N, T, Hq, HD, rot, pos0, tb, neox);
            rope(o, {y1, Q}, N, T, Hkv, HD, rot, pos0, tb, neox);
            kv_store(o, y1, Q, Q + KV, N, T, KV, pos0, k1, v1);
            QkvRopeKv rk{Q, KV, HD, rot, pos0, neox, &tb, k2, v2};
            rk.bias = bias ? &bb : nullptr;
            for (size_t i = 0; i < ws.size(); ++i) {
              rk.row0 = splits[si][i].row0;
              matmul_qkv_rope_kv(o, ws[i], {xb, 0}, K, &nwb, 1e-5f, {y2, rk.row0}, N, T, rk);
            }
            e.rec.submit();
            const std::string what = "split=" + std::to_string(si) + " bias=" + std::to_string(bias) +
                                     " neox=" + std::to_string(neox) + " T=" + std::to_string(T) + kernel_name(ko);
            auto fused = e.download(y2, y0.size());
            EXPECT_TRUE(same_bits(fused, e.download(y1, y0.size()))) << what << " q|k|v rows";
            EXPECT_TRUE(same_bits(e.download(k2, zero.size()), e.download(k1, zero.size()))) << what << " k cache";
            EXPECT_TRUE(same_bits(e.download(v2, zero.size()), e.download(v1, zero.size()))) << what << " v cache";
            // CPU twin: norm, matmul, bias, then rope of each token's q and k heads.
            std::vector<float> h = x, want(size_t(T) * N);
            for (uint32_t t = 0; t < T; ++t) ref::rmsnorm(x.data() + t * K, nw.data(), h.data() + t * K, K, 1e-5f);
            ref::matmul(M, h.data(), K, want.data(), N, T, false);
            for (uint32_t t = 0; t < T; ++t) {
              if (bias)
                for (uint32_t n = 0; n < N; ++n) want[t * N + n] += bv[n];
              ref::rope(want.data() + t * N, Hq, HD, rot, pos0 + t, table.data(), neox);
              ref::rope(want.data() + t * N + Q, Hkv, HD, rot, pos0 + t, table.data(), neox);
            }
            expect_close(fused, want, 3e-5f, what + " vs cpu");
          }
        }
      }
    }
  }
}

// --fuse-qkv-formats: a QKV projection in two weight types ([q | k] of 32-element blocks: Q4_K as
// in Q4_K_M files, Q4_0, Q8_0; [v] Q6_K, widened) as ONE matvec.wgsl launch (P2) equals one
// matmul_qkv_rope_kv launch per part bit for bit (rows, both caches), with int8 activations, under
// the subgroup and tree reductions, several rows per workgroup / per thread settings (ROWS 10: a
// partial last workgroup in each part), biases, both pair layouts, T 1 to 3, and K 512 and 4096
// (several blocks per lane accumulator). Where the launch does not apply (prefetch on, the packed
// Q6_K layout, int8 off), matmul_qkv_formats_applies says so and the two-part call throws. (Parts
// whose own launches have different lanes are refused too; software adapters give every matrix 8.)
// Checked to fail: quantize16's scale as m / 127.5 instead of m / 127 (v rows and the v cache
// differ); the second part's rows written at the first part's columns (q|k|v rows differ).
TEST(FusedOps, MatmulQkvRopeKvTwoFormatsBitIdenticalToOneLaunchPerPart) {
  auto& e = env();
  const uint32_t Hq = 4, Hkv = 2, HD = 16, rot = 8, ctx_len = 16, pos0 = 6;
  const uint32_t Q = Hq * HD, KV = Hkv * HD, N = Q + 2 * KV;
  const auto table = rope_table(ctx_len, rot, 10000.0);
  auto tb = e.upload(table);
  // K 512: at most one block per lane accumulator on hardware adapters (64 lanes); K 4096 on 32 lanes:
  // 4 (first part) and 8 (second part) blocks per lane, so that each row's sum has several terms.
  auto v_weight = [&](uint32_t K, bool packed) {
    const auto v_blocks = random_blocks(DType::Q6_K, K, KV, 91 + K);
    return upload_weight(*e.ctx, pack_weight(DType::Q6_K, v_blocks.data(), K, KV, packed), "v");
  };
  const GpuWeight Wv512 = v_weight(512, false), Wv4096 = v_weight(4096, false), Wv_packed = v_weight(512, true);
  ASSERT_EQ(Wv512.fmt, WFormat::Q8_F32);
  std::vector<KernelOptions> kos(6);
  for (KernelOptions& k : kos) k.matvec_subgroup = 1, k.matvec_int8 = 1;
  kos[1].matvec_subgroup_ops = false;
  kos[2].matvec_rows_per_workgroup = 6, kos[2].matvec_rows_per_thread = 2;
  kos[3].matvec_rows_per_workgroup = 8, kos[3].matvec_rows_per_thread = 4, kos[3].matvec_lanes = 32;
  kos[4].matvec_lanes = 16, kos[4].matvec_subgroup_ops = false;
  kos[5].matvec_lanes = 32, kos[5].matvec_rows_per_workgroup = 10, kos[5].matvec_rows_per_thread = 2;  // partial last workgroups
  // (first part's type, options, bias, neox, T): each options set once with biases, NeoX, one token;
  // the plain GGUF pairs and three tokens once (pipelines compile slowly on software adapters).
  struct Case { DType t1; size_t ko; bool bias, neox; uint32_t T, K; };
  std::vector<Case> cases{{DType::Q4_K, 0, false, false, 3, 512}, {DType::Q4_0, 0, true, true, 1, 512},
                          {DType::Q8_0, 2, true, true, 1, 512}, {DType::Q4_K, 5, true, true, 1, 4096},
                          {DType::Q4_K, 5, false, false, 2, 4096}};
  for (size_t vi = 0; vi + 1 < kos.size(); ++vi) cases.push_back({DType::Q4_K, vi, true, true, 1, 512});
  for (const Case& c : cases) {
    const uint32_t K = c.K;
    const GpuWeight& Wv = K == 512 ? Wv512 : Wv4096;
    const auto qk_blocks = random_blocks(c.t1, K, Q + KV, 17);
    const GpuWeight Wqk = upload_weight(*e.ctx, pack_weight(c.t1, qk_blocks.data(), K, Q + KV), "qk");
    const uint32_t T = c.T;
    auto o = e.op(kos[c.ko]);
    const std::string what = dtype_name(c.t1) + " options#" + std::to_string(c.ko) + " bias=" + std::to_string(c.bias) +
                             " neox=" + std::to_string(c.neox) + " T=" + std::to_string(T) + " K=" + std::to_string(K);
    ASSERT_TRUE(matmul_qkv_formats_applies(o, Wqk, Wv, T)) << what;
    const auto x = randn(size_t(T) * K, 29 + T, 2.0f), nw = randn(K, 3), bv = randn(N, 5, 0.5f);
    auto xb = e.upload(x), nwb = e.upload(nw), bb = e.upload(bv);
    const auto zero = std::vector<float>(size_t(ctx_len) * KV), y0 = randn(size_t(T) * N, 3);
    auto y1 = e.upload(y0), y2 = e.upload(y0);
    auto k1 = e.upload(zero), v1 = e.upload(zero), k2 = e.upload(zero), v2 = e.upload(zero);
    QkvRopeKv r1{Q, KV, HD, rot, pos0, c.neox, &tb, k1, v1}, r2{Q, KV, HD, rot, pos0, c.neox, &tb, k2, v2};
    r1.bias = r2.bias = c.bias ? &bb : nullptr;
    e.rec.begin();
    matmul_qkv_rope_kv(o, Wqk, {xb, 0}, K, &nwb, 1e-5f, {y1, 0}, N, T, r1);
    r1.row0 = Q + KV;
    matmul_qkv_rope_kv(o, Wv, {xb, 0}, K, &nwb, 1e-5f, {y1, Q + KV}, N, T, r1);
    matmul_qkv_rope_kv(o, Wqk, Wv, {xb, 0}, K, &nwb, 1e-5f, {y2, 0}, N, T, r2);
    e.rec.submit();
    EXPECT_TRUE(same_bits(e.download(y2, y0.size()), e.download(y1, y0.size()))) << what << " q|k|v rows";
    EXPECT_TRUE(same_bits(e.download(k2, zero.size()), e.download(k1, zero.size()))) << what << " k cache";
    EXPECT_TRUE(same_bits(e.download(v2, zero.size()), e.download(v1, zero.size()))) << what << " v cache";
  }
  // Where one launch does not apply.
  const uint32_t K = 512;
  const GpuWeight& Wv = Wv512;
  const auto qk_blocks = random_blocks(DType::Q4_K, K, Q + KV, 17);
  const GpuWeight Wqk = upload_weight(*e.ctx, pack_weight(DType::Q4_K, qk_blocks.data(), K, Q + KV), "qk");
  KernelOptions ko = kos[0];
  EXPECT_FALSE(matmul_qkv_formats_applies(e.op(ko), Wqk, Wv_packed, 1)) << "packed Q6_K";
  EXPECT_FALSE(matmul_qkv_formats_applies(e.op(ko), Wv, Wqk, 1)) << "parts swapped";
  EXPECT_FALSE(matmul_qkv_formats_applies(e.op(ko), Wqk, Wv, kFusedMaxTokens + 1)) << "prefill";
  ko.matvec_prefetch = true;
  EXPECT_FALSE(matmul_qkv_formats_applies(e.op(ko), Wqk, Wv, 1)) << "prefetch";
  ko = kos[0], ko.matvec_int8 = 0;
  EXPECT_FALSE(matmul_qkv_formats_applies(e.op(ko), Wqk, Wv, 1)) << "f32 activations";
  ko = kos[0], ko.fuse_qkv_formats = false;
  auto off = e.op(ko);
  EXPECT_FALSE(matmul_qkv_formats_applies(off, Wqk, Wv, 1)) << "switch off";
  auto xb = e.upload(std::vector<float>(K)), yb = e.upload(std::vector<float>(N));
  auto kc = e.upload(std::vector<float>(size_t(ctx_len) * KV));
  const QkvRopeKv rk{Q, KV, HD, rot, pos0, false, &tb, kc, kc};
  e.rec.begin();
  EXPECT_THROW(matmul_qkv_rope_kv(off, Wqk, Wv, {xb, 0}, K, nullptr, 0.0f, {yb, 0}, N, 1, rk), Error);
  e.rec.submit();
}

TEST(FusedOps, FusedMatmulsRejectPrefillSizes) {
  auto& e = env();
  auto blocks = random_blocks(DType::Q8_0, 32, 4, 1);
  auto W = upload_weight(*e.ctx, pack_weight(DType::Q8_0, blocks.data(), 32, 4), "w");
  auto xb = e.upload(std::vector<float>(64 * 32)), yb = e.upload(std::vector<float>(64 * 4));
  auto o = e.op();
  e.rec.begin();
  EXPECT_THROW(matmul_norm(o, W, {xb, 0}, 32, xb, 1e-5f, {yb, 0}, 4, kFusedMaxTokens + 1, false), Error);
  EXPECT_THROW(matmul_silu(o, W, xb, 0, 16, 64, {yb, 0}, 4, kFusedMaxTokens + 1, false), Error);
  const QkvRopeKv rk{2, 1, 2, 2, 0, false, &xb, yb, yb};  // 2 + 2 * 1 rows = W's 4: accepted shape
  EXPECT_THROW(matmul_qkv_rope_kv(o, W, {xb, 0}, 32, nullptr, 0.0f, {yb, 0}, 4, kFusedMaxTokens + 1, rk), Error);
  const QkvRopeKv odd{2, 1, 1, 0, 0, false, &xb, yb, yb};  // odd head_dim
  EXPECT_THROW(matmul_qkv_rope_kv(o, W, {xb, 0}, 32, nullptr, 0.0f, {yb, 0}, 4, 1, odd), Error);
  QkvRopeKv past = rk;  // W's 4 rows from row 2 run past [q | k | v]'s 4
  past.row0 = 2;
  EXPECT_THROW(matmul_qkv_rope_kv(o, W, {xb, 0}, 32, nullptr, 0.0f, {yb, 0}, 4, 1, past), Error);
  e.rec.submit();
}

// --fused-decode: attention_decode_qk_norm (one launch) against qk_norm_rope_kv_store + attention
// (two, plus the merge when split) on the same raw [q | (gate) | k | v] row and caches: the outputs
// and the new key row within a tolerance (the sums of squares are reduced in another order), the
// value row and every other cache row bit-identical. Group sizes 1 / 2 / 4, head dims 64 and 256
// (LFM2, Qwen3.5), partial rotary dims, both pairings, key 0, a short history, a sliding window and
// key splits of 32 (the new key in the last split; earlier splits must not see it written late).
// Checked to fail: storing the new rows from split 0 instead of the split holding pos0 (output),
// skipping the RoPE of the key (k cache) or normalizing q with kw (output).
TEST(FusedOps, FusedDecodeAttentionMatchesUnfused) {
  auto& e = env();
  struct Case { uint32_t Hq, Hkv, HD, rot, pos0, window; bool neox, split; };
  const Case cases[] = {{4, 1, 64, 64, 0, 0, false, false},   {8, 2, 64, 64, 9, 0, true, false},
                        {4, 2, 64, 16, 40, 0, false, true},   {2, 2, 256, 64, 70, 0, true, true},
                        {4, 1, 256, 256, 33, 0, true, false}, {4, 2, 64, 64, 100, 50, false, true},
                        {4, 1, 64, 64, 12, 5, true, false}};
  for (const Case& c : cases) {
    const uint32_t G = c.Hq / c.Hkv, HD = c.HD, Q = c.Hq * HD, KV = c.Hkv * HD, gate = c.neox ? Q : 0;
    const uint32_t S = Q + gate + 2 * KV, k_off = Q + gate, v_off = k_off + KV, ctx_len = 128;
    const float eps = 1e-6f, scale = 1.0f / std::sqrt(float(HD));
    const std::string what = "Hq=" + std::to_string(c.Hq) + " Hkv=" + std::to_string(c.Hkv) + " HD=" + std::to_string(HD) +
                             " rot=" + std::to_string(c.rot) + " pos0=" + std::to_string(c.pos0) + " window=" +
                             std::to_string(c.window) + " neox=" + std::to_string(c.neox) + " split=" + std::to_string(c.split);
    auto table = rope_table(ctx_len, c.rot, 10000.0);
    auto src = randn(S, HD + c.rot + c.pos0 + G, 2.0f);
    auto qw = randn(HD, 5 + HD), kw = randn(HD, 6 + HD);
    auto hist = randn(size_t(ctx_len) * KV, 7 + c.pos0, 1.0f), vhist = randn(size_t(ctx_len) * KV, 8 + c.pos0, 1.0f);
    auto tb = e.upload(table), s1 = e.upload(src), s2 = e.upload(src), qb = e.upload(qw), kb = e.upload(kw);
    auto k1 = e.upload(hist), v1 = e.upload(vhist), k2 = e.upload(hist), v2 = e.upload(vhist);
    auto o1 = e.upload(std::vector<float>(Q)), o2 = e.upload(std::vector<float>(Q));
    gpu::Buffer sc1(*e.ctx, attention_split_floats(1, c.Hq, HD) * 4, gpu::BufferKind::Storage, "split1");
    gpu::Buffer sc2(*e.ctx, attention_split_floats(1, c.Hq, HD) * 4, gpu::BufferKind::Storage, "split2");
    KernelOptions ko;
    ko.attention_decode_split = c.split;
    if (c.split) ko.attention_decode_split_min = 0, ko.attention_decode_split_len = 32;
    ko.fused_decode = true;
    auto o = e.op(ko);
    AttentionShape as{1, c.pos0, c.Hq, c.Hkv, HD, scale};
    as.window = c.window;
    ASSERT_TRUE(attention_decode_applies(o, as)) << what;
    ASSERT_EQ(attention_decode_split(o, as, &sc1).n_split > 1, c.split) << what;
    e.rec.begin();
    qk_norm_rope_kv_store(o, s1, 0, S, k_off, v_off, S, 1, c.Hq, c.Hkv, HD, c.rot, c.pos0, tb, c.neox, qb, kb, eps, k1, v1);
    attention(o, as, {s1, 0}, S, k1, v1, {o1, 0}, Q, &sc1);
    attention_decode_qk_norm(o, as, {&s2, 0, k_off, v_off, &qb, &kb, &tb, c.rot, c.neox, eps}, k2, v2, {o2, 0}, Q, &sc2);
    e.rec.submit();
    expect_close(e.download(o2, Q), e.download(o1, Q), 1e-5f, what + " output");
    const auto ka = e.download(k1, hist.size()), kf = e.download(k2, hist.size());
    const auto va = e.download(v1, hist.size()), vf = e.download(v2, hist.size());
    const size_t row = size_t(c.pos0) * KV;
    expect_close(std::vector<float>(kf.begin() + row, kf.begin() + row + KV),
                 std::vector<float>(ka.begin() + row, ka.begin() + row + KV), 1e-6f, what + " new key row");
    EXPECT_EQ(std::memcmp(vf.data() + row, src.data() + v_off, KV * 4), 0) << what << " new value row";
    const size_t after = row + KV, rest = hist.size() - after;
    EXPECT_EQ(std::memcmp(kf.data(), ka.data(), row * 4), 0) << what << " key rows before pos0";
    EXPECT_EQ(std::memcmp(vf.data(), va.data(), row * 4), 0) << what << " value rows before pos0";
    EXPECT_EQ(std::memcmp(kf.data() + after, hist.data() + after, rest * 4), 0) << what << " key rows after pos0";
    EXPECT_EQ(std::memcmp(vf.data() + after, vhist.data() + after, rest * 4), 0) << what << " value rows after pos0";
    EXPECT_TRUE(same_bits(e.download(s2, S), src)) << what << " src left as it was";
  }
}

// --fuse-conv-in: matmul_conv_in (the ShortConv in-projection with the conv and state shift in its
// epilogue) == matmul (or matmul_norm) into [B | C | x] + causal_conv with both gates, fused state
// update, BIT-IDENTICAL: the conv output and the state after the step. Weight types Q8_0 / Q4_K /
// F32, with and without the norm prologue and int8 activations, kernel lengths 2 / 3 / 4, matvec
// shapes: default rows, 3 rows x 1 (the smallest triple), 4 rows per thread (12 per workgroup), the
// workgroup-memory tree. C = 40 channels: the last workgroup's triples run past the rows.
// Checked to fail: the conv's terms summed newest first (output bits, L >= 3), the shifted state
// rows scaled by 1.0001 (state bits).
TEST(FusedOps, MatmulConvInBitIdenticalToMatmulCausalConv) {
  auto& e = env();
  const uint32_t K = 256, C = 40, N = 3 * C;
  for (DType t : {DType::Q8_0, DType::Q4_K, DType::F32}) {
    auto blocks = random_blocks(t, K, N, K + N + 7);
    auto W = upload_weight(*e.ctx, pack_weight(t, blocks.data(), K, N), "w");
    for (uint32_t L : {2u, 3u, 4u})
      for (int shape = 0; shape < 4; ++shape)
        for (bool norm : {false, true}) {
          if (t != DType::Q8_0 && (shape != 0 || L != 3)) continue;  // (pipeline compiles: kept short)
          KernelOptions ko;
          ko.matvec_subgroup = 1;
          ko.fuse_conv_in = true;  // (default off)
          ko.matvec_int8 = shape == 0 && norm ? 1 : 0;
          if (shape == 1) ko.matvec_rows_per_workgroup = 3, ko.matvec_rows_per_thread = 1;
          if (shape == 2) ko.matvec_rows_per_workgroup = 8, ko.matvec_rows_per_thread = 4;
          if (shape == 3) ko.matvec_subgroup_ops = false, ko.matvec_rows_per_workgroup = 6;
          auto o = e.op(ko);
          ASSERT_TRUE(matmul_conv_in_applies(o, W, 1));
          const std::string what = dtype_name(t) + " L=" + std::to_string(L) + " shape=" + std::to_string(shape) +
                                   " norm=" + std::to_string(norm);
          auto x = randn(K, L + shape + 11, 1.5f), nw = randn(K, 3), cw = randn(size_t(C) * L, L + 5);
          auto st0 = randn(size_t(L - 1) * C, L + 9);
          auto xb = e.upload(x), nwb = e.upload(nw), cwb = e.upload(cw), proj = e.upload(std::vector<float>(N));
          auto s1 = e.upload(st0), s2 = e.upload(st0), y1 = e.upload(std::vector<float>(C)), y2 = e.upload(std::vector<float>(C));
          e.rec.begin();
          if (norm) matmul_norm(o, W, {xb, 0}, K, nwb, 1e-5f, {proj, 0}, N, 1, false);
          else matmul(o, W, {xb, 0}, K, {proj, 0}, N, 1, false);
          causal_conv(o, {1, C, L, false}, {proj, 2 * C}, N, F32Rows{&proj, 0, N}, F32Rows{&proj, C, N}, cwb, nullptr,
                      {s1, 0}, {y1, 0}, C);
          matmul_conv_in(o, W, {xb, 0}, norm ? &nwb : nullptr, 1e-5f, {y2, 0}, {C, L, &cwb, gpu::Binding(s2), 0});
          e.rec.submit();
          const auto a = e.download(y1, C), b = e.download(y2, C);
          EXPECT_TRUE(same_bits(b, a)) << what << " output";
          EXPECT_TRUE(same_bits(e.download(s2, st0.size()), e.download(s1, st0.size()))) << what << " state";
          float mx = 0;
          for (float v : a) mx = std::max(mx, std::fabs(v));
          EXPECT_GT(mx, 0.0f) << what;  // not a comparison of zeros
        }
  }
}
