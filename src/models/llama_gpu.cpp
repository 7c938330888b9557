// Llama forward pass on WebGPU: every op is a WGSL kernel (kernels/ops.h); a forward of up to
// prefill_chunk tokens is recorded into one command submission and ends with one small readback
// (4 bytes for greedy argmax, or the vocab logits).
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "gpu/context.h"
#include "kernels/rope_table.h"
#include "models/llama_cpu.h"
#include "models/llama_weights.h"
#include "models/gpu_common.h"
#include "kernels/sparse_attention.h"
#include "models/source.h"

namespace wgllm {
namespace {

using kernels::GpuWeight;
using kernels::F32Ref;
using gpu::Buffer;
using gpu::BufferKind;

struct Layer {
  Buffer attn_norm, ffn_norm;
  GpuWeight wqkv, wq, wk, wv;  // wqkv when fused, else wq/wk/wv
  GpuWeight wo, wgu, wg, wu, wd;
};

class LlamaGpu final : public GpuModel {
 public:
  LlamaGpu(const ModelSource& src, const ModelOptions& opt) : GpuModel(src.config, opt) {
    load(src);
    alloc_scratch();
  }

  std::unique_ptr<Sequence> new_sequence(uint32_t ctx) override {
    SequenceSize s;
    s.context = sequence_length(ctx);
    s.largest_buffer = uint64_t(s.context) * c_.kv_dim() * 4;
    s.kv_cache = 2ull * c_.n_layers * s.largest_buffer;
    prepare_sequence(s, &rope_, &rope_rows_);
    return create_sequence(s, [&] {
      std::vector<std::unique_ptr<LayerState>> st;
      for (uint32_t i = 0; i < c_.n_layers; ++i) st.push_back(std::make_unique<KvState>(ctx_.get(), i, s.context, c_.kv_dim()));
      return std::make_unique<Sequence>(s.context, ctx_.get(), std::move(st));
    });
  }

 private:

  // Stacks the rows of several matrices with the same type and row length (fused projections).
  GpuWeight weight(const std::vector<const TensorRef*>& parts, const std::string& label) {
    return upload_matrix(*ctx_, parts, label, mem_);
  }
  Buffer f32_buffer(const TensorRef& t, const std::string& label) {
    return upload_f32(*ctx_, dequantize_tensor(t), label, mem_);
  }
  static bool same_type(std::initializer_list<const TensorRef*> ts) {
    for (auto* t : ts)
      if (t->type != (*ts.begin())->type) return false;
    return true;
  }

  void load(const ModelSource& src) {
    LlamaRefs r = llama_refs(*src.tensors, c_, src.is_gguf());
    embed_ = weight({&r.embed}, "token_embd");
    if (!c_.tied_embeddings) lm_head_ = weight({&r.lm_head}, "output");
    out_norm_ = f32_buffer(r.out_norm, "output_norm");
    fused_qkv_ = opt_.fuse_qkv;
    fused_gu_ = opt_.fuse_gate_up;
    for (auto& L : r.layers) {
      fused_qkv_ = fused_qkv_ && same_type({&L.wq, &L.wk, &L.wv});
      fused_gu_ = fused_gu_ && same_type({&L.w_gate, &L.w_up});
    }
    for (uint32_t i = 0; i < c_.n_layers; ++i) {
      auto& R = r.layers[i];
      const std::string p = "blk." + std::to_string(i) + ".";
      Layer L;
      L.attn_norm = f32_buffer(R.attn_norm, p + "attn_norm");
      L.ffn_norm = f32_buffer(R.ffn_norm, p + "ffn_norm");
      if (fused_qkv_) {
        L.wqkv = weight({&R.wq, &R.wk, &R.wv}, p + "attn_qkv");
      } else {
        L.wq = weight({&R.wq}, p + "attn_q");
        L.wk = weight({&R.wk}, p + "attn_k");
        L.wv = weight({&R.wv}, p + "attn_v");
      }
      L.wo = weight({&R.wo}, p + "attn_output");
      if (fused_gu_) {
        L.wgu = weight({&R.w_gate, &R.w_up}, p + "ffn_gate_up");
      } else {
        L.wg = weight({&R.w_gate}, p + "ffn_gate");
        L.wu = weight({&R.w_up}, p + "ffn_up");
      }
      L.wd = weight({&R.w_down}, p + "ffn_down");
      layers_.push_back(std::move(L));
    }
    ctx_->wait_idle();  // the RoPE table is made by new_sequence(), sized by the sequence's context
  }

  void alloc_scratch() {
    const uint64_t T = chunk_;
    auto mk = [&](uint64_t floats, const char* name) {
      mem_.scratch += floats * 4;
      return Buffer(*ctx_, floats * 4, BufferKind::Storage, name);
    };
    x_ = mk(T * c_.d_model, "x");
    h_ = mk(T * c_.d_model, "h");
    qkv_ = mk(T * (c_.q_dim() + 2 * c_.kv_dim()), "qkv");
    att_ = mk(T * c_.q_dim(), "attn_out");
    gu_ = mk(T * 2 * c_.ffn_dim, "gate_up");
    act_ = mk(T * c_.ffn_dim, "ffn_act");
    logits_ = mk(c_.vocab, "logits");
    tokens_ = mk(T, "tokens");
    amax_ = mk(1, "argmax");
    attn_split_ = mk(kernels::attention_split_floats(chunk_, c_.n_heads, c_.head_dim), "attn_split");
    if (opt_.kernels.sparse_attn) {  // --sparse-attn: block means, selection and index scratch
      sparse_ = kernels::make_sparse_scratch(*ctx_, opt_.kernels, c_.max_context, chunk_, c_.n_kv_heads, c_.head_dim);
      mem_.scratch += sparse_.bytes();
    }
  }

  int32_t chunk(Sequence& seq, std::span<const int32_t> toks, HeadOut out, std::vector<float>* logits) override {
    const uint32_t T = uint32_t(toks.size()), D = c_.d_model, Q = c_.q_dim(), KV = c_.kv_dim(),
                   QKV = Q + 2 * KV, pos0 = seq.n_past();
    tokens_.write(*ctx_, 0, toks.data(), uint64_t(T) * 4);
    kernels::OpContext o{*ctx_, *pipes_, *rec_, opt_.kernels};
    rec_->begin();
    kernels::embed(o, embed_, tokens_, T, {x_, 0});
    const kernels::AttentionShape as{T, pos0, c_.n_heads, c_.n_kv_heads, c_.head_dim,
                                     1.0f / std::sqrt(float(c_.head_dim))};
    for (uint32_t l = 0; l < c_.n_layers; ++l) {
      Layer& L = layers_[l];
      KvState& kv = seq.kv(l);
      const Buffer &kc = kv.keys().buffer(), &vc = kv.values().buffer();
      if (fused_qkv_ && o.opt.fuse_qkv_rope_kv && T <= kernels::kFusedMaxTokens) {
        // Decode: norm (--fuse-norm), QKV, RoPE and the KV store in one dispatch.
        const kernels::QkvRopeKv rk{Q, KV, c_.head_dim, c_.rope_dims, pos0, c_.rope_neox, &rope_, &kc, &vc};
        if (o.opt.fuse_norm) {
          kernels::matmul_qkv_rope_kv(o, L.wqkv, {x_, 0}, D, &L.attn_norm, c_.rms_eps, {qkv_, 0}, QKV, T, rk);
        } else {
          kernels::rmsnorm(o, {x_, 0}, D, L.attn_norm, {h_, 0}, D, T, D, c_.rms_eps, "attn_norm");
          kernels::matmul_qkv_rope_kv(o, L.wqkv, {h_, 0}, D, nullptr, 0.0f, {qkv_, 0}, QKV, T, rk);
        }
      } else {
        if (fused_qkv_)
          record_norm_proj(o, c_, x_, L.attn_norm, h_, {{&L.wqkv, 0, "attn_qkv"}}, qkv_, QKV, T, "attn_norm");
        else
          record_norm_proj(o, c_, x_, L.attn_norm, h_, {{&L.wq, 0, "attn_q"}, {&L.wk, Q, "attn_k"}, {&L.wv, Q + KV, "attn_v"}},
                           qkv_, QKV, T, "attn_norm");
        record_rope_kv(o, c_, {qkv_, 0, QKV, Q, Q + KV, QKV}, T, pos0, rope_, kc, vc);
      }
      kernels::attention(o, as, {qkv_, 0}, QKV, kc, vc, {att_, 0}, Q, &attn_split_, sparse_.index ? &sparse_ : nullptr);
      kernels::matmul(o, L.wo, {att_, 0}, Q, {x_, 0}, D, T, true, "attn_output");
      record_swiglu_ffn(o, c_, {L.ffn_norm, fused_gu_ ? &L.wgu : nullptr, &L.wg, &L.wu, L.wd}, x_, h_, gu_, act_, T);
    }
    const int32_t result = finish_forward(o, c_, x_, (T - 1) * D,
                                          {out_norm_, c_.tied_embeddings ? embed_ : lm_head_, h_, logits_, amax_}, out, logits);
    seq.advance(T);
    return result;
  }

  bool fused_qkv_ = false, fused_gu_ = false;
  GpuWeight embed_, lm_head_;
  Buffer out_norm_, rope_;  // rope_: positions [0, rope_rows_) (prepare_sequence)
  uint32_t rope_rows_ = 0;
  std::vector<Layer> layers_;
  Buffer x_, h_, qkv_, att_, gu_, act_, logits_, tokens_, amax_, attn_split_;
  kernels::SparseScratch sparse_;  // allocated with --sparse-attn only
};

}  // namespace

std::unique_ptr<Model> create_llama_gpu(const ModelSource& src, const ModelOptions& opt) {
  return std::make_unique<LlamaGpu>(src, opt);
}

}  // namespace wgllm
