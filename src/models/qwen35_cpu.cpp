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

ref::Matrix matrix(const TensorRef& t) {
  ref::Matrix m;
  m.K = uint32_t(t.shape[0]);
  m.N = t.shape.size() > 1 ? uint32_t(t.shape[1]) : 1;
  m.w = dequantize_tensor(t);
  return m;
}

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
  uint32_t slot = 0;  // index among layers of its kind (KV cache / recurrent state)
};

struct Qwen35CpuSnapshot final : SeqSnapshot {
  std::vector<std::vector<float>> conv, ssm;
  uint64_t bytes() const override {
    uint64_t b = 0;
    for (auto& v : conv) b += v.size() * 4;
    for (auto& v : ssm) b += v.size() * 4;
    return b;
  }
};

// Layer ids of the attention (KV) and linear (recurrent) layers, for state blob names.
std::vector<uint32_t> layer_ids(const Qwen35Params& p, bool linear) {
  std::vector<uint32_t> v;
  for (uint32_t i = 0; i < p.linear.size(); ++i)
    if (p.linear[i] == linear) v.push_back(i);
  return v;
}

std::vector<uint8_t> bytes_of(const float* f, size_t n) {
  std::vector<uint8_t> b(n * 4);
  if (n) std::memcpy(b.data(), f, n * 4);
  return b;
}

struct CpuSeq final : Sequence {
  CpuSeq(uint32_t ctx, uint32_t n_attn, uint32_t kv_dim, uint32_t n_lin, const Qwen35Params& p)
      : Sequence(ctx), kv_dim_(kv_dim), attn_ids_(layer_ids(p, false)), lin_ids_(layer_ids(p, true)) {
    kc.assign(n_attn, std::vector<float>(size_t(ctx) * kv_dim));
    vc = kc;
    conv.assign(n_lin, std::vector<float>(size_t(p.conv_k - 1) * p.conv_dim()));
    ssm.assign(n_lin, std::vector<float>(size_t(p.nv) * p.dk * p.dv));
  }
  MemoryReport memory() const override {
    MemoryReport m;
    for (auto& k : kc) m.kv_cache += 2 * k.size() * 4;
    for (auto& c : conv) m.recurrent += c.size() * 4;
    for (auto& s : ssm) m.recurrent += s.size() * 4;
    return m;
  }
  std::vector<std::vector<float>> kc, vc;    // [attn layer][pos * kv_dim + i]
  std::vector<std::vector<float>> conv;      // [linear layer][(conv_k-1) * conv_dim]: last inputs, oldest first
  std::vector<std::vector<float>> ssm;       // [linear layer][nv][dk][dv]
  void advance(uint32_t n) { n_past_ += n; }

 protected:
  std::unique_ptr<SeqSnapshot> capture() const override {
    auto s = std::make_unique<Qwen35CpuSnapshot>();
    s->conv = conv;
    s->ssm = ssm;
    return s;
  }
  void restore_recurrent(const SeqSnapshot& s) override {
    auto& q = dynamic_cast<const Qwen35CpuSnapshot&>(s);
    conv = q.conv;
    ssm = q.ssm;
  }
  // Blobs: "blk.N.conv" / "blk.N.ssm" (f32, layouts as the members) for linear layer N, and
  // "blk.N.k" / "blk.N.v" (rows [0, n_past) of [pos, kv_dim]) for attention layer N.
  std::vector<StateBlob> recurrent_blobs(const std::vector<std::vector<float>>& c,
                                         const std::vector<std::vector<float>>& s) const {
    std::vector<StateBlob> out;
    for (size_t i = 0; i < lin_ids_.size(); ++i) {
      const std::string p = "blk." + std::to_string(lin_ids_[i]);
      out.push_back({p + ".conv", bytes_of(c[i].data(), c[i].size())});
      out.push_back({p + ".ssm", bytes_of(s[i].data(), s[i].size())});
    }
    return out;
  }
  // Validates every recurrent blob, then copies them into c and s.
  void take_recurrent(const std::vector<StateBlob>& blobs, std::vector<std::vector<float>>& c,
                      std::vector<std::vector<float>>& s) const {
    std::vector<const StateBlob*> bc, bs;
    for (size_t i = 0; i < lin_ids_.size(); ++i) {
      const std::string p = "blk." + std::to_string(lin_ids_[i]);
      bc.push_back(&state_blob(blobs, p + ".conv", conv[i].size() * 4));
      bs.push_back(&state_blob(blobs, p + ".ssm", ssm[i].size() * 4));
    }
    c = conv;
    s = ssm;
    for (size_t i = 0; i < lin_ids_.size(); ++i) {
      std::memcpy(c[i].data(), bc[i]->data.data(), bc[i]->data.size());
      std::memcpy(s[i].data(), bs[i]->data.data(), bs[i]->data.size());
    }
  }
  std::vector<StateBlob> snapshot_blobs(const SeqSnapshot& s) const override {
    auto& q = dynamic_cast<const Qwen35CpuSnapshot&>(s);
    return recurrent_blobs(q.conv, q.ssm);
  }
  std::unique_ptr<SeqSnapshot> snapshot_from_blobs(const std::vector<StateBlob>& blobs) override {
    check_blob_count(blobs, 2 * lin_ids_.size());
    auto s = std::make_unique<Qwen35CpuSnapshot>();
    take_recurrent(blobs, s->conv, s->ssm);
    return s;
  }
  std::vector<StateBlob> read_state() const override {
    std::vector<StateBlob> out = recurrent_blobs(conv, ssm);
    for (size_t i = 0; i < attn_ids_.size(); ++i) {
      const std::string p = "blk." + std::to_string(attn_ids_[i]);
      out.push_back({p + ".k", bytes_of(kc[i].data(), size_t(n_past_) * kv_dim_)});
      out.push_back({p + ".v", bytes_of(vc[i].data(), size_t(n_past_) * kv_dim_)});
    }
    return out;
  }
  void write_state(uint32_t n, const std::vector<StateBlob>& blobs) override {
    check_blob_count(blobs, 2 * (lin_ids_.size() + attn_ids_.size()));
    std::vector<std::vector<float>> c, s;
    take_recurrent(blobs, c, s);
    std::vector<const StateBlob*> bk, bv;
    const uint64_t kvb = uint64_t(n) * kv_dim_ * 4;
    for (size_t i = 0; i < attn_ids_.size(); ++i) {
      bk.push_back(&state_blob(blobs, "blk." + std::to_string(attn_ids_[i]) + ".k", kvb));
      bv.push_back(&state_blob(blobs, "blk." + std::to_string(attn_ids_[i]) + ".v", kvb));
    }
    conv = std::move(c);
    ssm = std::move(s);
    for (size_t i = 0; i < attn_ids_.size() && kvb; ++i) {
      std::memcpy(kc[i].data(), bk[i]->data.data(), kvb);
      std::memcpy(vc[i].data(), bv[i]->data.data(), kvb);
    }
  }

 private:
  uint32_t kv_dim_ = 0;
  std::vector<uint32_t> attn_ids_, lin_ids_;
};

class Qwen35Cpu final : public CpuModel {
 public:
  Qwen35Cpu(const ModelSource& src, const ModelOptions& opt) : c_(src.config), p_(qwen35_params(src)) {
    default_ctx_ = opt.context_length;
    kopt_ = opt.kernels;
    chunk_ = cpu_chunk(c_, opt);
    Qwen35Refs r = qwen35_refs(*src.tensors, c_, p_);
    embed_ = matrix(r.embed);
    out_norm_ = qwen35_norm_weight(r.out_norm, p_);
    if (!c_.tied_embeddings) lm_head_ = matrix(r.lm_head);
    for (uint32_t i = 0; i < c_.n_layers; ++i) {
      auto& R = r.layers[i];
      Layer L;
      L.linear = p_.linear[i];
      L.attn_norm = qwen35_norm_weight(R.attn_norm, p_);
      L.ffn_norm = qwen35_norm_weight(R.ffn_norm, p_);
      L.gate = matrix(R.w_gate);
      L.up = matrix(R.w_up);
      L.down = matrix(R.w_down);
      if (L.linear) {
        L.slot = n_lin_++;
        L.w_qkv = matrix(R.w_qkv);
        L.w_z = matrix(R.w_z);
        L.w_b = matrix(R.w_b);
        L.w_a = matrix(R.w_a);
        L.w_out = matrix(R.w_out);
        L.conv = dequantize_tensor(R.conv);
        L.a_log = qwen35_a_log(R.a_log, p_);
        L.dt_bias = dequantize_tensor(R.dt_bias);
        L.gdn_norm = dequantize_tensor(R.gdn_norm);
      } else {
        L.slot = n_attn_++;
        std::vector<uint8_t> q = qwen35_deinterleave_q(R.wq, c_.n_heads, c_.head_dim);
        TensorRef t = R.wq;
        t.data = q.data();
        L.wq = matrix(t);
        L.wk = matrix(R.wk);
        L.wv = matrix(R.wv);
        L.wo = matrix(R.wo);
        L.q_norm = qwen35_norm_weight(R.q_norm, p_);
        L.k_norm = qwen35_norm_weight(R.k_norm, p_);
      }
      layers_.push_back(std::move(L));
    }
  }

  const ModelConfig& config() const override { return c_; }
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
                            [&] { return std::make_unique<CpuSeq>(s.context, n_attn_, c_.kv_dim(), n_lin_, p_); });
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

  void forward(Sequence& sq, std::span<const int32_t> toks, std::vector<float>* logits) override {
    check_forward(sq, toks, c_.vocab);
    CpuSeq& seq = dynamic_cast<CpuSeq&>(sq);
    const uint32_t T = uint32_t(toks.size()), D = c_.d_model;
    std::vector<float> x(size_t(T) * D), h(size_t(T) * D);
    for (uint32_t t = 0; t < T; ++t)
      std::copy_n(embed_.w.data() + size_t(toks[t]) * D, D, x.data() + size_t(t) * D);
    for (Layer& L : layers_) {
      for (uint32_t t = 0; t < T; ++t) ref::rmsnorm(&x[size_t(t) * D], L.attn_norm.data(), &h[size_t(t) * D], D, c_.rms_eps);
      if (L.linear)
        delta_net(L, seq, h, x, T);
      else
        attention(L, seq, h, x, T);
      cpu_swiglu_ffn(c_, L.ffn_norm, L.gate, L.up, L.down, x.data(), h.data(), T);
    }
    seq.advance(T);
    if (logits) cpu_logits(c_, &x[size_t(T - 1) * D], out_norm_, c_.tied_embeddings ? embed_ : lm_head_, logits);
  }

 private:
  // x += o_proj(attention(q, k, v) * sigmoid(gate)), Qwen3_5Attention.
  void attention(Layer& L, CpuSeq& seq, const std::vector<float>& h, std::vector<float>& x, uint32_t T) {
    const uint32_t D = c_.d_model, Q = c_.q_dim(), KV = c_.kv_dim(), HD = c_.head_dim, n_past = seq.n_past();
    std::vector<float> qg(size_t(T) * 2 * Q), k(size_t(T) * KV), v(size_t(T) * KV), att(size_t(T) * Q);
    ref::matmul(L.wq, h.data(), D, qg.data(), 2 * Q, T, false);
    ref::matmul(L.wk, h.data(), D, k.data(), KV, T, false);
    ref::matmul(L.wv, h.data(), D, v.data(), KV, T, false);
    auto& kc = seq.kc[L.slot];
    auto& vc = seq.vc[L.slot];
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
    cpu_attention(c_, kopt_, qg.data(), 2 * Q, kc.data(), vc.data(), att.data(), Q, n_past, T, scale, chunk_);
    for (uint32_t t = 0; t < T; ++t) ref::sigmoid_gate(&att[size_t(t) * Q], &qg[size_t(t) * 2 * Q + Q], Q);
    ref::matmul(L.wo, att.data(), Q, x.data(), D, T, true);
  }

  // x += out_proj(RMSNormGated(delta_rule(conv(qkv)), z)), Qwen3_5GatedDeltaNet.
  void delta_net(Layer& L, CpuSeq& seq, const std::vector<float>& h, std::vector<float>& x, uint32_t T) {
    const uint32_t D = c_.d_model, CD = p_.conv_dim(), VD = p_.value_dim(), KD = p_.key_dim(), nv = p_.nv;
    std::vector<float> qkv(size_t(T) * CD), cv(size_t(T) * CD), z(size_t(T) * VD), b(size_t(T) * nv),
        a(size_t(T) * nv), gb(size_t(T) * 2 * nv), o(size_t(T) * VD);
    ref::matmul(L.w_qkv, h.data(), D, qkv.data(), CD, T, false);
    ref::matmul(L.w_z, h.data(), D, z.data(), VD, T, false);
    ref::matmul(L.w_b, h.data(), D, b.data(), nv, T, false);
    ref::matmul(L.w_a, h.data(), D, a.data(), nv, T, false);
    ref::causal_conv(qkv.data(), CD, nullptr, 0, nullptr, 0, L.conv.data(), nullptr, seq.conv[L.slot].data(), cv.data(),
                     CD, T, CD, p_.conv_k, true);
    for (uint32_t t = 0; t < T; ++t) {
      float* r = &cv[size_t(t) * CD];
      ref::l2norm_heads(r, 2 * p_.nk, p_.dk, p_.dk, 1e-6f);  // q heads then k heads, contiguous
      ref::gdn_gates(&a[size_t(t) * nv], &b[size_t(t) * nv], L.a_log.data(), L.dt_bias.data(), &gb[size_t(t) * 2 * nv],
                     &gb[size_t(t) * 2 * nv + nv], nv);
    }
    ref::GdnArgs g{cv.data(), cv.data() + KD, cv.data() + 2 * KD, gb.data(), gb.data() + nv, CD, CD, 2 * nv,
                   seq.ssm[L.slot].data(), o.data(), VD, T, p_.nk, nv, p_.dk, p_.dv, 1.0f / std::sqrt(float(p_.dk)),
                   p_.gguf_layout};
    ref::gated_delta_rule(g);
    for (uint32_t t = 0; t < T; ++t)
      ref::gated_rmsnorm(&o[size_t(t) * VD], &z[size_t(t) * VD], L.gdn_norm.data(), nv, p_.dv, c_.rms_eps);
    ref::matmul(L.w_out, o.data(), VD, x.data(), D, T, true);
  }

  ModelConfig c_;
  Qwen35Params p_;
  uint32_t default_ctx_ = 0, n_attn_ = 0, n_lin_ = 0;
  kernels::KernelOptions kopt_;  // the sparse-attention switches (cpu_attention)
  uint32_t chunk_ = 1;           // cpu_attention's row groups (the WebGPU backend's submissions)
  ref::Matrix embed_, lm_head_;
  std::vector<float> out_norm_, rope_;  // rope_: grown by new_sequence() to the longest sequence
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> create_qwen35_cpu(const ModelSource& src, const ModelOptions& opt) {
  return std::make_unique<Qwen35Cpu>(src, opt);
}

}  // namespace wgllm
