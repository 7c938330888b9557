#include "kernels/ref.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <thread>

namespace wgllm::kernels::ref {

void matmul(const Matrix& W, const float* x, uint32_t x_stride, float* y, uint32_t y_stride,
            uint32_t T, bool accumulate) {
  const uint32_t n_threads = std::max(1u, std::min(std::thread::hardware_concurrency(), 8u));
  auto work = [&](uint32_t n0, uint32_t n1) {
    for (uint32_t n = n0; n < n1; ++n) {
      const float* wr = W.w.data() + size_t(n) * W.K;
      for (uint32_t t = 0; t < T; ++t) {
        const float* xt = x + size_t(t) * x_stride;
        float s = 0.0f;
        for (uint32_t k = 0; k < W.K; ++k) s += wr[k] * xt[k];
        float& out = y[size_t(t) * y_stride + n];
        out = accumulate ? out + s : s;
      }
    }
  };
  if (uint64_t(W.N) * W.K * T < (1u << 16) || n_threads == 1) return work(0, W.N);
  std::vector<std::thread> th;
  const uint32_t chunk = (W.N + n_threads - 1) / n_threads;
  for (uint32_t i = 0; i < n_threads; ++i) {
    uint32_t a = i * chunk, b = std::min(W.N, a + chunk);
    if (a < b) th.emplace_back(work, a, b);
  }
  for (auto& t : th) t.join();
}

void rmsnorm(const float* x, const float* w, float* y, uint32_t D, float eps) {
  float s = 0.0f;
  for (uint32_t i = 0; i < D; ++i) s += x[i] * x[i];
  const float scale = 1.0f / std::sqrt(s / float(D) + eps);
  for (uint32_t i = 0; i < D; ++i) y[i] = (x[i] * scale) * w[i];
}

void rope(float* x, uint32_t H, uint32_t HD, uint32_t rot, uint32_t pos, const float* table, bool neox) {
  const uint32_t half = rot / 2;
  for (uint32_t h = 0; h < H; ++h) {
    float* b = x + size_t(h) * HD;
    for (uint32_t i = 0; i < half; ++i) {
      const float c = table[(size_t(pos) * half + i) * 2], s = table[(size_t(pos) * half + i) * 2 + 1];
      float& x0 = neox ? b[i] : b[2 * i];
      float& x1 = neox ? b[i + half] : b[2 * i + 1];
      const float a0 = x0, a1 = x1;
      x0 = a0 * c - a1 * s;
      x1 = a0 * s + a1 * c;
    }
  }
}

void attention(const float* q, const float* kc, const float* vc, float* out, uint32_t pos,
               uint32_t Hq, uint32_t Hkv, uint32_t HD, float scale) {
  const uint32_t kv_dim = Hkv * HD, group = Hq / Hkv;
  std::vector<float> sc(pos + 1);
  for (uint32_t h = 0; h < Hq; ++h) {
    const float* qh = q + size_t(h) * HD;
    const uint32_t hk = h / group;
    float mx = -INFINITY;
    for (uint32_t j = 0; j <= pos; ++j) {
      const float* k = kc + size_t(j) * kv_dim + hk * HD;
      float d = 0.0f;
      for (uint32_t i = 0; i < HD; ++i) d += qh[i] * k[i];
      sc[j] = d * scale;
      mx = std::max(mx, sc[j]);
    }
    float sum = 0.0f;
    for (uint32_t j = 0; j <= pos; ++j) sum += (sc[j] = std::exp(sc[j] - mx));
    float* o = out + size_t(h) * HD;
    std::fill(o, o + HD, 0.0f);
    for (uint32_t j = 0; j <= pos; ++j) {
      const float* v = vc + size_t(j) * kv_dim + hk * HD;
      for (uint32_t i = 0; i < HD; ++i) o[i] += sc[j] * v[i];
    }
    for (uint32_t i = 0; i < HD; ++i) o[i] /= sum;
  }
}

float gelu_tanh(float a) {
  const float k = 0.7978845608028654f;  // sqrt(2 / pi)
  return 0.5f * a * (1.0f + std::tanh(k * (a + 0.044715f * a * a * a)));
}

void silu_mul(const float* g, const float* u, float* y, uint32_t F) {
  for (uint32_t i = 0; i < F; ++i) y[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

uint32_t argmax(const float* x, uint32_t n) {
  // argmax.wgsl's scan: no candidate until a value above -inf (the GPU starts at -FLT_MAX and also
  // takes a value equal to it while it has none), then a strictly larger one; NaN compares false.
  uint32_t best = 0;
  float bv = -std::numeric_limits<float>::infinity();
  for (uint32_t i = 0; i < n; ++i)
    if (x[i] > bv) bv = x[i], best = i;
  return best;
}

void causal_conv(const float* x, uint32_t x_stride, const float* gate_in, uint32_t gi_stride,
                 const float* gate_out, uint32_t go_stride, const float* w, const float* bias, float* state,
                 float* y, uint32_t y_stride, uint32_t T, uint32_t C, uint32_t L, bool silu) {
  const uint32_t H = L - 1;
  auto u = [&](uint32_t t, uint32_t c) { return x[size_t(t) * x_stride + c] * (gate_in ? gate_in[size_t(t) * gi_stride + c] : 1.0f); };
  auto ext = [&](uint32_t e, uint32_t c) { return e < H ? state[size_t(e) * C + c] : u(e - H, c); };
  for (uint32_t t = 0; t < T; ++t)
    for (uint32_t c = 0; c < C; ++c) {
      float a = 0.0f;
      for (uint32_t j = 0; j < L; ++j) a += w[size_t(c) * L + j] * ext(t + j, c);
      if (bias) a += bias[c];
      if (silu) a = a / (1.0f + std::exp(-a));
      if (gate_out) a *= gate_out[size_t(t) * go_stride + c];
      y[size_t(t) * y_stride + c] = a;
    }
  for (uint32_t i = 0; i < H; ++i)  // ascending: row T+i is read before it can be overwritten
    for (uint32_t c = 0; c < C; ++c) state[size_t(i) * C + c] = ext(T + i, c);
}

}  // namespace wgllm::kernels::ref
