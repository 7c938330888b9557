#include "models/cpu_common.h"

#include "kernels/gdn_ref.h"
#include "kernels/sparse_attention.h"
#include "kernels/sparse_ref.h"
#include "models/state.h"

#include <cmath>

namespace wgllm {

namespace ref = kernels::ref;

int32_t CpuModel::forward_argmax(Sequence& seq, std::span<const int32_t> toks) {
  std::vector<float> lg;
  forward(seq, toks, &lg);
  return int32_t(ref::argmax(lg.data(), uint32_t(lg.size())));
}

void cpu_rmsnorm_rows(const ModelConfig& c, const float* x, const std::vector<float>& norm, float* h, uint32_t T) {
  const uint32_t D = c.d_model;
  for (uint32_t t = 0; t < T; ++t) ref::rmsnorm(x + size_t(t) * D, norm.data(), h + size_t(t) * D, D, c.rms_eps);
}

void cpu_swiglu_ffn(const ModelConfig& c, const std::vector<float>& norm, const ref::Matrix& gate,
                    const ref::Matrix& up, const ref::Matrix& down, float* x, float* h, uint32_t T) {
  const uint32_t D = c.d_model, F = c.ffn_dim;
  std::vector<float> g(size_t(T) * F), u(size_t(T) * F), a(size_t(T) * F);
  cpu_rmsnorm_rows(c, x, norm, h, T);
  ref::matmul(gate, h, D, g.data(), F, T, false);
  ref::matmul(up, h, D, u.data(), F, T, false);
  for (uint32_t t = 0; t < T; ++t) ref::silu_mul(&g[size_t(t) * F], &u[size_t(t) * F], &a[size_t(t) * F], F);
  ref::matmul(down, a.data(), F, x, D, T, true);
}

void cpu_attention(const ModelConfig& c, const kernels::KernelOptions& ko, const float* q, uint32_t q_stride,
                   const float* kc, const float* vc, float* out, uint32_t o_stride, uint32_t n_past, uint32_t T,
                   float scale, uint32_t chunk, uint32_t window) {
  const uint32_t Hq = c.n_heads, Hkv = c.n_kv_heads, HD = c.head_dim;
  if (window) {
    const size_t KV = size_t(Hkv) * HD;
    for (uint32_t t = 0; t < T; ++t) {  // keys [pos - W + 1, pos] (pos_q - pos_k < W)
      const uint32_t pos = n_past + t, first = pos >= window ? pos - window + 1 : 0;
      ref::attention(q + size_t(t) * q_stride, kc + first * KV, vc + first * KV, out + size_t(t) * o_stride, pos - first,
                     Hq, Hkv, HD, scale);
    }
    return;
  }
  for (uint32_t s0 = 0; s0 < T; s0 += std::max<uint32_t>(chunk, 1)) {
    const uint32_t n = std::min(std::max<uint32_t>(chunk, 1), T - s0), pos0 = n_past + s0;
    const float* qs = q + size_t(s0) * q_stride;
    float* os = out + size_t(s0) * o_stride;
    if (!kernels::sparse_attention_used(ko, {n, pos0, Hq, Hkv, HD, scale})) {
      for (uint32_t t = 0; t < n; ++t)
        ref::attention(qs + size_t(t) * q_stride, kc, vc, os + size_t(t) * o_stride, pos0 + t, Hq, Hkv, HD, scale);
      continue;
    }
    const kernels::SparseConfig sc = kernels::sparse_config(ko);
    const ref::SparseForward f{n, pos0, Hq, Hkv, HD, sc.block, sc.top_k, sc.window};
    const uint32_t n_blocks = (pos0 + n) / sc.block, kv_dim = Hkv * HD;
    std::vector<float> means(size_t(n_blocks) * kv_dim);
    ref::sparse_block_means(kc, n_blocks, sc.block, kv_dim, means.data());
    std::vector<uint32_t> index(size_t(f.query_blocks()) * Hkv * f.slots());
    ref::sparse_select(f, qs, q_stride, means.data(), index.data());
    for (uint32_t t = 0; t < n; ++t) {
      const uint32_t pos = pos0 + t;
      ref::attention_sparse(qs + size_t(t) * q_stride, kc, vc, os + size_t(t) * o_stride, pos, Hq, Hkv, HD, scale,
                            index.data() + size_t(pos / sc.block - f.qb0()) * Hkv * f.slots(), f.slots(), sc.block);
    }
  }
}

void cpu_logits(const ModelConfig& c, const float* x_last, const std::vector<float>& out_norm,
                const ref::Matrix& lm_head, std::vector<float>* logits) {
  std::vector<float> last(c.d_model);
  ref::rmsnorm(x_last, out_norm.data(), last.data(), c.d_model, c.rms_eps);
  logits->assign(c.vocab, 0.0f);
  ref::matmul(lm_head, last.data(), c.d_model, logits->data(), c.vocab, 1, false);
}

void CpuModel::forward(Sequence& seq, std::span<const int32_t> toks, std::vector<float>* logits) {
  check_forward(seq, toks, c_.vocab);
  const uint32_t T = uint32_t(toks.size()), D = c_.d_model;
  std::vector<float> x(size_t(T) * D), h(size_t(T) * D);
  for (uint32_t t = 0; t < T; ++t) std::copy_n(embed_.w.data() + size_t(toks[t]) * D, D, x.data() + size_t(t) * D);
  Pass p{seq, T, seq.n_past(), x.data(), h.data()};
  body(p);
  seq.advance(T);
  if (!logits) return;
  cpu_logits(c_, &x[size_t(T - 1) * D], out_norm_, c_.tied_embeddings ? embed_ : lm_head_, logits);
  if (final_softcap_ > 0)
    for (float& z : *logits) z = final_softcap_ * std::tanh(z / final_softcap_);
}


CpuModel::Matrix CpuModel::matrix(const TensorRef& t, const std::string&) {
  Matrix m = cpu_matrix(t);
  mem_.weights += uint64_t(m.w.size()) * 4;
  return m;
}

CpuModel::Vector CpuModel::vector(const TensorRef& t, const std::string&) {
  Vector v = dequantize_tensor(t);
  mem_.weights += uint64_t(v.size()) * 4;
  return v;
}

void CpuModel::embedding(const TensorRef& embed, const TensorRef* lm_head) {
  embed_ = matrix(embed, "token_embd");
  if (lm_head) lm_head_ = matrix(*lm_head, "output");
}

CpuModel::Ffn CpuModel::ffn_weights(const TensorRef& gate, const TensorRef& up, const TensorRef& down,
                                    const std::string& prefix, const FfnOptions& o) {
  Ffn f{matrix(gate, prefix + "ffn_gate"), matrix(up, prefix + "ffn_up"), matrix(down, prefix + "ffn_down"), {},
        o.gelu_tanh};
  if (o.post_norm) f.post_norm = vector(*o.post_norm, prefix + "post_ffw_norm");
  return f;
}

CpuModel::Vector CpuModel::vector(const std::vector<float>& v, const std::string&) {
  mem_.weights += uint64_t(v.size()) * 4;
  return v;
}

CpuModel::Attention CpuModel::attention_weights(const AttentionTensors& t, const std::string& prefix) {
  if (!t.q_norm != !t.k_norm) throw Error("attention_weights: a QK-norm needs both the q and the k weight");
  if (!t.bq != !t.bk || !t.bq != !t.bv) throw Error("attention_weights: Q/K/V biases come as all three or none");
  Attention a;
  a.wq = matrix(*t.wq, prefix + "attn_q");
  a.wk = matrix(*t.wk, prefix + "attn_k");
  a.wv = matrix(*t.wv, prefix + "attn_v");
  a.wo = matrix(*t.wo, prefix + "attn_output");
  if (t.bq) {
    a.bq = vector(*t.bq, prefix + "attn_q.bias");
    a.bk = vector(*t.bk, prefix + "attn_k.bias");
    a.bv = vector(*t.bv, prefix + "attn_v.bias");
  }
  if (t.q_norm) a.q_norm = vector(*t.q_norm, prefix + "attn_q_norm");
  if (t.k_norm) a.k_norm = vector(*t.k_norm, prefix + "attn_k_norm");
  if (t.post_norm) a.post_norm = vector(*t.post_norm, prefix + "post_attention_norm");
  a.gate = t.gate;
  a.local_rope = t.local_rope;
  a.window = t.window;
  a.scale = t.scale;
  return a;
}

CpuModel::DeltaNet CpuModel::delta_net_weights(const TensorRef& w_qkv, const TensorRef& w_z, const TensorRef& w_b,
                                                const TensorRef& w_a, const TensorRef& w_out, const TensorRef& conv,
                                                const std::vector<float>& a_log, const TensorRef& dt_bias,
                                                const TensorRef& norm, const DeltaNetShape& s, const std::string& prefix) {
  return {matrix(w_qkv, prefix + "gdn_in"), matrix(w_z, prefix + "gdn_in"), matrix(w_b, prefix + "gdn_in"),
          matrix(w_a, prefix + "gdn_in"), matrix(w_out, prefix + "gdn_out"), vector(conv, prefix + "gdn_conv"),
          vector(a_log, prefix + "gdn_a_log"), vector(dt_bias, prefix + "gdn_dt_bias"), vector(norm, prefix + "gdn_norm"), s};
}

CpuModel::ShortConv CpuModel::short_conv_weights(const TensorRef& in_proj, const TensorRef& conv,
                                                 const TensorRef& out_proj, uint32_t L, const std::string& prefix) {
  return {matrix(in_proj, prefix + "shortconv.in_proj"), matrix(out_proj, prefix + "shortconv.out_proj"),
          vector(conv, prefix + "shortconv.conv"), L};
}

void CpuModel::scale(Pass& p, float s) {
  for (size_t i = 0; i < size_t(p.T) * c_.d_model; ++i) p.x[i] *= s;
}

namespace {

// y[t * stride + i] += b[i] for T rows, i < b.size() (nothing when b is empty).
void add_bias(const std::vector<float>& b, float* y, uint32_t stride, uint32_t T) {
  for (uint32_t t = 0; t < T; ++t)
    for (size_t i = 0; i < b.size(); ++i) y[size_t(t) * stride + i] += b[i];
}

// x[t] += rmsnorm(o[t]) * post_norm for T rows of d (o normed in place).
void add_post_normed(const ModelConfig& c, const std::vector<float>& post_norm, float* o, float* x, uint32_t T) {
  const uint32_t D = c.d_model;
  for (uint32_t t = 0; t < T; ++t) {
    ref::rmsnorm(o + size_t(t) * D, post_norm.data(), o + size_t(t) * D, D, c.rms_eps);
    for (uint32_t i = 0; i < D; ++i) x[size_t(t) * D + i] += o[size_t(t) * D + i];
  }
}

}  // namespace

void CpuModel::gated_ffn(Pass& p, const Vector& norm, const Ffn& w) {
  if (!w.gelu_tanh && w.post_norm.empty()) return cpu_swiglu_ffn(c_, norm, w.gate, w.up, w.down, p.x, p.h, p.T);
  const uint32_t T = p.T, D = c_.d_model, F = c_.ffn_dim;
  std::vector<float> g(size_t(T) * F), u(size_t(T) * F), o(size_t(T) * D);
  cpu_rmsnorm_rows(c_, p.x, norm, p.h, T);
  ref::matmul(w.gate, p.h, D, g.data(), F, T, false);
  ref::matmul(w.up, p.h, D, u.data(), F, T, false);
  if (w.gelu_tanh)
    for (size_t i = 0; i < g.size(); ++i) g[i] = ref::gelu_tanh(g[i]) * u[i];
  else
    for (uint32_t t = 0; t < T; ++t) ref::silu_mul(&g[size_t(t) * F], &u[size_t(t) * F], &g[size_t(t) * F], F);
  if (w.post_norm.empty()) return ref::matmul(w.down, g.data(), F, p.x, D, T, true);
  ref::matmul(w.down, g.data(), F, o.data(), D, T, false);
  add_post_normed(c_, w.post_norm, o.data(), p.x, T);
}

void CpuModel::attention(Pass& p, uint32_t layer, const Vector& norm, const Attention& w) {
  const uint32_t T = p.T, D = c_.d_model, Q = c_.q_dim(), KV = c_.kv_dim(), HD = c_.head_dim;
  const uint32_t QR = w.gate ? 2 * Q : Q;  // q (| gate) row
  std::vector<float> q(size_t(T) * QR), k(size_t(T) * KV), v(size_t(T) * KV), att(size_t(T) * Q);
  cpu_rmsnorm_rows(c_, p.x, norm, p.h, T);
  KvState& kv = p.seq.kv(layer);
  float *kc = kv.keys().host(), *vc = kv.values().host();  // [ctx, kv_dim]
  ref::matmul(w.wq, p.h, D, q.data(), QR, T, false);
  ref::matmul(w.wk, p.h, D, k.data(), KV, T, false);
  ref::matmul(w.wv, p.h, D, v.data(), KV, T, false);
  add_bias(w.bq, q.data(), QR, T);  // the q part of each [q (| gate)] row
  add_bias(w.bk, k.data(), KV, T);
  add_bias(w.bv, v.data(), KV, T);
  const float* table = w.local_rope ? rope_local_.data() : rope_.data();
  for (uint32_t t = 0; t < T; ++t) {
    const uint32_t pos = p.n_past + t;
    float *qt = &q[size_t(t) * QR], *kt = &k[size_t(t) * KV];
    // Per-head RMSNorm of q and k (in place: each head's row is read fully before it is written).
    if (!w.q_norm.empty()) ref::rmsnorm_heads(qt, w.q_norm.data(), c_.n_heads, HD, HD, c_.rms_eps);
    if (!w.k_norm.empty()) ref::rmsnorm_heads(kt, w.k_norm.data(), c_.n_kv_heads, HD, HD, c_.rms_eps);
    ref::rope(qt, c_.n_heads, HD, c_.rope_dims, pos, table, c_.rope_neox);
    ref::rope(kt, c_.n_kv_heads, HD, c_.rope_dims, pos, table, c_.rope_neox);
    std::copy_n(kt, KV, &kc[size_t(pos) * KV]);
    std::copy_n(&v[size_t(t) * KV], KV, &vc[size_t(pos) * KV]);
  }
  const float scale = w.scale > 0 ? w.scale : 1.0f / std::sqrt(float(HD));
  cpu_attention(c_, kopt_, q.data(), QR, kc, vc, att.data(), Q, p.n_past, T, scale, chunk_, w.window);
  if (w.gate)
    for (uint32_t t = 0; t < T; ++t) ref::sigmoid_gate(&att[size_t(t) * Q], &q[size_t(t) * QR + Q], Q);
  if (w.post_norm.empty()) return ref::matmul(w.wo, att.data(), Q, p.x, D, T, true);
  std::vector<float> o(size_t(T) * D);
  ref::matmul(w.wo, att.data(), Q, o.data(), D, T, false);
  add_post_normed(c_, w.post_norm, o.data(), p.x, T);
}

void CpuModel::delta_net(Pass& p, uint32_t layer, const Vector& norm, const DeltaNet& w) {
  const DeltaNetShape& s = w.s;
  const uint32_t T = p.T, D = c_.d_model, CD = s.conv_dim(), VD = s.value_dim(), KD = s.key_dim(), nv = s.nv;
  std::vector<float> qkv(size_t(T) * CD), cv(size_t(T) * CD), z(size_t(T) * VD), b(size_t(T) * nv),
      a(size_t(T) * nv), gb(size_t(T) * 2 * nv), o(size_t(T) * VD);
  cpu_rmsnorm_rows(c_, p.x, norm, p.h, T);
  DeltaState& st = p.seq.delta(layer);
  ref::matmul(w.w_qkv, p.h, D, qkv.data(), CD, T, false);
  ref::matmul(w.w_z, p.h, D, z.data(), VD, T, false);
  ref::matmul(w.w_b, p.h, D, b.data(), nv, T, false);
  ref::matmul(w.w_a, p.h, D, a.data(), nv, T, false);
  ref::causal_conv(qkv.data(), CD, nullptr, 0, nullptr, 0, w.conv.data(), nullptr, st.conv_state().host(), cv.data(),
                   CD, T, CD, s.conv_k, true);
  for (uint32_t t = 0; t < T; ++t) {
    ref::l2norm_heads(&cv[size_t(t) * CD], 2 * s.nk, s.dk, s.dk, 1e-6f);  // q heads then k heads, contiguous
    ref::gdn_gates(&a[size_t(t) * nv], &b[size_t(t) * nv], w.a_log.data(), w.dt_bias.data(), &gb[size_t(t) * 2 * nv],
                   &gb[size_t(t) * 2 * nv + nv], nv);
  }
  ref::GdnArgs g{cv.data(), cv.data() + KD, cv.data() + 2 * KD, gb.data(), gb.data() + nv, CD, CD, 2 * nv,
                 st.recurrent_state().host(), o.data(), VD, T, s.nk, nv, s.dk, s.dv, 1.0f / std::sqrt(float(s.dk)),
                 s.tiled_v_heads};
  ref::gated_delta_rule(g);
  for (uint32_t t = 0; t < T; ++t) ref::gated_rmsnorm(&o[size_t(t) * VD], &z[size_t(t) * VD], w.norm.data(), nv, s.dv, c_.rms_eps);
  ref::matmul(w.w_out, o.data(), VD, p.x, D, T, true);
}

void CpuModel::short_conv(Pass& p, uint32_t layer, const Vector& norm, const ShortConv& w) {
  const uint32_t T = p.T, D = c_.d_model;
  std::vector<float> bcx(size_t(T) * 3 * D), y(size_t(T) * D);
  cpu_rmsnorm_rows(c_, p.x, norm, p.h, T);
  ref::matmul(w.in_proj, p.h, D, bcx.data(), 3 * D, T, false);
  ref::causal_conv(bcx.data() + 2 * D, 3 * D, bcx.data(), 3 * D, bcx.data() + D, 3 * D, w.conv.data(), nullptr,
                   p.seq.conv(layer).conv_state().host(), y.data(), D, T, D, w.L, false);
  ref::matmul(w.out_proj, y.data(), D, p.x, D, T, true);
}

kernels::ref::Matrix cpu_matrix(const TensorRef& t) {
  kernels::ref::Matrix m;
  m.K = uint32_t(t.shape[0]);
  m.N = uint32_t(t.n_elements() / t.shape[0]);
  m.w = dequantize_tensor(t);
  return m;
}

}  // namespace wgllm
