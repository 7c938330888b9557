// Qwen3.5 text model on WebGPU (architecture: models/qwen35_weights.h). A forward of up to
// prefill_chunk tokens is one submission. Gated DeltaNet layers: one fused input projection
// [qkv | z | b | a], causal_conv (+SiLU, rolling state), L2 norm of q and k, gates, then the delta
// rule: gdn_step for a one-token forward, the chunkwise parallel gdn_chunked otherwise
// (KernelOptions::gdn_chunk tokens per chunk), gated RMSNorm, out_proj. A one-token forward runs
// everything between the projection and out_proj as one dispatch (gdn_decode, gdn_fuse_decode) or
// two (gdn_decode_prep + gdn_step_norm), all bit-identical to the unfused kernels. Attention layers: fused
// [q | gate | k | v] projection (q_proj rows de-interleaved at load), QK-norm, partial RoPE, KV
// cache, GQA attention, sigmoid gate, o_proj. Per sequence: KV buffers for attention layers; conv
// rows [(conv_k-1), conv_dim] and the fp32 DeltaNet state [nv, dk, dv] for linear layers.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/error.h"
#include "gpu/context.h"
#include "kernels/gdn_ops.h"
#include "kernels/rope_table.h"
#include "models/qwen35.h"
#include "models/qwen35_weights.h"
#include "models/gpu_common.h"
#include "kernels/sparse_attention.h"
#include "models/source.h"

namespace wgllm {
namespace {

using gpu::Buffer;
using gpu::BufferKind;
using kernels::GpuWeight;

struct Layer {
  bool linear = false;
  Buffer attn_norm, ffn_norm;
  GpuWeight w_in;  // attention: [q | gate | k | v]; linear: [qkv | z | b | a] (fused) ...
  std::vector<GpuWeight> w_parts;  // ... or one weight per part when types differ
  GpuWeight wo, wgu, wd;           // o_proj / out_proj, fused gate|up, down
  Buffer q_norm, k_norm;           // attention (1 + w)
  Buffer conv, a_log, dt_bias, gdn_norm;  // linear
};

struct Part {  // rows of one matrix in a fused weight
  const TensorRef* t;
  const uint8_t* data = nullptr;  // re-ordered rows, or nullptr: t's own bytes
};

class Qwen35Gpu final : public GpuModel {
 public:
  Qwen35Gpu(const ModelSource& src, const ModelOptions& opt) : GpuModel(src.config, opt), p_(qwen35_params(src)) {
    if (opt.kernels.gdn_chunk < 1 || opt.kernels.gdn_chunk > 256) throw Error("gdn_chunk must be in [1, 256]");
    load(src);
    alloc_scratch();
  }

  std::unique_ptr<Sequence> new_sequence(uint32_t ctx) override {
    SequenceSize s;
    s.context = sequence_length(ctx);
    const uint64_t kvb = uint64_t(s.context) * c_.kv_dim() * 4, conv = uint64_t(p_.conv_k - 1) * p_.conv_dim() * 4,
                   ssm = uint64_t(p_.nv) * p_.dk * p_.dv * 4;
    s.kv_cache = 2ull * n_attn_ * kvb;
    s.recurrent = uint64_t(n_lin_) * (conv + ssm);
    s.largest_buffer = std::max({n_attn_ ? kvb : 0, n_lin_ ? conv : 0, n_lin_ ? ssm : 0});
    prepare_sequence(s, &rope_, &rope_rows_);
    return create_sequence(s, [&] { return qwen35_sequence(ctx_.get(), c_, p_, s.context); });
  }

 private:

  // Stacks the rows of several matrices with one type and row length into one GPU weight.
  GpuWeight weight(const std::vector<Part>& parts, const std::string& label) {
    std::vector<RowBlock> blocks;
    for (const Part& p : parts) {
      if (p.t->type != parts[0].t->type || p.t->shape[0] != parts[0].t->shape[0]) throw Error("cannot fuse " + label);
      blocks.push_back({p.t, 0, p.t->nbytes, uint32_t(p.t->shape[1]), p.data});
    }
    return upload_rows(*ctx_, parts[0].t->type, uint32_t(parts[0].t->shape[0]), blocks, label, mem_);
  }
  // Fused when `fuse` (ModelOptions::fuse_qkv for attention layers, fuse_gdn_in for DeltaNet layers)
  // and all types match, else one weight per part.
  void in_proj(Layer& L, const std::vector<Part>& parts, const std::string& label, bool fuse) {
    bool same = fuse;
    for (const Part& p : parts) same = same && p.t->type == parts[0].t->type;
    if (same) return void(L.w_in = weight(parts, label));
    for (size_t i = 0; i < parts.size(); ++i) L.w_parts.push_back(weight({parts[i]}, label + "." + std::to_string(i)));
  }
  Buffer f32_buffer(const std::vector<float>& v, const std::string& label) { return upload_f32(*ctx_, v, label, mem_); }

  void load(const ModelSource& src) {
    Qwen35Refs r = qwen35_refs(*src.tensors, c_, p_);
    embed_ = weight({{&r.embed}}, "token_embd");
    if (!c_.tied_embeddings) lm_head_ = weight({{&r.lm_head}}, "output");
    out_norm_ = f32_buffer(qwen35_norm_weight(r.out_norm, p_), "output_norm");
    for (uint32_t i = 0; i < c_.n_layers; ++i) {
      auto& R = r.layers[i];
      const std::string p = "blk." + std::to_string(i) + ".";
      Layer L;
      L.linear = p_.linear[i];
      L.attn_norm = f32_buffer(qwen35_norm_weight(R.attn_norm, p_), p + "attn_norm");
      L.ffn_norm = f32_buffer(qwen35_norm_weight(R.ffn_norm, p_), p + "ffn_norm");
      if (L.linear) {
        ++n_lin_;
        in_proj(L, {{&R.w_qkv}, {&R.w_z}, {&R.w_b}, {&R.w_a}},
                p + "gdn_in", opt_.fuse_gdn_in);
        L.wo = weight({{&R.w_out}}, p + "gdn_out");
        L.conv = f32_buffer(dequantize_tensor(R.conv), p + "gdn_conv");
        L.a_log = f32_buffer(qwen35_a_log(R.a_log, p_), p + "gdn_a_log");
        L.dt_bias = f32_buffer(dequantize_tensor(R.dt_bias), p + "gdn_dt_bias");
        L.gdn_norm = f32_buffer(dequantize_tensor(R.gdn_norm), p + "gdn_norm");
      } else {
        ++n_attn_;
        std::vector<uint8_t> q = qwen35_deinterleave_q(R.wq, c_.n_heads, c_.head_dim);
        in_proj(L, {{&R.wq, q.data()}, {&R.wk}, {&R.wv}}, p + "attn_qgkv", opt_.fuse_qkv);
        L.wo = weight({{&R.wo}}, p + "attn_output");
        L.q_norm = f32_buffer(qwen35_norm_weight(R.q_norm, p_), p + "attn_q_norm");
        L.k_norm = f32_buffer(qwen35_norm_weight(R.k_norm, p_), p + "attn_k_norm");
      }
      if (opt_.fuse_gate_up && R.w_gate.type == R.w_up.type)
        L.wgu = weight({{&R.w_gate}, {&R.w_up}}, p + "ffn_gate_up");
      else {
        L.w_parts.push_back(weight({{&R.w_gate}}, p + "ffn_gate"));
        L.w_parts.push_back(weight({{&R.w_up}}, p + "ffn_up"));
      }
      L.wd = weight({{&R.w_down}}, p + "ffn_down");
      layers_.push_back(std::move(L));
    }
    ctx_->wait_idle();  // the RoPE table is made by new_sequence(), sized by the sequence's context
  }

  void alloc_scratch() {
    const uint32_t Q = c_.q_dim(), KV = c_.kv_dim();
    proj_stride_ = std::max(n_attn_ ? 2 * Q + 2 * KV : 0, n_lin_ ? p_.conv_dim() + p_.value_dim() + 2 * p_.nv : 0);
    proj_stride_ = (proj_stride_ + 3) / 4 * 4;
    alloc_chunk_buffers({{&proj_, proj_stride_, "proj"},
                         // attention rows: proj_stride_ (the gate's)
                         {&att_, std::max(proj_stride_, p_.value_dim()), "mixer_out"},
                         {&conv_, n_lin_ ? p_.conv_dim() : 0, "gdn_conv_out"},
                         {&gates_, n_lin_ ? 2 * p_.nv : 0, "gdn_gates"},
                         {&gu_, 2 * c_.ffn_dim, "gate_up"},
                         {&act_, c_.ffn_dim, "ffn_act"}});
    work_ = scratch(n_lin_ ? kernels::gdn_chunk_work_floats(chunk_, opt_.kernels.gdn_chunk, p_.nv, p_.dk, p_.dv) : 0,
                    "gdn_work");
  }

  // The input norm and projections of one layer's x into proj_ columns [0, ...) (fused or part
  // by part); decode: the norm is each projection's prologue (KernelOptions::fuse_norm).
  void project(kernels::OpContext& o, Layer& L, uint32_t T, const char* label) {
    std::vector<NormedProj> projs;
    if (!L.w_parts.empty() && L.w_in.N == 0) {
      uint32_t off = 0;
      const size_t n = L.linear ? 4 : 3;
      for (size_t i = 0; i < n; ++i) {
        projs.push_back({&L.w_parts[i], off, label});
        off += L.w_parts[i].N;
      }
    } else {
      projs.push_back({&L.w_in, 0, label});
    }
    record_norm_proj(o, c_, x_, L.attn_norm, h_, projs, proj_, proj_stride_, T, "attn_norm");
  }

  // Gated attention for the rows of segs: projections, head norms, gate and output over all rows;
  // RoPE, the KV store and attention per segment against its sequence's cache.
  void attention(kernels::OpContext& o, Layer& L, std::span<const BatchSeg> segs, uint32_t l, uint32_t T) {
    const uint32_t Q = c_.q_dim(), KV = c_.kv_dim(), HD = c_.head_dim, S = proj_stride_;
    project(o, L, T, "attn_qgkv");
    const QkNorm qkn{L.q_norm, L.k_norm};
    record_qk_norms(o, c_, {proj_, 0, S, 2 * Q, 2 * Q + KV, S}, T, qkn);
    for (const BatchSeg& s : segs) {
      KvState& kv = s.seq->kv(l);
      const Buffer &kc = kv.keys().buffer(), &vc = kv.values().buffer();
      const uint32_t r = s.row0 * S;
      record_qk_norm_rope_kv(o, c_, {proj_, r, S, r + 2 * Q, r + 2 * Q + KV, S}, s.T, s.pos0, rope_, qkn, kc, vc);
      kernels::attention(o, {s.T, s.pos0, c_.n_heads, c_.n_kv_heads, HD, 1.0f / std::sqrt(float(HD))}, {proj_, r}, S, kc,
                         vc, {att_, r}, S, &attn_split_, sparse_.index ? &sparse_ : nullptr, kv.sparse_means());
    }
    // att_ rows have proj_'s stride S, so the gate of att_[i] is proj_[i + Q].
    if (o.opt.fuse_attn_gate && T <= kernels::kFusedMaxTokens) {
      kernels::matmul_gate(o, L.wo, {att_, 0}, S, proj_, Q, {x_, 0}, c_.d_model, T, true, "attn_output");
      return;
    }
    kernels::sigmoid_gate(o, {att_, 0}, S, {proj_, Q}, S, T, Q);
    kernels::matmul(o, L.wo, {att_, 0}, S, {x_, 0}, c_.d_model, T, true, "attn_output");
  }

  // Gated DeltaNet for the rows of segs: input and output projections over all rows; the conv,
  // gates, delta rule and gated norm per segment with its sequence's conv and recurrent state.
  void delta_net(kernels::OpContext& o, Layer& L, std::span<const BatchSeg> segs, uint32_t l, uint32_t T) {
    const uint32_t CD = p_.conv_dim(), VD = p_.value_dim(), KD = p_.key_dim(), nv = p_.nv, S = proj_stride_;
    project(o, L, T, "gdn_in");
    const kernels::GdnPrepShape shape{p_.nk, nv, p_.dk, p_.dv, p_.conv_k, 1e-6f};
    for (const BatchSeg& sg : segs) {
      DeltaState& st = sg.seq->delta(l);
      const Buffer &conv = st.conv_state().buffer(), &ssm = st.recurrent_state().buffer();
      const uint32_t n = sg.T, P = sg.row0 * S, C0 = sg.row0 * CD, G0 = sg.row0 * 2 * nv, A0 = sg.row0 * VD;
      if (n == 1 && opt_.kernels.gdn_fuse_decode && kernels::gdn_decode_fits(shape)) {  // conv ... gated RMSNorm: one dispatch, same bits
        kernels::gdn_decode(o, {proj_, P, P + CD, P + CD + VD + nv, P + CD + VD, L.conv, conv, L.a_log, L.dt_bias,
                                L.gdn_norm, ssm, {att_, A0}, shape, 1.0f / std::sqrt(float(p_.dk)), c_.rms_eps,
                                p_.gguf_layout});
        continue;
      }
      if (n == 1 && opt_.kernels.gdn_fuse_prep) {  // conv + SiLU, q/k L2 norm, gates: one dispatch, same bits
        kernels::gdn_decode_prep(o, shape, proj_, P, P + CD + VD + nv, P + CD + VD, L.conv, conv, L.a_log, L.dt_bias,
                                 {conv_, C0}, {gates_, G0});
      } else {
        kernels::causal_conv(o, {n, CD, p_.conv_k, true}, {proj_, P}, S, {}, {}, L.conv, nullptr, {conv, 0}, {conv_, C0},
                             CD, "gdn_conv");
        kernels::l2norm_heads(o, {conv_, C0}, CD, p_.dk, n, 2 * p_.nk, p_.dk, 1e-6f, "gdn_l2norm");
        kernels::gdn_gates(o, proj_, P + CD + VD + nv, P + CD + VD, S, L.a_log, L.dt_bias, {gates_, G0}, 2 * nv, n, nv);
      }
      const kernels::GdnOperands a{conv_, C0, C0 + KD, C0 + 2 * KD, CD, gates_, G0, 2 * nv, ssm, att_, A0, VD,
                                   n, p_.nk, nv, p_.dk, p_.dv, 1.0f / std::sqrt(float(p_.dk)), p_.gguf_layout};
      if (n == 1 && opt_.kernels.gdn_fuse_norm) {  // delta-rule step + gated RMSNorm: one dispatch, same bits
        kernels::gdn_step_norm(o, a, {proj_, P + CD}, L.gdn_norm, c_.rms_eps);
      } else {
        if (n == 1)
          kernels::gdn_step(o, a);
        else
          kernels::gdn_chunked(o, a, work_);
        kernels::gated_rmsnorm(o, {att_, A0}, VD, {proj_, P + CD}, S, L.gdn_norm, n, nv, p_.dv, c_.rms_eps);
      }
    }
    kernels::matmul(o, L.wo, {att_, 0}, VD, {x_, 0}, c_.d_model, T, true, "gdn_out");
  }

  // Begins the submission and records the embedding and every layer for the rows of segs.
  void record_body(kernels::OpContext& o, std::span<const BatchSeg> segs, std::span<const int32_t> toks) override {
    const uint32_t T = uint32_t(toks.size());
    begin_body(o, segs, toks);
    for (uint32_t l = 0; l < c_.n_layers; ++l) {
      Layer& L = layers_[l];
      if (L.linear)
        delta_net(o, L, segs, l, T);
      else
        attention(o, L, segs, l, T);
      const bool fused = L.wgu.N != 0;
      const size_t g = fused ? 0 : L.w_parts.size() - 2;
      record_swiglu_ffn(o, c_, {L.ffn_norm, fused ? &L.wgu : nullptr, fused ? nullptr : &L.w_parts[g],
                                fused ? nullptr : &L.w_parts[g + 1], L.wd}, x_, h_, gu_, act_, T);
    }
  }

  uint32_t batch_dispatches_per_seq_layer() const override { return 8; }

  Qwen35Params p_;
  uint32_t proj_stride_ = 0, n_attn_ = 0, n_lin_ = 0;
  std::vector<Layer> layers_;
  Buffer proj_, att_, conv_, gates_, work_, gu_, act_;
};

}  // namespace

std::unique_ptr<Model> create_qwen35_gpu(const ModelSource& src, const ModelOptions& opt) {
  return std::make_unique<Qwen35Gpu>(src, opt);
}

}  // namespace wgllm
