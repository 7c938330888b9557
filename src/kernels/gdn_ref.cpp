#include "kernels/gdn_ref.h"

#include <cmath>
#include <vector>

namespace wgllm::kernels::ref {

void l2norm_heads(float* x, uint32_t H, uint32_t D, uint32_t hs, float eps) {
  for (uint32_t h = 0; h < H; ++h) {
    float* r = x + size_t(h) * hs;
    float s = 0.0f;
    for (uint32_t i = 0; i < D; ++i) s += r[i] * r[i];
    const float inv = 1.0f / std::sqrt(s + eps);
    for (uint32_t i = 0; i < D; ++i) r[i] *= inv;
  }
}

void rmsnorm_heads(float* x, const float* w, uint32_t H, uint32_t D, uint32_t hs, float eps) {
  for (uint32_t h = 0; h < H; ++h) {
    float* r = x + size_t(h) * hs;
    float s = 0.0f;
    for (uint32_t i = 0; i < D; ++i) s += r[i] * r[i];
    const float scale = 1.0f / std::sqrt(s / float(D) + eps);
    for (uint32_t i = 0; i < D; ++i) r[i] = (r[i] * scale) * w[i];
  }
}

void gated_rmsnorm(float* x, const float* z, const float* w, uint32_t H, uint32_t D, float eps) {
  for (uint32_t h = 0; h < H; ++h) {
    float* r = x + size_t(h) * D;
    const float* zr = z + size_t(h) * D;
    float s = 0.0f;
    for (uint32_t i = 0; i < D; ++i) s += r[i] * r[i];
    const float scale = 1.0f / std::sqrt(s / float(D) + eps);
    for (uint32_t i = 0; i < D; ++i) r[i] = (r[i] * scale) * w[i] * (zr[i] / (1.0f + std::exp(-zr[i])));
  }
}

void sigmoid_gate(float* x, const float* g, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) x[i] *= 1.0f / (1.0f + std::exp(-g[i]));
}

void gdn_gates(const float* a, const float* b, const float* a_log, const float* dt_bias, float* g, float* beta,
               uint32_t nv) {
  for (uint32_t h = 0; h < nv; ++h) {
    const float x = a[h] + dt_bias[h];
    const float sp = x > 20.0f ? x : std::log1p(std::exp(x));
    g[h] = -std::exp(a_log[h]) * sp;
    beta[h] = 1.0f / (1.0f + std::exp(-b[h]));
  }
}

void gated_delta_rule(const GdnArgs& a) {
  std::vector<float> kv(a.dv);
  for (uint32_t t = 0; t < a.T; ++t) {
    for (uint32_t h = 0; h < a.nv; ++h) {
      const float* q = a.q + size_t(t) * a.qk_stride + size_t(a.key_head(h)) * a.dk;
      const float* k = a.k + size_t(t) * a.qk_stride + size_t(a.key_head(h)) * a.dk;
      const float* v = a.v + size_t(t) * a.v_stride + size_t(h) * a.dv;
      const float decay = std::exp(a.g[size_t(t) * a.gb_stride + h]), beta = a.beta[size_t(t) * a.gb_stride + h];
      float* S = a.state + size_t(h) * a.dk * a.dv;
      float* o = a.out + size_t(t) * a.o_stride + size_t(h) * a.dv;
      for (uint32_t j = 0; j < a.dv; ++j) {
        float m = 0.0f;
        for (uint32_t i = 0; i < a.dk; ++i) {
          float& s = S[size_t(i) * a.dv + j];
          s *= decay;
          m += s * k[i];
        }
        const float u = (v[j] - m) * beta;
        float acc = 0.0f;
        for (uint32_t i = 0; i < a.dk; ++i) {
          float& s = S[size_t(i) * a.dv + j];
          s += k[i] * u;
          acc += s * (q[i] * a.scale);
        }
        o[j] = acc;
      }
    }
  }
}

void gated_delta_rule_chunked(const GdnArgs& a, uint32_t C) {
  const uint32_t dk = a.dk, dv = a.dv;
  std::vector<float> G(C), A(size_t(C) * C), P(size_t(C) * C), W(size_t(C) * dk), U(size_t(C) * dv);
  for (uint32_t h = 0; h < a.nv; ++h) {
    float* S = a.state + size_t(h) * dk * dv;
    for (uint32_t t0 = 0; t0 < a.T; t0 += C) {
      const uint32_t n = std::min(C, a.T - t0);
      auto q = [&](uint32_t t) { return a.q + size_t(t0 + t) * a.qk_stride + size_t(a.key_head(h)) * dk; };
      auto k = [&](uint32_t t) { return a.k + size_t(t0 + t) * a.qk_stride + size_t(a.key_head(h)) * dk; };
      auto v = [&](uint32_t t) { return a.v + size_t(t0 + t) * a.v_stride + size_t(h) * dv; };
      auto beta = [&](uint32_t t) { return a.beta[size_t(t0 + t) * a.gb_stride + h]; };
      // Phase 1 (state-independent; GPU kernel gdn_chunk_prep).
      float cum = 0.0f;
      for (uint32_t t = 0; t < n; ++t) G[t] = cum += a.g[size_t(t0 + t) * a.gb_stride + h];
      for (uint32_t t = 0; t < n; ++t)
        for (uint32_t s = 0; s <= t; ++s) {
          float kk = 0.0f, qk = 0.0f;
          for (uint32_t i = 0; i < dk; ++i) {
            kk += k(t)[i] * k(s)[i];
            qk += (q(t)[i] * a.scale) * k(s)[i];
          }
          const float e = std::exp(G[t] - G[s]);
          A[size_t(t) * C + s] = s < t ? beta(t) * e * kk : 0.0f;
          P[size_t(t) * C + s] = e * qk;
        }
      for (uint32_t col = 0; col < dk + dv; ++col)
        for (uint32_t t = 0; t < n; ++t) {
          float x = col < dk ? beta(t) * std::exp(G[t]) * k(t)[col] : beta(t) * v(t)[col - dk];
          const float* X = col < dk ? &W[col] : &U[col - dk];
          const size_t xs = col < dk ? dk : dv;
          for (uint32_t s = 0; s < t; ++s) x -= A[size_t(t) * C + s] * X[s * xs];
          (col < dk ? W[size_t(t) * dk + col] : U[size_t(t) * dv + col - dk]) = x;
        }
      // Phase 2 (sequential over chunks; GPU kernel gdn_chunk_scan), per state column j.
      for (uint32_t j = 0; j < dv; ++j) {
        for (uint32_t t = 0; t < n; ++t) {
          float ws = 0.0f;
          for (uint32_t i = 0; i < dk; ++i) ws += W[size_t(t) * dk + i] * S[size_t(i) * dv + j];
          U[size_t(t) * dv + j] -= ws;
        }
        for (uint32_t t = 0; t < n; ++t) {
          float qs = 0.0f;
          for (uint32_t i = 0; i < dk; ++i) qs += (q(t)[i] * a.scale) * S[size_t(i) * dv + j];
          float o = std::exp(G[t]) * qs;
          for (uint32_t s = 0; s <= t; ++s) o += P[size_t(t) * C + s] * U[size_t(s) * dv + j];
          a.out[size_t(t0 + t) * a.o_stride + size_t(h) * dv + j] = o;
        }
        const float gl = G[n - 1], el = std::exp(gl);
        for (uint32_t i = 0; i < dk; ++i) {
          float s_new = el * S[size_t(i) * dv + j];
          for (uint32_t s = 0; s < n; ++s) s_new += std::exp(gl - G[s]) * k(s)[i] * U[size_t(s) * dv + j];
          S[size_t(i) * dv + j] = s_new;
        }
      }
    }
  }
}

}  // namespace wgllm::kernels::ref
