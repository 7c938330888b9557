// GpuModel's block interface (gpu_common.h): the weights and layers the architectures written over
// it use (models/llama.cpp, lfm2.cpp, qwen35.cpp), each block recorded with the kernels of kernels/ops.h and the shared
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


GpuModel::Ffn GpuModel::ffn_weights(const TensorRef& gate, const TensorRef& up, const TensorRef& down,
                                    const std::string& prefix, const FfnOptions& opt) {
  Ffn f;
  f.fused = opt_.fuse_gate_up && gate.type == up.type;
  upload_ffn(gate, up, down, f.fused, prefix, f.gate_up, f.gate, f.up, f.down);
  f.gelu_tanh = opt.gelu_tanh;
  if (opt.post_norm) {
    f.post_norm = f32_buffer(*opt.post_norm, prefix + "post_ffw_norm");
    f.post_normed = post_norms_ = true;
  }
  return f;
}

GpuModel::Vector GpuModel::vector(const std::vector<float>& v, const std::string& label) {
  return upload_f32(*ctx_, v, label, mem_);
}

GpuModel::Attention GpuModel::attention_weights(const AttentionTensors& t, const std::string& prefix) {
  if (!t.q_norm != !t.k_norm) throw Error("attention_weights: a QK-norm needs both the q and the k weight");
  if (!t.bq != !t.bk || !t.bq != !t.bv) throw Error("attention_weights: Q/K/V biases come as all three or none");
  if (t.bq && t.gate) throw Error("attention_weights: Q/K/V biases with an output gate are not supported on WebGPU");
  Attention a;
  a.qkv = upload_stacked(*ctx_, {t.wq, t.wk, t.wv}, {t.gate ? "qg" : "q", "k", "v"}, opt_.fuse_qkv, "attn_", prefix, mem_,
                         opt_.q6k_packed);
  a.wo = weight({t.wo}, prefix + "attn_output");
  a.qk_norm = t.q_norm != nullptr;
  a.gate = t.gate;
  if (t.q_norm) {
    a.q_norm = vector(*t.q_norm, prefix + "attn_q_norm");
    a.k_norm = vector(*t.k_norm, prefix + "attn_k_norm");
  }
  if (t.bq) {
    std::vector<float> b = dequantize_tensor(*t.bq), bk = dequantize_tensor(*t.bk), bv = dequantize_tensor(*t.bv);
    b.insert(b.end(), bk.begin(), bk.end());
    b.insert(b.end(), bv.begin(), bv.end());
    a.bqkv = upload_f32(*ctx_, b, prefix + "attn_qkv.bias", mem_);
    a.biased = true;
  }
  if (t.post_norm) {
    a.post_norm = f32_buffer(*t.post_norm, prefix + "post_attention_norm");
    a.post_normed = post_norms_ = true;
  }
  a.window = t.window;
  a.scale = t.scale;
  a.local_rope = t.local_rope;
  return a;
}

GpuModel::ShortConv GpuModel::short_conv_weights(const TensorRef& in_proj, const TensorRef& conv,
                                                 const TensorRef& out_proj, uint32_t L, const std::string& prefix) {
  return {weight({&in_proj}, prefix + "shortconv.in_proj"), weight({&out_proj}, prefix + "shortconv.out_proj"),
          f32_buffer(conv, prefix + "shortconv.conv"), L};
}

void GpuModel::scale(Pass& p, float s) { kernels::scale(p.o, {x_, 0}, p.T * c_.d_model, s, "embed_scale"); }

namespace {

// x += rmsnorm(o) * post_norm for T rows (h: scratch; labels `norm_label` and `add_label`).
void add_post_normed(kernels::OpContext& o, const ModelConfig& c, const gpu::Buffer& y, const gpu::Buffer& post_norm,
                     const gpu::Buffer& h, const gpu::Buffer& x, uint32_t T, const char* norm_label,
                     const char* add_label) {
  const uint32_t D = c.d_model;
  kernels::rmsnorm(o, {y, 0}, D, post_norm, {h, 0}, D, T, D, c.rms_eps, norm_label);
  kernels::add_bias(o, h, T * D, {x, 0}, 0, 1, add_label);
}

}  // namespace

void GpuModel::gated_ffn(Pass& p, const Vector& norm, const Ffn& w) {
  kernels::OpContext& o = p.o;
  const uint32_t D = c_.d_model, F = c_.ffn_dim, T = p.T;
  if (!w.gelu_tanh && !w.post_normed)
    return record_swiglu_ffn(o, c_, {norm, w.fused ? &w.gate_up : nullptr, &w.gate, &w.up, w.down}, x_, h_, gu_, act_, T);
  kernels::rmsnorm(o, {x_, 0}, D, norm, {h_, 0}, D, T, D, c_.rms_eps, "ffn_norm");
  if (w.fused) {
    kernels::matmul(o, w.gate_up, {h_, 0}, D, {gu_, 0}, 2 * F, T, false, "ffn_gate_up");
  } else {
    kernels::matmul(o, w.gate, {h_, 0}, D, {gu_, 0}, 2 * F, T, false, "ffn_gate");
    kernels::matmul(o, w.up, {h_, 0}, D, {gu_, F}, 2 * F, T, false, "ffn_up");
  }
  if (w.gelu_tanh) kernels::gelu_mul(o, gu_, 0, F, 2 * F, T, F, {act_, 0});
  else kernels::silu_mul(o, gu_, 0, F, 2 * F, T, F, {act_, 0});
  if (!w.post_normed) return kernels::matmul(o, w.down, {act_, 0}, F, {x_, 0}, D, T, true, "ffn_down");
  kernels::matmul(o, w.down, {act_, 0}, F, {o_, 0}, D, T, false, "ffn_down");
  add_post_normed(o, c_, o_, w.post_norm, h_, x_, T, "post_ffw_norm", "ffn_residual");
}

void GpuModel::attention(Pass& p, uint32_t layer, const Vector& norm, const Attention& w) {
  kernels::OpContext& o = p.o;
  const uint32_t D = c_.d_model, Q = c_.q_dim(), KV = c_.kv_dim(), HD = c_.head_dim, T = p.T;
  const uint32_t QR = w.gate ? 2 * Q : Q, S = attention_stride(c_, w.gate);  // q (| gate) rows, projection row stride
  const uint32_t AS = w.gate ? S : Q;  // att_ row stride: with a gate, proj_'s (the gate of att_[i] is proj_[i + Q])
  const gpu::Buffer& table = w.local_rope ? rope_local_ : rope_;
  if (!plan_.groups.empty() && (w.gate || w.qk_norm || w.window || w.local_rope))
    throw Error("GpuModel::attention: KV-pool batching (pool_batching_) planned for a layer with a gate, QK-norm, "
                "window or local RoPE, which its launches do not have");
  const float scale = w.scale > 0 ? w.scale : 1.0f / std::sqrt(float(HD));
  // --fused-decode: a one-token step's QK-norm, RoPE and KV store done by the attention launch.
  kernels::AttentionShape as1{1, p.segs[0].pos0, c_.n_heads, c_.n_kv_heads, HD, scale};
  as1.window = w.window;
  const bool fused = o.opt.fused_decode && w.qk_norm && p.segs.size() == 1 && T == 1 && plan_.groups.empty() &&
                     kernels::attention_decode_applies(o, as1) &&
                     !(sparse_.index && kernels::sparse_attention_used(o.opt, as1));
  if (p.segs.size() == 1 && !w.gate && !w.qk_norm && o.opt.fuse_qkv_rope_kv && T <= kernels::kFusedMaxTokens) {
    // Decode: norm (--fuse-norm), QKV (one dispatch per part of one weight type, or one for two
    // parts with --fuse-qkv-formats), the biases, RoPE and the KV store in the same dispatch.
    KvState& kv = p.segs[0].seq->kv(layer);
    kernels::QkvRopeKv rk{Q, KV, HD, c_.rope_dims, p.segs[0].pos0, c_.rope_neox, &table,
                          kv.keys().binding(), kv.values().binding()};
    rk.bias = w.biased ? &w.bqkv : nullptr;
    const NormedInput in = normed_input(o, norm, T);
    if (w.qkv.size() == 2 && kernels::matmul_qkv_formats_applies(o, w.qkv[0].w, w.qkv[1].w, T)) {
      // --fuse-qkv-formats: both parts (e.g. [q | k] Q4_K and [v] Q6_K) in one launch.
      rk.row0 = w.qkv[0].row0;
      kernels::matmul_qkv_rope_kv(o, w.qkv[0].w, w.qkv[1].w, {in.x, 0}, D, in.norm, c_.rms_eps, {proj_, rk.row0}, S, T,
                                  rk, "attn_qkv");
    } else {
      for (const StackedPart& part : w.qkv) {
        rk.row0 = part.row0;
        kernels::matmul_qkv_rope_kv(o, part.w, {in.x, 0}, D, in.norm, c_.rms_eps, {proj_, part.row0}, S, T, rk,
                                    part.label.c_str());
      }
    }
  } else {
    record_norm_proj(o, c_, x_, norm, h_, std::span<const StackedPart>(w.qkv), proj_, S, T, norm_label_);
    if (w.biased) kernels::add_bias(o, w.bqkv, S, {proj_, 0}, S, T, "attn_qkv_bias");
    const QkNorm qkn{w.q_norm, w.k_norm};
    if (w.qk_norm && !fused) record_qk_norms(o, c_, {proj_, 0, S, QR, QR + KV, S}, T, qkn);
    for (const PoolGroup& g : plan_.groups) {
      if (!g.rope_n) continue;
      KvState& kv = p.segs[g.first].seq->kv(layer);  // the whole pool buffers
      kernels::rope_kv_store_rows(o, proj_, 0, S, Q, Q + KV, S, c_.n_heads, c_.n_kv_heads, HD, c_.rope_dims, rope_,
                                  c_.rope_neox, kv.keys().buffer(), kv.values().buffer(), batch_tab_, g.rope_off, g.rope_n);
    }
    for (size_t i = 0; i < p.segs.size(); ++i) {
      if (plan_.rope_done[i]) continue;
      const BatchSeg& s = p.segs[i];
      KvState& kv = s.seq->kv(layer);
      const uint32_t r = s.row0 * S;
      const QkvRows rows{proj_, r, S, r + QR, r + QR + KV, S};
      if (fused) continue;  // the attention launch below does it
      if (w.qk_norm) record_qk_norm_rope_kv(o, c_, rows, s.T, s.pos0, table, qkn, kv.keys().binding(), kv.values().binding());
      else record_rope_kv(o, c_, rows, s.T, s.pos0, table, kv.keys().binding(), kv.values().binding());
    }
  }
  kernels::AttentionPartials parts;  // the merge left to the output projection (--fuse-attn-combine)
  const bool defer = !w.gate && defer_attn_combine(o, p.segs, w.wo, T, HD);
  for (const PoolGroup& g : plan_.groups) {
    if (!g.attn_n) continue;
    KvState& kv = p.segs[g.first].seq->kv(layer);  // the whole pool buffers
    const kernels::AttentionShape as{1, 0, c_.n_heads, c_.n_kv_heads, HD, scale};
    kernels::attention_decode_batch(o, as, {proj_, 0}, S, kv.keys().buffer(), kv.values().buffer(), {att_, 0}, AS,
                                    batch_tab_, g.attn_off, g.attn_n, g.max_split, g.keys, &batch_split_);
  }
  if (fused) {
    KvState& kv = p.segs[0].seq->kv(layer);
    const kernels::DecodeQkNorm n{&proj_, 0, QR, QR + KV, &w.q_norm, &w.k_norm, &table, c_.rope_dims, c_.rope_neox, c_.rms_eps};
    kernels::attention_decode_qk_norm(o, as1, n, kv.keys().binding(), kv.values().binding(), {att_, 0}, AS, &attn_split_,
                                      kv.sparse_means(), defer ? &parts : nullptr);
  }
  for (size_t i = 0; i < p.segs.size() && !fused; ++i) {
    if (plan_.attn_done[i]) continue;
    const BatchSeg& s = p.segs[i];
    KvState& kv = s.seq->kv(layer);
    kernels::AttentionShape as{s.T, s.pos0, c_.n_heads, c_.n_kv_heads, HD, scale};
    as.window = w.window;  // sliding layers: keys pos_q - pos_k < W only
    kernels::attention(o, as, {proj_, s.row0 * S}, S, kv.keys().binding(), kv.values().binding(), {att_, s.row0 * AS}, AS,
                       &attn_split_, sparse_.index ? &sparse_ : nullptr, kv.sparse_means(), defer ? &parts : nullptr);
  }
  if (w.post_normed) {
    record_attn_output(o, w.wo, parts, att_, o_, D, T, false);
    return add_post_normed(o, c_, o_, w.post_norm, h_, x_, T, "post_attention_norm", "attn_residual");
  }
  if (!w.gate) return record_attn_output(o, w.wo, parts, att_, x_, D, T, true);
  if (o.opt.fuse_attn_gate && T <= kernels::kFusedMaxTokens)
    return kernels::matmul_gate(o, w.wo, {att_, 0}, S, proj_, Q, {x_, 0}, D, T, true, "attn_output");
  kernels::sigmoid_gate(o, {att_, 0}, S, {proj_, Q}, S, T, Q);
  kernels::matmul(o, w.wo, {att_, 0}, S, {x_, 0}, D, T, true, "attn_output");
}

GpuModel::NormedInput GpuModel::normed_input(kernels::OpContext& o, const Vector& norm, uint32_t T) {
  if (o.opt.fuse_norm) return {x_, &norm};
  const uint32_t D = c_.d_model;
  kernels::rmsnorm(o, {x_, 0}, D, norm, {h_, 0}, D, T, D, c_.rms_eps, norm_label_);
  return {h_, nullptr};
}

void GpuModel::short_conv(Pass& p, uint32_t layer, const Vector& norm, const ShortConv& w) {
  kernels::OpContext& o = p.o;
  const uint32_t D = c_.d_model;
  if (p.segs.size() == 1 && kernels::matmul_conv_in_applies(o, w.in_proj, p.T)) {  // --fuse-conv-in: the conv in the epilogue
    const NormedInput in = normed_input(o, norm, p.T);
    const kernels::ConvIn ci{D, w.L, &w.conv, gpu::Binding(p.segs[0].seq->conv(layer).conv_state().buffer()), 0};
    kernels::matmul_conv_in(o, w.in_proj, {in.x, 0}, in.norm, c_.rms_eps, {att_, 0}, ci);
    return kernels::matmul(o, w.out_proj, {att_, 0}, D, {x_, 0}, D, p.T, true, "shortconv_out_proj");
  }
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
  gdn_work_ = scratch(kernels::gdn_chunk_work_floats_max(opt_.kernels, chunk_, s.nv, s.dk, s.dv), "gdn_work");
  gdn_dk_ = s.dk;
  gdn_dv_ = s.dv;
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
    if (n == 1 && o.opt.gdn_fuse_decode && kernels::gdn_decode_fits(shape)) {  // conv ... gated RMSNorm: one dispatch (same bits at row split 1)
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

// ---- Per step, outside the blocks (here for the browser build's no-landing-pad compile) ----

void GpuModel::begin_body(kernels::OpContext& o, std::span<const BatchSeg> segs, std::span<const int32_t> toks) {
  const uint32_t T = uint32_t(toks.size());
  plan_ = plan_batch(o, segs);
  const gpu::Buffer& ids = token_ids(tokens_, amax_, toks, segs.size() > 1);
  rec_->begin();
  for (const HeadPart& part : embed_parts_of_) kernels::embed(o, *part.w, ids, T, {x_, 0}, part.row0);
}

int32_t GpuModel::finish_split_head(kernels::OpContext& o, uint32_t last_row, HeadOut out, std::vector<float>* logits) {
  if (out == HeadOut::None) {
    o.rec.submit();
    return -1;
  }
  const uint32_t D = c_.d_model;
  if (out == HeadOut::Nll) {
    record_nll_head(o, x_, last_row / D + 1, out_norm_, head_parts_of_);
    return -1;
  }
  kernels::rmsnorm(o, {x_, last_row}, D, out_norm_, {h_, 0}, D, 1, D, c_.rms_eps, "output_norm");
  for (const RowBlockWeight& b : head_blocks_)
    kernels::matmul(o, b.w, {h_, 0}, D, {logits_, b.row0}, c_.vocab, 1, false, "output", gpu::Traffic::Logits);
  if (out == HeadOut::Argmax || out == HeadOut::ArgmaxAsync) {
    kernels::argmax(o, {logits_, 0}, c_.vocab, amax_);
    return submit_argmax(o, amax_, out);
  }
  logits->resize(c_.vocab);
  o.rec.read_after(logits_, 0, uint64_t(c_.vocab) * 4);
  o.rec.submit(logits->data());
  return -1;
}

GpuModel::BatchPlan GpuModel::plan_batch(const kernels::OpContext& o, std::span<const BatchSeg> segs) {
  BatchPlan plan;
  plan.rope_done.assign(segs.size(), false);
  plan.attn_done.assign(segs.size(), false);
  const bool rope = o.opt.batch_rope_kv && o.opt.fuse_rope_kv;
  const kernels::AttentionShape one{1, 0, c_.n_heads, c_.n_kv_heads, c_.head_dim, 1.0f};
  const bool attn = o.opt.batch_decode_attn && !sparse_.index && kernels::attention_decode_applies(o, one);
  if (segs.size() < 2 || !kv_pools_ || !pool_batching_ || !(rope || attn)) return plan;
  // A segment joins the group of the first earlier one whose every layer's views share its pools.
  auto same_pools = [&](const BatchSeg& a, const BatchSeg& b) {
    for (uint32_t l = 0; l < c_.n_layers; ++l)
      if (&a.seq->kv(l).keys().buffer() != &b.seq->kv(l).keys().buffer() ||
          &a.seq->kv(l).values().buffer() != &b.seq->kv(l).values().buffer())
        return false;
    return true;
  };
  auto pooled = [&](const BatchSeg& a) {
    const uint64_t base = a.seq->kv(0).base_row();
    for (uint32_t l = 0; l < c_.n_layers; ++l) {
      KvState& kv = a.seq->kv(l);
      if (!kv.keys().pooled() || !kv.values().pooled() || kv.base_row() != base || kv.values().offset() != kv.keys().offset())
        return false;
    }
    return true;
  };
  std::vector<std::vector<uint32_t>> members;
  for (uint32_t i = 0; i < segs.size(); ++i) {
    if (!pooled(segs[i])) continue;
    bool placed = false;
    for (auto& m : members)
      if (same_pools(segs[m[0]], segs[i])) {
        m.push_back(i);
        placed = true;
        break;
      }
    if (!placed) members.push_back({i});
  }
  std::vector<uint32_t> tab;  // vec4<u32> entries
  auto entry = [&](uint32_t a, uint32_t b, uint32_t c, uint32_t d) { tab.insert(tab.end(), {a, b, c, d}); };
  for (const auto& m : members) {
    if (m.size() < 2) continue;
    PoolGroup g;
    g.first = m[0];
    if (rope) {
      g.rope_off = uint32_t(tab.size() / 4);
      for (uint32_t i : m) {
        const BatchSeg& sg = segs[i];
        const uint32_t base = uint32_t(sg.seq->kv(0).base_row());
        for (uint32_t t = 0; t < sg.T; ++t) entry(sg.row0 + t, sg.pos0 + t, base + sg.pos0 + t, 0);
        plan.rope_done[i] = true;
      }
      g.rope_n = uint32_t(tab.size() / 4) - g.rope_off;
    }
    if (attn) {
      std::vector<uint32_t> dec;
      for (uint32_t i : m)
        if (segs[i].T == 1) dec.push_back(i);
      if (dec.size() >= 2) {
        g.attn_off = uint32_t(tab.size() / 4);
        for (uint32_t i : dec) {
          const BatchSeg& sg = segs[i];
          kernels::AttentionShape as = one;
          as.pos0 = sg.pos0;
          const kernels::DecodeSplit d = kernels::attention_decode_split(o, as, &attn_split_);
          entry(sg.row0, sg.pos0, uint32_t(sg.seq->kv(0).base_row()), d.n_split > 1 ? d.split_len : sg.pos0 + 1);
          g.max_split = std::max(g.max_split, d.n_split);
          g.keys += sg.pos0 + 1;
          plan.attn_done[i] = true;
        }
        g.attn_n = uint32_t(dec.size());
      }
    }
    plan.groups.push_back(g);
  }
  if (tab.empty()) return plan;
  const uint64_t tab_bytes = tab.size() * 4;
  if (batch_tab_.size() < tab_bytes) {
    mem_.scratch += tab_bytes * 2 - batch_tab_.size();
    batch_tab_ = gpu::Buffer(*ctx_, tab_bytes * 2, gpu::BufferKind::Storage, "batch_rows");
  }
  batch_tab_.write(*ctx_, 0, tab.data(), tab_bytes);
  uint64_t part = 0;
  for (const PoolGroup& g : plan.groups)
    if (g.max_split > 1) part = std::max<uint64_t>(part, 4ull * g.attn_n * c_.n_heads * g.max_split * (c_.head_dim + 2));
  if (batch_split_.size() < part) {
    mem_.scratch += part * 2 - batch_split_.size();
    batch_split_ = gpu::Buffer(*ctx_, part * 2, gpu::BufferKind::Storage, "batch_attn_split");
  }
  return plan;
}

}  // namespace wgllm
