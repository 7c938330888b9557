// LFM2 forward pass on WebGPU: every op is a WGSL kernel (kernels/ops.h); a forward of up to
// prefill_chunk tokens is one command submission ending with one small readback (4 bytes for
// greedy argmax, or the vocab logits). Same op order as lfm2_cpu.cpp.
// Activation layout of an attention layer (chunk of T tokens): qkv_ rows [T][q | k | v] of
// q_dim + 2 kv_dim floats, written by one projection per run of q / k / v matrices of one weight
// type (ModelOptions::fuse_qkv; one for most files) or three; the
// per-head QK-norm (head_norm) and RoPE work in place, the KV store reads k and v from there,
// attention reads q with the row stride. Decode: the operator norm is the projection's prologue
// (fuse_norm) and the QK-norm runs inside the RoPE + KV-store dispatch (fuse_qk_norm).
// A conv layer: bcx_ [T, 3d] = in_proj output [B | C | x]; causal_conv -> att_ [T, d]; out_proj.
// causal_conv is one dispatch (conv + state shift) for forwards of <= 8 tokens (fuse_conv_state).
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "gpu/context.h"
#include "kernels/rope_table.h"
#include "models/lfm2.h"
#include "models/lfm2_weights.h"
#include "models/gpu_common.h"
#include "kernels/sparse_attention.h"
#include "models/source.h"

namespace wgllm {
namespace {

using gpu::Buffer;
using gpu::BufferKind;
using kernels::F32Ref;
using kernels::F32Rows;
using kernels::GpuWeight;

struct Layer {
  bool attn = false;
  Buffer attn_norm, ffn_norm;
  GpuWeight wgu, wg, wu, wd;       // wgu when gate/up are fused, else wg/wu
  std::vector<StackedPart> qkv;    // attention [q | k | v] rows: a stacked matrix per run of one type (fuse_qkv)
  GpuWeight wo;                    // attention
  Buffer q_norm, k_norm;           // attention
  GpuWeight in_proj, out_proj;     // ShortConv
  Buffer conv;                     // ShortConv [d][L] f32
};

class Lfm2Gpu final : public GpuModel {
 public:
  Lfm2Gpu(const ModelSource& src, const ModelOptions& opt) : GpuModel(src.config, opt), p_(lfm2_params(src)) {
    load(src);
    alloc_scratch();
  }

  std::unique_ptr<Sequence> new_sequence(uint32_t ctx) override {
    SequenceSize s;
    s.context = sequence_length(ctx);
    s.kv_cache = uint64_t(p_.n_attn()) * Lfm2Params::kv_bytes(c_, s.context);
    s.recurrent = uint64_t(c_.n_layers - p_.n_attn()) * p_.conv_state_bytes(c_);
    s.largest_buffer = std::max(p_.n_attn() ? Lfm2Params::kv_bytes(c_, s.context) / 2 : 0, p_.conv_state_bytes(c_));
    prepare_sequence(s, p_.n_attn() ? &rope_ : nullptr, &rope_rows_);
    return create_sequence(s, [&] { return lfm2_sequence(ctx_.get(), c_, p_, s.context); });
  }

 private:
  void load(const ModelSource& src) {
    Lfm2Refs r = lfm2_refs(*src.tensors, c_, p_, src.is_gguf());
    embed_ = weight({&r.embed}, "token_embd");
    if (!c_.tied_embeddings) lm_head_ = weight({&r.lm_head}, "output");
    out_norm_ = f32_buffer(r.out_norm, "token_embd_norm");
    fused_gu_ = opt_.fuse_gate_up;
    for (auto& L : r.layers) fused_gu_ = fused_gu_ && L.w_gate.type == L.w_up.type;
    for (uint32_t i = 0; i < c_.n_layers; ++i) {
      const Lfm2LayerRefs& R = r.layers[i];
      const std::string p = "blk." + std::to_string(i) + ".";
      Layer L;
      L.attn = p_.attn[i];
      L.attn_norm = f32_buffer(R.attn_norm, p + "attn_norm");
      L.ffn_norm = f32_buffer(R.ffn_norm, p + "ffn_norm");
      upload_ffn(R.w_gate, R.w_up, R.w_down, fused_gu_, p, L.wgu, L.wg, L.wu, L.wd);
      if (L.attn) {
        L.qkv = upload_stacked(*ctx_, {&R.wq, &R.wk, &R.wv}, {"q", "k", "v"}, opt_.fuse_qkv, "attn_", p, mem_);
        L.wo = weight({&R.wo}, p + "attn_output");
        L.q_norm = f32_buffer(R.q_norm, p + "attn_q_norm");
        L.k_norm = f32_buffer(R.k_norm, p + "attn_k_norm");
      } else {
        L.in_proj = weight({&R.in_proj}, p + "shortconv.in_proj");
        L.out_proj = weight({&R.out_proj}, p + "shortconv.out_proj");
        L.conv = f32_buffer(R.conv, p + "shortconv.conv");
      }
      layers_.push_back(std::move(L));
    }
    // The RoPE table is made by new_sequence(), sized by the sequence's context (a placeholder
    // when there is no attention layer).
    if (!p_.n_attn()) rope_ = Buffer(*ctx_, 16, BufferKind::Storage, "rope_table");
    ctx_->wait_idle();
  }

  void alloc_scratch() {
    const uint64_t D = c_.d_model, Q = c_.q_dim(), KV = c_.kv_dim(), F = c_.ffn_dim;
    alloc_chunk_buffers({{&qkv_, Q + 2 * KV, "qkv"},
                         {&att_, std::max(Q, D), "mixer_out"},
                         {&bcx_, 3 * D, "shortconv_bcx"},
                         {&gu_, 2 * F, "gate_up"},
                         {&act_, F, "ffn_act"}});
  }

  // Attention for the rows of segs (qkv_ rows [q | k | v] of S floats): operator norm and
  // projections, QK-norm over all rows; RoPE, the KV store and attention per segment.
  void attention_layer(kernels::OpContext& o, Layer& L, std::span<const BatchSeg> segs, uint32_t l, uint32_t T) {
    const uint32_t D = c_.d_model, Q = c_.q_dim(), KV = c_.kv_dim(), HD = c_.head_dim, S = Q + 2 * KV;
    record_norm_proj(o, c_, x_, L.attn_norm, h_, std::span<const StackedPart>(L.qkv), qkv_, S, T, "operator_norm");
    const QkNorm qkn{L.q_norm, L.k_norm};
    record_qk_norms(o, c_, {qkv_, 0, S, Q, Q + KV, S}, T, qkn);
    kernels::AttentionPartials parts;  // the merge left to the output projection (--fuse-attn-combine)
    const bool defer = defer_attn_combine(o, segs, L.wo, T, HD);
    for (const BatchSeg& s : segs) {
      KvState& kv = s.seq->kv(l);
      const Buffer &kc = kv.keys().buffer(), &vc = kv.values().buffer();
      const uint32_t r = s.row0 * S;
      record_qk_norm_rope_kv(o, c_, {qkv_, r, S, r + Q, r + Q + KV, S}, s.T, s.pos0, rope_, qkn, kc, vc);
      const kernels::AttentionShape as{s.T, s.pos0, c_.n_heads, c_.n_kv_heads, HD, 1.0f / std::sqrt(float(HD))};
      kernels::attention(o, as, {qkv_, r}, S, kc, vc, {att_, s.row0 * Q}, Q, &attn_split_,
                         sparse_.index ? &sparse_ : nullptr, kv.sparse_means(), defer ? &parts : nullptr);
    }
    record_attn_output(o, L.wo, parts, att_, x_, D, T, true);
  }

  // ShortConv for the rows of segs: in_proj and out_proj over all rows, the causal conv per
  // segment with its sequence's conv state.
  void conv_layer(kernels::OpContext& o, Layer& L, std::span<const BatchSeg> segs, uint32_t l, uint32_t T) {
    const uint32_t D = c_.d_model;
    record_norm_proj(o, c_, x_, L.attn_norm, h_, {{&L.in_proj, 0, "shortconv_in_proj"}}, bcx_, 3 * D, T, "operator_norm");
    for (const BatchSeg& s : segs) {
      const uint32_t r = s.row0 * 3 * D;
      kernels::causal_conv(o, {s.T, D, p_.conv_L, false}, {bcx_, r + 2 * D}, 3 * D, F32Rows{&bcx_, r, 3 * D},
                           F32Rows{&bcx_, r + D, 3 * D}, L.conv, nullptr, {s.seq->conv(l).conv_state().buffer(), 0},
                           {att_, s.row0 * D}, D, "shortconv_conv");
    }
    kernels::matmul(o, L.out_proj, {att_, 0}, D, {x_, 0}, D, T, true, "shortconv_out_proj");
  }

  // Begins the submission and records the embedding and every layer for the rows of segs.
  void record_body(kernels::OpContext& o, std::span<const BatchSeg> segs, std::span<const int32_t> toks) override {
    const uint32_t T = uint32_t(toks.size());
    begin_body(o, segs, toks);
    for (uint32_t l = 0; l < c_.n_layers; ++l) {
      Layer& L = layers_[l];
      if (L.attn)
        attention_layer(o, L, segs, l, T);
      else
        conv_layer(o, L, segs, l, T);
      record_swiglu_ffn(o, c_, {L.ffn_norm, fused_gu_ ? &L.wgu : nullptr, &L.wg, &L.wu, L.wd}, x_, h_, gu_, act_, T);
    }
  }

  Lfm2Params p_;
  bool fused_gu_ = false;
  std::vector<Layer> layers_;
  Buffer qkv_, att_, bcx_, gu_, act_;
};

}  // namespace

std::unique_ptr<Model> create_lfm2_gpu(const ModelSource& src, const ModelOptions& opt) {
  return std::make_unique<Lfm2Gpu>(src, opt);
}

}  // namespace wgllm
