// GpuModel's block interface (gpu_common.h): the weights and layers an architecture written over
// it uses (models/lfm2.cpp), each block recorded with the kernels of kernels/ops.h and the shared
// recording helpers of gpu_common. Twin: the same blocks of CpuModel (cpu_common.cpp). No
// try/catch here: the browser build compiles this file without exception landing pads
// (web/wasm/CMakeLists.txt), as the other files of the decode path.
#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "kernels/gdn_ops.h"
#include "kernels/ops.h"
#include "models/gpu_common.h"
#include "models/state.h"

namespace wgllm {

void GpuModel::record_body(kernels::OpContext& o, std::span<const BatchSeg> segs, std::span<const int32_t> toks) {
  begin_body(o, segs, toks);
  Pass p{o, segs, uint32_t(toks.size())};
  body(p);
}

void GpuModel::body(Pass&) { throw Error("GpuModel::body: this architecture implements record_body() itself"); }

GpuModel::Ffn GpuModel::ffn_weights(const TensorRef& gate, const TensorRef& up, const TensorRef& down,
                                    const std::string& prefix) {
  Ffn f;
  f.fused = opt_.fuse_gate_up && gate.type == up.type;
  upload_ffn(gate, up, down, f.fused, prefix, f.gate_up, f.gate, f.up, f.down);
  return f;
}

GpuModel::Vector GpuModel::vector(const std::vector<float>& v, const std::string& label) {
  return upload_f32(*ctx_, v, label, mem_);
}

GpuModel::Attention GpuModel::attention_weights(const TensorRef& wq, const TensorRef& wk, const TensorRef& wv,
                                                const TensorRef& wo, const std::vector<float>* q_norm,
                                                const std::vector<float>* k_norm, const std::string& prefix, bool gate) {
  if (!q_norm != !k_norm) throw Error("attention_weights: a QK-norm needs both the q and the k weight");
  Attention a;
  a.qkv = upload_stacked(*ctx_, {&wq, &wk, &wv}, {gate ? "qg" : "q", "k", "v"}, opt_.fuse_qkv, "attn_", prefix, mem_);
  a.wo = weight({&wo}, prefix + "attn_output");
  a.qk_norm = q_norm != nullptr;
  a.gate = gate;
  if (q_norm) {
    a.q_norm = vector(*q_norm, prefix + "attn_q_norm");
    a.k_norm = vector(*k_norm, prefix + "attn_k_norm");
  }
  return a;
}

GpuModel::ShortConv GpuModel::short_conv_weights(const TensorRef& in_proj, const TensorRef& conv,
                                                 const TensorRef& out_proj, uint32_t L, const std::string& prefix) {
  return {weight({&in_proj}, prefix + "shortconv.in_proj"), weight({&out_proj}, prefix + "shortconv.out_proj"),
          f32_buffer(conv, prefix + "shortconv.conv"), L};
}

void GpuModel::swiglu_ffn(Pass& p, const Vector& norm, const Ffn& w) {
  record_swiglu_ffn(p.o, c_, {norm, w.fused ? &w.gate_up : nullptr, &w.gate, &w.up, w.down}, x_, h_, gu_, act_, p.T);
}

void GpuModel::attention(Pass& p, uint32_t layer, const Vector& norm, const Attention& w) {
  kernels::OpContext& o = p.o;
  const uint32_t D = c_.d_model, Q = c_.q_dim(), KV = c_.kv_dim(), HD = c_.head_dim, T = p.T;
  const uint32_t QR = w.gate ? 2 * Q : Q, S = attention_stride(c_, w.gate);  // q (| gate) rows, projection row stride
  const uint32_t AS = w.gate ? S : Q;  // att_ row stride: with a gate, proj_'s (the gate of att_[i] is proj_[i + Q])
  record_norm_proj(o, c_, x_, norm, h_, std::span<const StackedPart>(w.qkv), proj_, S, T, norm_label_);
  const QkNorm qkn{w.q_norm, w.k_norm};
  if (w.qk_norm) record_qk_norms(o, c_, {proj_, 0, S, QR, QR + KV, S}, T, qkn);
  kernels::AttentionPartials parts;  // the merge left to the output projection (--fuse-attn-combine)
  const bool defer = !w.gate && defer_attn_combine(o, p.segs, w.wo, T, HD);
  for (const BatchSeg& s : p.segs) {
    KvState& kv = s.seq->kv(layer);
    const gpu::Buffer &kc = kv.keys().buffer(), &vc = kv.values().buffer();
    const uint32_t r = s.row0 * S;
    const QkvRows rows{proj_, r, S, r + QR, r + QR + KV, S};
    if (w.qk_norm) record_qk_norm_rope_kv(o, c_, rows, s.T, s.pos0, rope_, qkn, kc, vc);
    else record_rope_kv(o, c_, rows, s.T, s.pos0, rope_, kc, vc);
    const kernels::AttentionShape as{s.T, s.pos0, c_.n_heads, c_.n_kv_heads, HD, 1.0f / std::sqrt(float(HD))};
    kernels::attention(o, as, {proj_, r}, S, kc, vc, {att_, s.row0 * AS}, AS, &attn_split_,
                       sparse_.index ? &sparse_ : nullptr, kv.sparse_means(), defer ? &parts : nullptr);
  }
  if (!w.gate) return record_attn_output(o, w.wo, parts, att_, x_, D, T, true);
  if (o.opt.fuse_attn_gate && T <= kernels::kFusedMaxTokens)
    return kernels::matmul_gate(o, w.wo, {att_, 0}, S, proj_, Q, {x_, 0}, D, T, true, "attn_output");
  kernels::sigmoid_gate(o, {att_, 0}, S, {proj_, Q}, S, T, Q);
  kernels::matmul(o, w.wo, {att_, 0}, S, {x_, 0}, D, T, true, "attn_output");
}

void GpuModel::short_conv(Pass& p, uint32_t layer, const Vector& norm, const ShortConv& w) {
  kernels::OpContext& o = p.o;
  const uint32_t D = c_.d_model;
  record_norm_proj(o, c_, x_, norm, h_, {{&w.in_proj, 0, "shortconv_in_proj"}}, proj_, 3 * D, p.T, norm_label_);
  for (const BatchSeg& s : p.segs) {
    const uint32_t r = s.row0 * 3 * D;
    kernels::causal_conv(o, {s.T, D, w.L, false}, {proj_, r + 2 * D}, 3 * D, kernels::F32Rows{&proj_, r, 3 * D},
                         kernels::F32Rows{&proj_, r + D, 3 * D}, w.conv, nullptr,
                         {s.seq->conv(layer).conv_state().buffer(), 0}, {att_, s.row0 * D}, D, "shortconv_conv");
  }
  kernels::matmul(o, w.out_proj, {att_, 0}, D, {x_, 0}, D, p.T, true, "shortconv_out_proj");
}

GpuModel::DeltaNet GpuModel::delta_net_weights(const TensorRef& w_qkv, const TensorRef& w_z, const TensorRef& w_b,
                                                const TensorRef& w_a, const TensorRef& w_out, const TensorRef& conv,
                                                const std::vector<float>& a_log, const TensorRef& dt_bias,
                                                const TensorRef& norm, const DeltaNetShape& s, const std::string& prefix) {
  DeltaNet d;
  seq_layer_dispatches_ = std::max<uint32_t>(seq_layer_dispatches_, 8);  // see batch_dispatches_per_seq_layer()
  const std::vector<const TensorRef*> in{&w_qkv, &w_z, &w_b, &w_a};
  bool same = opt_.fuse_gdn_in;
  for (const TensorRef* t : in) same = same && t->type == w_qkv.type;
  if (same) {
    d.in.push_back({weight(in, prefix + "gdn_in"), 0, "gdn_in"});
  } else {  // one weight per part when the types differ (or --no-fuse-gdn-in)
    uint32_t row0 = 0;
    for (size_t i = 0; i < in.size(); ++i) {
      d.in.push_back({weight({in[i]}, prefix + "gdn_in." + std::to_string(i)), row0, "gdn_in"});
      row0 += d.in.back().w.N;
    }
  }
  d.w_out = weight({&w_out}, prefix + "gdn_out");
  d.conv = f32_buffer(conv, prefix + "gdn_conv");
  d.a_log = vector(a_log, prefix + "gdn_a_log");
  d.dt_bias = f32_buffer(dt_bias, prefix + "gdn_dt_bias");
  d.norm = f32_buffer(norm, prefix + "gdn_norm");
  d.s = s;
  return d;
}

void GpuModel::alloc_delta_net_scratch(const DeltaNetShape& s) {
  gdn_work_ = scratch(kernels::gdn_chunk_work_floats(chunk_, opt_.kernels.gdn_chunk, s.nv, s.dk, s.dv), "gdn_work");
}

void GpuModel::delta_net(Pass& p, uint32_t layer, const Vector& norm, const DeltaNet& w) {
  kernels::OpContext& o = p.o;
  const DeltaNetShape& sh = w.s;
  const uint32_t CD = sh.conv_dim(), VD = sh.value_dim(), KD = sh.key_dim(), nv = sh.nv, S = delta_net_stride(sh);
  const float scale = 1.0f / std::sqrt(float(sh.dk));
  record_norm_proj(o, c_, x_, norm, h_, std::span<const StackedPart>(w.in), proj_, S, p.T, norm_label_);
  const kernels::GdnPrepShape shape{sh.nk, nv, sh.dk, sh.dv, sh.conv_k, 1e-6f};
  for (const BatchSeg& sg : p.segs) {
    DeltaState& st = sg.seq->delta(layer);
    const gpu::Buffer &conv = st.conv_state().buffer(), &ssm = st.recurrent_state().buffer();
    const uint32_t n = sg.T, P = sg.row0 * S, C0 = sg.row0 * CD, G0 = sg.row0 * 2 * nv, A0 = sg.row0 * VD;
    if (n == 1 && o.opt.gdn_fuse_decode && kernels::gdn_decode_fits(shape)) {  // conv ... gated RMSNorm: one dispatch, same bits
      kernels::gdn_decode(o, {proj_, P, P + CD, P + CD + VD + nv, P + CD + VD, w.conv, conv, w.a_log, w.dt_bias, w.norm,
                              ssm, {att_, A0}, shape, scale, c_.rms_eps, sh.tiled_v_heads});
      continue;
    }
    if (n == 1 && o.opt.gdn_fuse_prep) {  // conv + SiLU, q/k L2 norm, gates: one dispatch, same bits
      kernels::gdn_decode_prep(o, shape, proj_, P, P + CD + VD + nv, P + CD + VD, w.conv, conv, w.a_log, w.dt_bias,
                               {gdn_conv_, C0}, {gdn_gates_, G0});
    } else {
      kernels::causal_conv(o, {n, CD, sh.conv_k, true}, {proj_, P}, S, {}, {}, w.conv, nullptr, {conv, 0},
                           {gdn_conv_, C0}, CD, "gdn_conv");
      kernels::l2norm_heads(o, {gdn_conv_, C0}, CD, sh.dk, n, 2 * sh.nk, sh.dk, 1e-6f, "gdn_l2norm");
      kernels::gdn_gates(o, proj_, P + CD + VD + nv, P + CD + VD, S, w.a_log, w.dt_bias, {gdn_gates_, G0}, 2 * nv, n, nv);
    }
    const kernels::GdnOperands a{gdn_conv_, C0, C0 + KD, C0 + 2 * KD, CD, gdn_gates_, G0, 2 * nv, ssm, att_, A0, VD,
                                 n, sh.nk, nv, sh.dk, sh.dv, scale, sh.tiled_v_heads};
    if (n == 1 && o.opt.gdn_fuse_norm) {  // delta-rule step + gated RMSNorm: one dispatch, same bits
      kernels::gdn_step_norm(o, a, {proj_, P + CD}, w.norm, c_.rms_eps);
    } else {
      if (n == 1) kernels::gdn_step(o, a);
      else kernels::gdn_chunked(o, a, gdn_work_);
      kernels::gated_rmsnorm(o, {att_, A0}, VD, {proj_, P + CD}, S, w.norm, n, nv, sh.dv, c_.rms_eps);
    }
  }
  kernels::matmul(o, w.w_out, {att_, 0}, VD, {x_, 0}, c_.d_model, p.T, true, "gdn_out");
}

}  // namespace wgllm
