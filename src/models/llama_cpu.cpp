// Llama forward pass on the CPU reference backend (also Qwen2: the same with Q/K/V biases,
// models/qwen2.h): plain C++ with f32 accumulation over weights dequantized once at load (kernels/ref.h). Same math as the WGSL path, op by op; this is the
// engine's numerical reference for its own GPU kernels.
#include "models/llama_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "core/error.h"
#include "kernels/ref.h"
#include "kernels/rope_table.h"
#include "models/gemma3.h"
#include "models/llama_weights.h"
#include "models/cpu_common.h"
#include "models/source.h"

namespace wgllm {
namespace {

namespace ref = kernels::ref;

struct Layer {
  std::vector<float> attn_norm, ffn_norm;
  ref::Matrix wq, wk, wv, wo, gate, up, down;
  std::vector<float> bq, bk, bv;  // Q/K/V biases (qwen2), else empty
  std::vector<float> q_norm, k_norm, post_attn_norm, post_ffn_norm;  // gemma3, else empty
};

// y[t, i] += b[i] for T rows of N (nothing when b is empty).
void add_bias(const std::vector<float>& b, float* y, uint32_t N, uint32_t T) {
  if (b.empty()) return;
  for (uint32_t t = 0; t < T; ++t)
    for (uint32_t i = 0; i < N; ++i) y[size_t(t) * N + i] += b[i];
}

class LlamaCpu final : public CpuModel {
 public:
  LlamaCpu(const ModelSource& src, const ModelOptions& opt) : CpuModel(src.config, opt) {
    LlamaRefs r = llama_refs(*src.tensors, c_, src.is_gguf());
    embed_ = cpu_matrix(r.embed);
    out_norm_ = dequantize_tensor(r.out_norm);
    if (!c_.tied_embeddings) lm_head_ = cpu_matrix(r.lm_head);
    for (auto& L : r.layers) {
      layers_.push_back({dequantize_tensor(L.attn_norm), dequantize_tensor(L.ffn_norm), cpu_matrix(L.wq),
                         cpu_matrix(L.wk), cpu_matrix(L.wv), cpu_matrix(L.wo), cpu_matrix(L.w_gate), cpu_matrix(L.w_up),
                         cpu_matrix(L.w_down), {}, {}, {}, {}, {}, {}, {}});
      if (L.has_qkv_bias()) {
        layers_.back().bq = dequantize_tensor(L.bq);
        layers_.back().bk = dequantize_tensor(L.bk);
        layers_.back().bv = dequantize_tensor(L.bv);
      }
      if (L.has_gemma_norms()) {
        layers_.back().q_norm = dequantize_tensor(L.q_norm);
        layers_.back().k_norm = dequantize_tensor(L.k_norm);
        layers_.back().post_attn_norm = dequantize_tensor(L.post_attn_norm);
        layers_.back().post_ffn_norm = dequantize_tensor(L.post_ffn_norm);
      }
    }
    if (c_.arch == "gemma3") gemma_ = gemma3_params(src);
  }

  std::unique_ptr<Sequence> new_sequence(uint32_t ctx) override {
    SequenceSize s;
    s.context = sequence_context(ctx, default_ctx_, c_.max_context);
    s.largest_buffer = uint64_t(s.context) * c_.kv_dim() * 4;
    s.kv_cache = 2ull * c_.n_layers * s.largest_buffer;
    if (gemma_) {  // the sliding layers' RoPE table (theta rope_local_base), grown like rope_
      kernels::rope_table_grow(rope_local_, s.context, c_.rope_dims, gemma_->rope_local_base);
    }
    return cpu_new_sequence(s, c_, &rope_, [&] {
      std::vector<std::unique_ptr<LayerState>> st;
      for (uint32_t i = 0; i < c_.n_layers; ++i) st.push_back(std::make_unique<KvState>(nullptr, i, s.context, c_.kv_dim()));
      return std::make_unique<Sequence>(s.context, nullptr, std::move(st));
    });
  }
  MemoryReport memory() const override {
    MemoryReport m;
    auto mb = [](const ref::Matrix& x) { return uint64_t(x.w.size()) * 4; };
    m.weights = mb(embed_) + mb(lm_head_);
    for (auto& L : layers_) m.weights += mb(L.wq) + mb(L.wk) + mb(L.wv) + mb(L.wo) + mb(L.gate) + mb(L.up) + mb(L.down);
    return m;
  }

  void forward(Sequence& seq, std::span<const int32_t> toks, std::vector<float>* logits) override {
    check_forward(seq, toks, c_.vocab);
    const uint32_t T = uint32_t(toks.size()), n_past = seq.n_past();
    const uint32_t D = c_.d_model, Q = c_.q_dim(), KV = c_.kv_dim();
    std::vector<float> x(size_t(T) * D), h(size_t(T) * D), q(size_t(T) * Q), k(size_t(T) * KV),
        v(size_t(T) * KV), att(size_t(T) * Q);
    for (uint32_t t = 0; t < T; ++t)
      std::copy_n(embed_.w.data() + size_t(toks[t]) * D, D, x.data() + size_t(t) * D);
    if (gemma_)
      for (float& e : x) e *= gemma_->embed_scale;
    const float scale = gemma_ ? gemma_->attn_scale : 1.0f / std::sqrt(float(c_.head_dim));
    const uint32_t HD = c_.head_dim;
    for (uint32_t l = 0; l < c_.n_layers; ++l) {
      Layer& L = layers_[l];
      KvState& kv = seq.kv(l);
      float *kc = kv.keys().host(), *vc = kv.values().host();  // [ctx, kv_dim]
      cpu_rmsnorm_rows(c_, x.data(), L.attn_norm, h.data(), T);
      ref::matmul(L.wq, h.data(), D, q.data(), Q, T, false);
      ref::matmul(L.wk, h.data(), D, k.data(), KV, T, false);
      ref::matmul(L.wv, h.data(), D, v.data(), KV, T, false);
      add_bias(L.bq, q.data(), Q, T);
      add_bias(L.bk, k.data(), KV, T);
      add_bias(L.bv, v.data(), KV, T);
      if (!L.q_norm.empty()) {  // gemma3: per-head RMSNorm of q and k before RoPE (in place)
        for (size_t r = 0; r < size_t(T) * c_.n_heads; ++r) ref::rmsnorm(&q[r * HD], L.q_norm.data(), &q[r * HD], HD, c_.rms_eps);
        for (size_t r = 0; r < size_t(T) * c_.n_kv_heads; ++r) ref::rmsnorm(&k[r * HD], L.k_norm.data(), &k[r * HD], HD, c_.rms_eps);
      }
      const bool local = gemma_ && gemma_->sliding(l);
      const float* table = local ? rope_local_.data() : rope_.data();
      for (uint32_t t = 0; t < T; ++t) {
        const uint32_t pos = n_past + t;
        ref::rope(&q[size_t(t) * Q], c_.n_heads, c_.head_dim, c_.rope_dims, pos, table, c_.rope_neox);
        ref::rope(&k[size_t(t) * KV], c_.n_kv_heads, c_.head_dim, c_.rope_dims, pos, table, c_.rope_neox);
        std::copy_n(&k[size_t(t) * KV], KV, &kc[size_t(pos) * KV]);
        std::copy_n(&v[size_t(t) * KV], KV, &vc[size_t(pos) * KV]);
      }
      if (local) {
        for (uint32_t t = 0; t < T; ++t) {
          // Sliding layers see keys [pos - W + 1, pos] (pos_q - pos_k < W).
          const uint32_t pos = n_past + t, first = pos >= gemma_->sliding_window ? pos - gemma_->sliding_window + 1 : 0;
          ref::attention(&q[size_t(t) * Q], kc + size_t(first) * KV, vc + size_t(first) * KV, &att[size_t(t) * Q],
                         pos - first, c_.n_heads, c_.n_kv_heads, c_.head_dim, scale);
        }
      } else {
        cpu_attention(c_, kopt_, q.data(), Q, kc, vc, att.data(), Q, n_past, T, scale, chunk_);
      }
      if (gemma_) {
        gemma_block(L, att.data(), Q, x.data(), h.data(), T);
        continue;
      }
      ref::matmul(L.wo, att.data(), Q, x.data(), D, T, true);
      cpu_swiglu_ffn(c_, L.ffn_norm, L.gate, L.up, L.down, x.data(), h.data(), T);
    }
    seq.advance(T);
    if (logits) {
      cpu_logits(c_, &x[size_t(T - 1) * D], out_norm_, c_.tied_embeddings ? embed_ : lm_head_, logits);
      if (gemma_ && gemma_->final_softcap > 0)
        for (float& z : *logits) z = gemma_->final_softcap * std::tanh(z / gemma_->final_softcap);
    }
  }

 private:
  // Gemma 3 (models/gemma3.h), after attention: x += rmsnorm(Wo att) * post_attn_norm; then
  // x += rmsnorm(down(gelu_tanh(gate(h)) * up(h))) * post_ffn_norm, h = rmsnorm(x) * ffn_norm.
  void gemma_block(const Layer& L, const float* att, uint32_t Q, float* x, float* h, uint32_t T) {
    const uint32_t D = c_.d_model, F = c_.ffn_dim;
    std::vector<float> o(size_t(T) * D), g(size_t(T) * F), u(size_t(T) * F);
    auto add_normed = [&](const std::vector<float>& w) {
      for (uint32_t t = 0; t < T; ++t) {
        ref::rmsnorm(&o[size_t(t) * D], w.data(), &o[size_t(t) * D], D, c_.rms_eps);
        for (uint32_t i = 0; i < D; ++i) x[size_t(t) * D + i] += o[size_t(t) * D + i];
      }
    };
    ref::matmul(L.wo, att, Q, o.data(), D, T, false);
    add_normed(L.post_attn_norm);
    cpu_rmsnorm_rows(c_, x, L.ffn_norm, h, T);
    ref::matmul(L.gate, h, D, g.data(), F, T, false);
    ref::matmul(L.up, h, D, u.data(), F, T, false);
    for (size_t i = 0; i < g.size(); ++i) g[i] = ref::gelu_tanh(g[i]) * u[i];
    ref::matmul(L.down, g.data(), F, o.data(), D, T, false);
    add_normed(L.post_ffn_norm);
  }

  std::optional<Gemma3Params> gemma_;
  std::vector<float> rope_local_;  // gemma3 sliding layers' RoPE table
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> create_llama_cpu(const ModelSource& src, const ModelOptions& opt) {
  return std::make_unique<LlamaCpu>(src, opt);
}

}  // namespace wgllm
