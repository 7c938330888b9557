#include "kernels/sparse_ref.h"

#include <algorithm>
#include <cmath>

namespace wgllm::kernels::ref {

namespace {
constexpr uint32_t kNone = 0xFFFFFFFFu;
constexpr float kMark = -3.402823466e38f;
}  // namespace

void sparse_block_means(const float* kc, uint32_t n_blocks, uint32_t B, uint32_t kv_dim, float* means) {
  for (uint32_t b = 0; b < n_blocks; ++b)
    for (uint32_t c = 0; c < kv_dim; ++c) {
      float s = 0.0f;
      for (uint32_t r = 0; r < B; ++r) s += kc[(size_t(b) * B + r) * kv_dim + c];
      means[size_t(b) * kv_dim + c] = s / float(B);
    }
}

std::vector<float> sparse_scores(const SparseForward& f, const float* q, uint32_t q_stride, const float* means,
                                 uint32_t qb, uint32_t hk, uint32_t n_cand) {
  const uint32_t G = f.Hq / f.Hkv, kv_dim = f.Hkv * f.HD;
  const uint32_t t_lo = std::max(qb * f.B, f.pos0) - f.pos0, t_hi = std::min((qb + 1) * f.B, f.pos0 + f.T) - f.pos0;
  std::vector<float> qs(f.HD);
  for (uint32_t d = 0; d < f.HD; ++d) {
    float s = 0.0f;
    for (uint32_t t = t_lo; t < t_hi; ++t)
      for (uint32_t g = 0; g < G; ++g) s += q[size_t(t) * q_stride + size_t(hk * G + g) * f.HD + d];
    qs[d] = s;
  }
  std::vector<float> sc(n_cand, 0.0f);
  for (uint32_t c = 0; c < n_cand; ++c) {
    const float* m = means + size_t(c) * kv_dim + hk * f.HD;
    float s = 0.0f;
    for (uint32_t d = 0; d < f.HD; ++d) s += qs[d] * m[d];
    sc[c] = s;
  }
  return sc;
}

void sparse_select(const SparseForward& f, const float* q, uint32_t q_stride, const float* means, uint32_t* index) {
  const uint32_t S = f.slots();
  for (uint32_t i = 0; i < f.query_blocks(); ++i) {
    const uint32_t qb = f.qb0() + i;
    const uint32_t lo = qb + 1 >= f.window ? qb + 1 - f.window : 0;
    for (uint32_t hk = 0; hk < f.Hkv; ++hk) {
      std::vector<float> sc = sparse_scores(f, q, q_stride, means, qb, hk, lo);
      std::vector<uint32_t> picked;
      const uint32_t kk = std::min(f.top_k, lo > 1 ? lo - 1 : 0);
      for (uint32_t k = 0; k < kk; ++k) {
        uint32_t bid = kNone;
        for (uint32_t c = 1; c < lo; ++c)  // strictly greater: ties keep the lower id
          if (sc[c] > kMark && (bid == kNone || sc[c] > sc[bid])) bid = c;
        if (bid == kNone) continue;
        picked.push_back(bid);
        sc[bid] = kMark;
      }
      std::sort(picked.begin(), picked.end());
      uint32_t* row = index + (size_t(i) * f.Hkv + hk) * S;
      uint32_t n = 0;
      if (lo > 0) row[n++] = 0;
      for (uint32_t b : picked) row[n++] = b;
      for (uint32_t b = lo; b <= qb; ++b) row[n++] = b;
      while (n < S) row[n++] = kNone;
    }
  }
}

void attention_sparse(const float* q, const float* kc, const float* vc, float* out, uint32_t pos, uint32_t Hq,
                      uint32_t Hkv, uint32_t HD, float scale, const uint32_t* sel, uint32_t S, uint32_t B,
                      bool masked_dense) {
  const uint32_t kv_dim = Hkv * HD, group = Hq / Hkv;
  std::vector<uint32_t> keys;
  for (uint32_t h = 0; h < Hq; ++h) {
    const uint32_t hk = h / group;
    const uint32_t* row = sel + size_t(hk) * S;
    keys.clear();
    if (masked_dense) {
      for (uint32_t j = 0; j <= pos; ++j)
        if (std::find(row, row + S, j / B) != row + S) keys.push_back(j);
    } else {
      for (uint32_t s = 0; s < S && row[s] != kNone; ++s)
        for (uint32_t j = row[s] * B; j < row[s] * B + B && j <= pos; ++j) keys.push_back(j);
    }
    const float* qh = q + size_t(h) * HD;
    std::vector<float> sc(keys.size());
    float mx = -INFINITY;
    for (size_t i = 0; i < keys.size(); ++i) {
      const float* k = kc + size_t(keys[i]) * kv_dim + hk * HD;
      float d = 0.0f;
      for (uint32_t e = 0; e < HD; ++e) d += qh[e] * k[e];
      sc[i] = d * scale;
      mx = std::max(mx, sc[i]);
    }
    float sum = 0.0f;
    for (float& v : sc) sum += (v = std::exp(v - mx));
    float* o = out + size_t(h) * HD;
    std::fill(o, o + HD, 0.0f);
    for (size_t i = 0; i < keys.size(); ++i) {
      const float* v = vc + size_t(keys[i]) * kv_dim + hk * HD;
      for (uint32_t e = 0; e < HD; ++e) o[e] += sc[i] * v[e];
    }
    for (uint32_t e = 0; e < HD; ++e) o[e] /= sum;
  }
}

}  // namespace wgllm::kernels::ref
