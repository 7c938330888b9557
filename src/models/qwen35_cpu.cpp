// Qwen3.5 text model on the CPU reference backend (architecture and formulas: models/qwen35_weights.h,
// transformers models/qwen3_5/modeling_qwen3_5.py). Plain C++ in f32 over weights dequantized at
// load; the Gated DeltaNet runs as the plain per-token recurrence (kernels/gdn_ref.h
// gated_delta_rule), which is what the GPU's chunked form is checked against.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "kernels/gdn_ref.h"
#include "kernels/ref.h"
#include "kernels/rope_table.h"
#include "models/qwen35.h"
#include "models/qwen35_weights.h"
#include "models/cpu_common.h"
#include "models/source.h"

namespace wgllm {
namespace {

namespace ref = kernels::ref;

struct Layer {
  bool linear = false;
  std::vector<float> attn_norm, ffn_norm;  // (1 + w)
  ref::Matrix gate, up, down;
  // attention: wq rows are [q heads | gate heads]
  ref::Matrix wq, wk, wv, wo;
  std::vector<float> q_norm, k_norm;  // (1 + w)
  // Gated DeltaNet
  ref::Matrix w_qkv, w_z, w_b, w_a, w_out;
  std::vector<float> conv, a_log, dt_bias, gdn_norm;
};

class Qwen35Cpu final : public CpuModel {
 public:
  Qwen35Cpu(const ModelSource& src, const ModelOptions& opt) : CpuModel(src.config, opt), p_(qwen35_params(src)) {
    Qwen35Refs r = qwen35_refs(*src.tensors, c_, p_);
    embed_ = cpu_matrix(r.embed);
    out_norm_ = qwen35_norm_weight(r.out_norm, p_);
    if (!c_.tied_embeddings) lm_head_ = cpu_matrix(r.lm_head);
    for (uint32_t i = 0; i < c_.n_layers; ++i) {
      auto& R = r.layers[i];
      Layer L;
      L.linear = p_.linear[i];
      L.attn_norm = qwen35_norm_weight(R.attn_norm, p_);
      L.ffn_norm = qwen35_norm_weight(R.ffn_norm, p_);
      L.gate = cpu_matrix(R.w_gate);
      L.up = cpu_matrix(R.w_up);
      L.down = cpu_matrix(R.w_down);
      if (L.linear) {
        ++n_lin_;
        L.w_qkv = cpu_matrix(R.w_qkv);
        L.w_z = cpu_matrix(R.w_z);
        L.w_b = cpu_matrix(R.w_b);
        L.w_a = cpu_matrix(R.w_a);
        L.w_out = cpu_matrix(R.w_out);
        L.conv = dequantize_tensor(R.conv);
        L.a_log = qwen35_a_log(R.a_log, p_);
        L.dt_bias = dequantize_tensor(R.dt_bias);
        L.gdn_norm = dequantize_tensor(R.gdn_norm);
      } else {
        ++n_attn_;
        std::vector<uint8_t> q = qwen35_deinterleave_q(R.wq, c_.n_heads, c_.head_dim);
        TensorRef t = R.wq;
        t.data = q.data();
        L.wq = cpu_matrix(t);
        L.wk = cpu_matrix(R.wk);
        L.wv = cpu_matrix(R.wv);
        L.wo = cpu_matrix(R.wo);
        L.q_norm = qwen35_norm_weight(R.q_norm, p_);
        L.k_norm = qwen35_norm_weight(R.k_norm, p_);
      }
      layers_.push_back(std::move(L));
    }
  }

  std::string backend_name() const override { return "cpu"; }
  std::unique_ptr<Sequence> new_sequence(uint32_t ctx) override {
    SequenceSize s;
    s.context = sequence_context(ctx, default_ctx_, c_.max_context);
    const uint64_t kvb = uint64_t(s.context) * c_.kv_dim() * 4, conv = uint64_t(p_.conv_k - 1) * p_.conv_dim() * 4,
                   ssm = uint64_t(p_.nv) * p_.dk * p_.dv * 4;
    s.kv_cache = 2ull * n_attn_ * kvb;
    s.recurrent = uint64_t(n_lin_) * (conv + ssm);
    s.largest_buffer = std::max({n_attn_ ? kvb : 0, n_lin_ ? conv : 0, n_lin_ ? ssm : 0});
    return cpu_new_sequence(s, c_, &rope_,
                            [&] { return qwen35_sequence(nullptr, c_, p_, s.context); });
  }
  MemoryReport memory() const override {
    MemoryReport m;
    auto mb = [](const ref::Matrix& x) { return uint64_t(x.w.size()) * 4; };
    m.weights = mb(embed_) + mb(lm_head_);
    for (auto& L : layers_)
      m.weights += mb(L.gate) + mb(L.up) + mb(L.down) + mb(L.wq) + mb(L.wk) + mb(L.wv) + mb(L.wo) + mb(L.w_qkv) +
                   mb(L.w_z) + mb(L.w_b) + mb(L.w_a) + mb(L.w_out);
    return m;
  }

  void forward(Sequence& seq, std::span<const int32_t> toks, std::vector<float>* logits) override {
    check_forward(seq, toks, c_.vocab);
    const uint32_t T = uint32_t(toks.size()), D = c_.d_model;
    std::vector<float> x(size_t(T) * D), h(size_t(T) * D);
    for (uint32_t t = 0; t < T; ++t)
      std::copy_n(embed_.w.data() + size_t(toks[t]) * D, D, x.data() + size_t(t) * D);
    for (uint32_t l = 0; l < c_.n_layers; ++l) {
      Layer& L = layers_[l];
      for (uint32_t t = 0; t < T; ++t) ref::rmsnorm(&x[size_t(t) * D], L.attn_norm.data(), &h[size_t(t) * D], D, c_.rms_eps);
      if (L.linear)
        delta_net(L, seq.delta(l), h, x, T);
      else
        attention(L, seq.kv(l), seq.n_past(), h, x, T);
      cpu_swiglu_ffn(c_, L.ffn_norm, L.gate, L.up, L.down, x.data(), h.data(), T);
    }
    seq.advance(T);
    if (logits) cpu_logits(c_, &x[size_t(T - 1) * D], out_norm_, c_.tied_embeddings ? embed_ : lm_head_, logits);
  }

 private:
  // x += o_proj(attention(q, k, v) * sigmoid(gate)), Qwen3_5Attention.
  void attention(Layer& L, KvState& kv, uint32_t n_past, const std::vector<float>& h, std::vector<float>& x, uint32_t T) {
    const uint32_t D = c_.d_model, Q = c_.q_dim(), KV = c_.kv_dim(), HD = c_.head_dim;
    std::vector<float> qg(size_t(T) * 2 * Q), k(size_t(T) * KV), v(size_t(T) * KV), att(size_t(T) * Q);
    ref::matmul(L.wq, h.data(), D, qg.data(), 2 * Q, T, false);
    ref::matmul(L.wk, h.data(), D, k.data(), KV, T, false);
    ref::matmul(L.wv, h.data(), D, v.data(), KV, T, false);
    float *kc = kv.keys().host(), *vc = kv.values().host();  // [ctx, kv_dim]
    for (uint32_t t = 0; t < T; ++t) {
      const uint32_t pos = n_past + t;
      float* q = &qg[size_t(t) * 2 * Q];
      ref::rmsnorm_heads(q, L.q_norm.data(), c_.n_heads, HD, HD, c_.rms_eps);
      ref::rmsnorm_heads(&k[size_t(t) * KV], L.k_norm.data(), c_.n_kv_heads, HD, HD, c_.rms_eps);
      ref::rope(q, c_.n_heads, HD, c_.rope_dims, pos, rope_.data(), c_.rope_neox);
      ref::rope(&k[size_t(t) * KV], c_.n_kv_heads, HD, c_.rope_dims, pos, rope_.data(), c_.rope_neox);
      std::copy_n(&k[size_t(t) * KV], KV, &kc[size_t(pos) * KV]);
      std::copy_n(&v[size_t(t) * KV], KV, &vc[size_t(pos) * KV]);
    }
    const float scale = 1.0f / std::sqrt(float(HD));
    cpu_attention(c_, kopt_, qg.data(), 2 * Q, kc, vc, att.data(), Q, n_past, T, scale, chunk_);
    for (uint32_t t = 0; t < T; ++t) ref::sigmoid_gate(&att[size_t(t) * Q], &qg[size_t(t) * 2 * Q + Q], Q);
    ref::matmul(L.wo, att.data(), Q, x.data(), D, T, true);
  }

  // x += out_proj(RMSNormGated(delta_rule(conv(qkv)), z)), Qwen3_5GatedDeltaNet.
  void delta_net(Layer& L, DeltaState& st, const std::vector<float>& h, std::vector<float>& x, uint32_t T) {
    const uint32_t D = c_.d_model, CD = p_.conv_dim(), VD = p_.value_dim(), KD = p_.key_dim(), nv = p_.nv;
    std::vector<float> qkv(size_t(T) * CD), cv(size_t(T) * CD), z(size_t(T) * VD), b(size_t(T) * nv),
        a(size_t(T) * nv), gb(size_t(T) * 2 * nv), o(size_t(T) * VD);
    ref::matmul(L.w_qkv, h.data(), D, qkv.data(), CD, T, false);
    ref::matmul(L.w_z, h.data(), D, z.data(), VD, T, false);
    ref::matmul(L.w_b, h.data(), D, b.data(), nv, T, false);
    ref::matmul(L.w_a, h.data(), D, a.data(), nv, T, false);
    ref::causal_conv(qkv.data(), CD, nullptr, 0, nullptr, 0, L.conv.data(), nullptr, st.conv_state().host(), cv.data(),
                     CD, T, CD, p_.conv_k, true);
    for (uint32_t t = 0; t < T; ++t) {
      float* r = &cv[size_t(t) * CD];
      ref::l2norm_heads(r, 2 * p_.nk, p_.dk, p_.dk, 1e-6f);  // q heads then k heads, contiguous
      ref::gdn_gates(&a[size_t(t) * nv], &b[size_t(t) * nv], L.a_log.data(), L.dt_bias.data(), &gb[size_t(t) * 2 * nv],
                     &gb[size_t(t) * 2 * nv + nv], nv);
    }
    ref::GdnArgs g{cv.data(), cv.data() + KD, cv.data() + 2 * KD, gb.data(), gb.data() + nv, CD, CD, 2 * nv,
                   st.recurrent_state().host(), o.data(), VD, T, p_.nk, nv, p_.dk, p_.dv, 1.0f / std::sqrt(float(p_.dk)),
                   p_.gguf_layout};
    ref::gated_delta_rule(g);
    for (uint32_t t = 0; t < T; ++t)
      ref::gated_rmsnorm(&o[size_t(t) * VD], &z[size_t(t) * VD], L.gdn_norm.data(), nv, p_.dv, c_.rms_eps);
    ref::matmul(L.w_out, o.data(), VD, x.data(), D, T, true);
  }

  Qwen35Params p_;
  uint32_t n_attn_ = 0, n_lin_ = 0;
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> create_qwen35_cpu(const ModelSource& src, const ModelOptions& opt) {
  return std::make_unique<Qwen35Cpu>(src, opt);
}

}  // namespace wgllm
