// LFM2 forward pass on the CPU reference backend: plain C++ with f32 accumulation over weights
// dequantized once at load (kernels/ref.h), op for op the same as lfm2_gpu.cpp. Formulas:
// transformers models/lfm2/modeling_lfm2.py (see models/lfm2_weights.h for the summary).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "kernels/ref.h"
#include "kernels/rope_table.h"
#include "models/lfm2.h"
#include "models/lfm2_weights.h"
#include "models/cpu_common.h"
#include "models/source.h"

namespace wgllm {
namespace {

namespace ref = kernels::ref;

struct Layer {
  bool attn = false;
  std::vector<float> attn_norm, ffn_norm;
  ref::Matrix gate, up, down;
  ref::Matrix wq, wk, wv, wo;           // attention
  std::vector<float> q_norm, k_norm;    // attention, {head_dim}
  ref::Matrix in_proj, out_proj;        // ShortConv
  std::vector<float> conv;              // ShortConv, [d][L]
};

class Lfm2Cpu final : public CpuModel {
 public:
  Lfm2Cpu(const ModelSource& src, const ModelOptions& opt) : CpuModel(src.config, opt), p_(lfm2_params(src)) {
    Lfm2Refs r = lfm2_refs(*src.tensors, c_, p_, src.is_gguf());
    embed_ = cpu_matrix(r.embed);
    out_norm_ = dequantize_tensor(r.out_norm);
    if (!c_.tied_embeddings) lm_head_ = cpu_matrix(r.lm_head);
    for (uint32_t i = 0; i < c_.n_layers; ++i) {
      const Lfm2LayerRefs& R = r.layers[i];
      Layer L;
      L.attn = p_.attn[i];
      L.attn_norm = dequantize_tensor(R.attn_norm);
      L.ffn_norm = dequantize_tensor(R.ffn_norm);
      L.gate = cpu_matrix(R.w_gate);
      L.up = cpu_matrix(R.w_up);
      L.down = cpu_matrix(R.w_down);
      if (L.attn) {
        L.wq = cpu_matrix(R.wq);
        L.wk = cpu_matrix(R.wk);
        L.wv = cpu_matrix(R.wv);
        L.wo = cpu_matrix(R.wo);
        L.q_norm = dequantize_tensor(R.q_norm);
        L.k_norm = dequantize_tensor(R.k_norm);
      } else {
        L.in_proj = cpu_matrix(R.in_proj);
        L.out_proj = cpu_matrix(R.out_proj);
        L.conv = dequantize_tensor(R.conv);
      }
      layers_.push_back(std::move(L));
    }
  }

  std::string backend_name() const override { return "cpu"; }
  std::unique_ptr<Sequence> new_sequence(uint32_t ctx) override {
    SequenceSize s;
    s.context = sequence_context(ctx, default_ctx_, c_.max_context);
    s.kv_cache = uint64_t(p_.n_attn()) * Lfm2Params::kv_bytes(c_, s.context);
    s.recurrent = uint64_t(c_.n_layers - p_.n_attn()) * p_.conv_state_bytes(c_);
    s.largest_buffer = std::max(p_.n_attn() ? Lfm2Params::kv_bytes(c_, s.context) / 2 : 0, p_.conv_state_bytes(c_));
    return cpu_new_sequence(s, c_, p_.n_attn() ? &rope_ : nullptr, [&] { return lfm2_sequence(nullptr, c_, p_, s.context); });
  }
  MemoryReport memory() const override {
    MemoryReport m;
    auto mb = [](const ref::Matrix& x) { return uint64_t(x.w.size()) * 4; };
    m.weights = mb(embed_) + mb(lm_head_) + out_norm_.size() * 4;
    for (auto& L : layers_)
      m.weights += mb(L.wq) + mb(L.wk) + mb(L.wv) + mb(L.wo) + mb(L.gate) + mb(L.up) + mb(L.down) + mb(L.in_proj) +
                   mb(L.out_proj) + 4 * (L.conv.size() + L.q_norm.size() + L.k_norm.size() + L.attn_norm.size() +
                                         L.ffn_norm.size());
    return m;
  }

  void forward(Sequence& seq, std::span<const int32_t> toks, std::vector<float>* logits) override {
    check_forward(seq, toks, c_.vocab);
    const uint32_t T = uint32_t(toks.size()), n_past = seq.n_past();
    const uint32_t D = c_.d_model, Q = c_.q_dim(), KV = c_.kv_dim(), HD = c_.head_dim;
    std::vector<float> x(size_t(T) * D), h(size_t(T) * D), q(size_t(T) * Q), k(size_t(T) * KV), v(size_t(T) * KV),
        att(size_t(T) * std::max(Q, D)), bcx(size_t(T) * 3 * D);
    for (uint32_t t = 0; t < T; ++t) std::copy_n(embed_.w.data() + size_t(toks[t]) * D, D, x.data() + size_t(t) * D);
    const float scale = 1.0f / std::sqrt(float(HD));
    for (uint32_t l = 0; l < c_.n_layers; ++l) {
      Layer& L = layers_[l];
      for (uint32_t t = 0; t < T; ++t) ref::rmsnorm(&x[size_t(t) * D], L.attn_norm.data(), &h[size_t(t) * D], D, c_.rms_eps);
      if (L.attn) {
        KvState& kv = seq.kv(l);
        float *kc = kv.keys().host(), *vc = kv.values().host();  // [ctx, kv_dim]
        ref::matmul(L.wq, h.data(), D, q.data(), Q, T, false);
        ref::matmul(L.wk, h.data(), D, k.data(), KV, T, false);
        ref::matmul(L.wv, h.data(), D, v.data(), KV, T, false);
        // Per-head RMSNorm of q and k (in place: ref::rmsnorm reads a row fully before writing it).
        for (size_t r = 0; r < size_t(T) * c_.n_heads; ++r) ref::rmsnorm(&q[r * HD], L.q_norm.data(), &q[r * HD], HD, c_.rms_eps);
        for (size_t r = 0; r < size_t(T) * c_.n_kv_heads; ++r) ref::rmsnorm(&k[r * HD], L.k_norm.data(), &k[r * HD], HD, c_.rms_eps);
        for (uint32_t t = 0; t < T; ++t) {
          const uint32_t pos = n_past + t;
          ref::rope(&q[size_t(t) * Q], c_.n_heads, HD, c_.rope_dims, pos, rope_.data(), c_.rope_neox);
          ref::rope(&k[size_t(t) * KV], c_.n_kv_heads, HD, c_.rope_dims, pos, rope_.data(), c_.rope_neox);
          std::copy_n(&k[size_t(t) * KV], KV, &kc[size_t(pos) * KV]);
          std::copy_n(&v[size_t(t) * KV], KV, &vc[size_t(pos) * KV]);
        }
        cpu_attention(c_, kopt_, q.data(), Q, kc, vc, att.data(), Q, n_past, T, scale, chunk_);
        ref::matmul(L.wo, att.data(), Q, x.data(), D, T, true);
      } else {
        // ShortConv: [B | C | xs] = in_proj(h); y = C * conv(B * xs); x += out_proj(y).
        ref::matmul(L.in_proj, h.data(), D, bcx.data(), 3 * D, T, false);
        ref::causal_conv(bcx.data() + 2 * D, 3 * D, bcx.data(), 3 * D, bcx.data() + D, 3 * D, L.conv.data(), nullptr,
                         seq.conv(l).conv_state().host(), att.data(), D, T, D, p_.conv_L, false);
        ref::matmul(L.out_proj, att.data(), D, x.data(), D, T, true);
      }
      cpu_swiglu_ffn(c_, L.ffn_norm, L.gate, L.up, L.down, x.data(), h.data(), T);
    }
    seq.advance(T);
    if (logits) cpu_logits(c_, &x[size_t(T - 1) * D], out_norm_, c_.tied_embeddings ? embed_ : lm_head_, logits);
  }

 private:
  Lfm2Params p_;
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> create_lfm2_cpu(const ModelSource& src, const ModelOptions& opt) {
  return std::make_unique<Lfm2Cpu>(src, opt);
}

}  // namespace wgllm
