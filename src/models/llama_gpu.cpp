// Llama forward pass on WebGPU (also Qwen2: Q/K/V biases, models/qwen2.h, added by one add_bias
// dispatch after the projections, or in the decode QKV kernel's epilogue): every op is a WGSL kernel
// (kernels/ops.h); a forward of up to
// prefill_chunk tokens is recorded into one command submission and ends with one small readback
// (4 bytes for greedy argmax, or the vocab logits).
#include <cmath>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <optional>

#include "core/error.h"
#include "gpu/context.h"
#include "kernels/rope_table.h"
#include "models/llama_cpu.h"
#include "kernels/gdn_ops.h"
#include "models/gemma3.h"
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
  std::vector<StackedPart> qkv;  // [q | k | v] rows: one stacked matrix per run of one weight type (fuse_qkv)
  GpuWeight wo, wgu, wg, wu, wd;
  Buffer bqkv;  // Q|K|V biases [q_dim + 2 kv_dim] f32 (qwen2; when has_bias_)
  Buffer q_norm, k_norm, post_attn_norm, post_ffn_norm;  // gemma3 (when gemma_)
};

class LlamaGpu final : public GpuModel {
 public:
  LlamaGpu(const ModelSource& src, const ModelOptions& opt) : GpuModel(src.config, opt) {
    load(src);
    alloc_scratch();
  }

  bool device_token_input() const override { return !host_embed_; }

  std::unique_ptr<Sequence> new_sequence(uint32_t ctx) override {
    const SequenceSize s = prepare(ctx);
    return kv_sequence(s, {}, {}, 0);
  }

  // Several sequences in KV pools: per layer one K and one V buffer holding the caches of up to
  // `per_pool` sequences (as many as one storage binding holds), each sequence a view of rows
  // [j * stride, j * stride + context) (stride = context rounded up to 64 rows, so that every view
  // starts at a multiple of 256 bytes, WebGPU's largest minStorageBufferOffsetAlignment). A batched
  // forward reaches all of a pool's caches through one binding (--batch-rope-kv, --batch-decode-attn).
  std::vector<std::unique_ptr<Sequence>> new_sequences(uint32_t n, uint32_t ctx) override {
    if (n <= 1) return Model::new_sequences(n, ctx);
    const SequenceSize s = prepare(ctx);
    const WGPULimits& lim = ctx_->info().limits;
    const uint64_t binding = binding_limit();
    const uint64_t stride = (uint64_t(s.context) + 63) / 64 * 64, slot_bytes = stride * c_.kv_dim() * 4;
    if (lim.minStorageBufferOffsetAlignment == 0 || slot_bytes % lim.minStorageBufferOffsetAlignment)
      return Model::new_sequences(n, ctx);
    const uint32_t per_pool = uint32_t(std::clamp<uint64_t>(binding / slot_bytes, 1, n));
    std::vector<std::unique_ptr<Sequence>> out;
    for (uint32_t first = 0; first < n; first += per_pool) {
      const uint32_t m = std::min(per_pool, n - first);
      std::vector<std::shared_ptr<const Buffer>> kp, vp;
      try {
        for (uint32_t i = 0; i < c_.n_layers; ++i) {
          const std::string p = "layers." + std::to_string(i) + ".self_attn.";
          kp.push_back(std::make_shared<const Buffer>(*ctx_, m * slot_bytes, BufferKind::Storage, p + "keys_pool"));
          vp.push_back(std::make_shared<const Buffer>(*ctx_, m * slot_bytes, BufferKind::Storage, p + "values_pool"));
        }
      } catch (const Error& e) {
        SequenceSize all = s;
        all.kv_cache = 2ull * c_.n_layers * m * slot_bytes;
        all.largest_buffer = m * slot_bytes;
        sequence_alloc_failed(all, backend_name(), e.what());
      }
      for (uint32_t j = 0; j < m; ++j) out.push_back(kv_sequence(s, kp, vp, j * stride));
    }
    return out;
  }

 private:

  // A sequence of one KvState per layer: its own buffers (kp, vp empty), or views from cache row
  // base_row of the pools kp[layer], vp[layer] (new_sequences()).
  std::unique_ptr<Sequence> kv_sequence(const SequenceSize& s, const std::vector<std::shared_ptr<const Buffer>>& kp,
                                        const std::vector<std::shared_ptr<const Buffer>>& vp, uint64_t base_row) {
    return create_sequence(s, [&] {
      std::vector<std::unique_ptr<LayerState>> st;
      for (uint32_t i = 0; i < c_.n_layers; ++i)
        st.push_back(kp.empty() ? std::make_unique<KvState>(ctx_.get(), i, s.context, c_.kv_dim())
                                : std::make_unique<KvState>(ctx_.get(), i, s.context, c_.kv_dim(), kp[i], vp[i], base_row));
      return std::make_unique<Sequence>(s.context, ctx_.get(), std::move(st));
    });
  }

  // The checks and model-level tables (RoPE) before sequences of ctx positions are allocated.
  SequenceSize prepare(uint32_t ctx) {
    SequenceSize s;
    s.context = sequence_length(ctx);
    s.largest_buffer = uint64_t(s.context) * c_.kv_dim() * 4;
    s.kv_cache = 2ull * c_.n_layers * s.largest_buffer;
    prepare_sequence(s, &rope_, &rope_rows_);
    if (gemma_ && s.context > rope_local_rows_) {  // the sliding layers' table (theta rope_local_base)
      const std::vector<float> t = kernels::rope_table(s.context, c_.rope_dims, gemma_->rope_local_base);
      Buffer b(*ctx_, t.size() * 4, BufferKind::Storage, "rope_table_local");
      b.write(*ctx_, 0, t.data(), t.size() * 4);
      mem_.scratch += b.size() - (rope_local_rows_ ? rope_local_.size() : 0);
      rope_local_ = std::move(b);
      rope_local_rows_ = s.context;
    }
    return s;
  }

  static bool same_type(std::initializer_list<const TensorRef*> ts) {
    for (auto* t : ts)
      if (t->type != (*ts.begin())->type) return false;
    return true;
  }

  void load(const ModelSource& src) {
    LlamaRefs r = llama_refs(*src.tensors, c_, src.is_gguf());
    if (c_.arch == "gemma3") {
      gemma_ = gemma3_params(src);
      if (gemma_->final_softcap > 0) throw Error(src.path + ": gemma3 final logit softcapping is not supported on WebGPU yet");
    }
    load_embed_and_head(r);
    out_norm_ = f32_buffer(r.out_norm, "output_norm");
    fused_gu_ = opt_.fuse_gate_up;
    for (auto& L : r.layers) fused_gu_ = fused_gu_ && same_type({&L.w_gate, &L.w_up});
    for (uint32_t i = 0; i < c_.n_layers; ++i) {
      auto& R = r.layers[i];
      const std::string p = "blk." + std::to_string(i) + ".";
      Layer L;
      L.attn_norm = f32_buffer(R.attn_norm, p + "attn_norm");
      L.ffn_norm = f32_buffer(R.ffn_norm, p + "ffn_norm");
      L.qkv = upload_stacked(*ctx_, {&R.wq, &R.wk, &R.wv}, {"q", "k", "v"}, opt_.fuse_qkv, "attn_", p, mem_);
      if (R.has_qkv_bias()) {
        has_bias_ = true;
        std::vector<float> b = dequantize_tensor(R.bq), bk = dequantize_tensor(R.bk), bv = dequantize_tensor(R.bv);
        b.insert(b.end(), bk.begin(), bk.end());
        b.insert(b.end(), bv.begin(), bv.end());
        L.bqkv = upload_f32(*ctx_, b, p + "attn_qkv.bias", mem_);
      }
      if (R.has_gemma_norms()) {
        L.q_norm = f32_buffer(R.q_norm, p + "attn_q_norm");
        L.k_norm = f32_buffer(R.k_norm, p + "attn_k_norm");
        L.post_attn_norm = f32_buffer(R.post_attn_norm, p + "post_attention_norm");
        L.post_ffn_norm = f32_buffer(R.post_ffn_norm, p + "post_ffw_norm");
      }
      L.wo = weight({&R.wo}, p + "attn_output");
      upload_ffn(R.w_gate, R.w_up, R.w_down, fused_gu_, p, L.wgu, L.wg, L.wu, L.wd);
      layers_.push_back(std::move(L));
    }
    ctx_->wait_idle();  // the RoPE table is made by new_sequence(), sized by the sequence's context
  }

  void alloc_scratch() {
    alloc_chunk_buffers({{&proj_, c_.q_dim() + 2 * c_.kv_dim(), "qkv"},
                         {&att_, c_.q_dim(), "attn_out"},
                         {&gu_, 2 * c_.ffn_dim, "gate_up"},
                         {&act_, c_.ffn_dim, "ffn_act"},
                         {&o_, gemma_ ? c_.d_model : 0, "o"}});
  }

  int32_t finish_head(kernels::OpContext& o, uint32_t last_row, HeadOut out, std::vector<float>* logits) override {
    return head_parts_.empty() ? GpuModel::finish_head(o, last_row, out, logits) : finish_split_head(o, last_row, out, logits);
  }

  std::vector<HeadPart> head_parts() const override {
    if (head_parts_.empty()) return GpuModel::head_parts();
    std::vector<HeadPart> parts;
    for (size_t i = 0; i < head_parts_.size(); ++i) parts.push_back({&head_parts_[i], head_row0_[i]});
    return parts;
  }

  // Continuous batching over KV pools (--batch-rope-kv, --batch-decode-attn): the sequences of a
  // batched forward whose caches are views of the same pool buffers (new_sequences()) form a group;
  // a group of two or more gets one RoPE + KV-store dispatch per layer for all its rows, and its
  // one-token sequences one decode-attention launch (+ one merge of split partials) per layer.
  // The launches read their rows from a table of vec4<u32> entries written once per forward
  // (batch_tab_): the same for every layer, as a sequence's views start at the same row of every
  // layer's pool.
  struct PoolGroup {
    uint32_t first = 0;           // a member segment (its views name the pool buffers of each layer)
    uint32_t rope_off = 0, rope_n = 0;  // entries (src row, position, cache row, 0)
    uint32_t attn_off = 0, attn_n = 0;  // entries (row, position, base row, split length)
    uint32_t max_split = 1;
    uint64_t keys = 0;            // cache rows the decode attention reads (traffic)
  };
  struct BatchPlan {
    std::vector<PoolGroup> groups;
    std::vector<bool> rope_done, attn_done;  // per segment: covered by a group's launch
  };

  BatchPlan plan_batch(const kernels::OpContext& o, std::span<const BatchSeg> segs) {
    BatchPlan plan;
    plan.rope_done.assign(segs.size(), false);
    plan.attn_done.assign(segs.size(), false);
    const bool rope = o.opt.batch_rope_kv && o.opt.fuse_rope_kv;
    const kernels::AttentionShape one{1, 0, c_.n_heads, c_.n_kv_heads, c_.head_dim, 1.0f};
    const bool attn = o.opt.batch_decode_attn && !sparse_.index && kernels::attention_decode_applies(o, one);
    if (segs.size() < 2 || gemma_ || !(rope || attn)) return plan;
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
        if (!kv.keys().pooled() || !kv.values().pooled() || kv.base_row() != base ||
            kv.values().offset() != kv.keys().offset())
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
      batch_tab_ = Buffer(*ctx_, tab_bytes * 2, BufferKind::Storage, "batch_rows");
    }
    batch_tab_.write(*ctx_, 0, tab.data(), tab_bytes);
    uint64_t part = 0;
    for (const PoolGroup& g : plan.groups)
      if (g.max_split > 1) part = std::max<uint64_t>(part, 4ull * g.attn_n * c_.n_heads * g.max_split * (c_.head_dim + 2));
    if (batch_split_.size() < part) {
      mem_.scratch += part * 2 - batch_split_.size();
      batch_split_ = Buffer(*ctx_, part * 2, BufferKind::Storage, "batch_attn_split");
    }
    return plan;
  }

  // Begins the submission and records the embedding and every layer for the rows of segs (one
  // sequence, or several: continuous batching). Per-row ops run once over all rows; RoPE, the KV
  // store and attention per segment, against its sequence's cache at its positions.
  void record_body(kernels::OpContext& o, std::span<const BatchSeg> segs, std::span<const int32_t> toks) override {
    const uint32_t T = uint32_t(toks.size()), D = c_.d_model, Q = c_.q_dim(), KV = c_.kv_dim(), QKV = Q + 2 * KV;
    const bool solo = segs.size() == 1;
    const BatchPlan plan = plan_batch(o, segs);
    const Buffer& ids = host_embed_ ? tokens_ : token_ids(tokens_, amax_, toks, !solo);
    if (host_embed_) {
      // Rows gathered on the host (the table exceeds one storage binding): dequantize() of the
      // stored row, as the CPU reference does; queued before this step's submission.
      std::vector<float> rows(size_t(T) * D);
      for (uint32_t t = 0; t < T; ++t)
        dequantize(embed_type_, embed_host_.data() + uint64_t(toks[t]) * embed_row_bytes_, &rows[size_t(t) * D], D);
      x_.write(*ctx_, 0, rows.data(), rows.size() * 4);
    }
    rec_->begin();
    if (!host_embed_) kernels::embed(o, embed_, ids, T, {x_, 0});
    if (gemma_) kernels::scale(o, {x_, 0}, T * D, gemma_->embed_scale, "embed_scale");
    for (uint32_t l = 0; l < c_.n_layers; ++l) {
      Layer& L = layers_[l];
      const bool local = gemma_ && gemma_->sliding(l);
      if (solo && !gemma_ && o.opt.fuse_qkv_rope_kv && T <= kernels::kFusedMaxTokens) {
        // Decode: norm (--fuse-norm), QKV (one dispatch per part of one weight type), the biases,
        // RoPE and the KV store in one dispatch per part.
        KvState& kv = segs[0].seq->kv(l);
        kernels::QkvRopeKv rk{Q, KV, c_.head_dim, c_.rope_dims, segs[0].pos0, c_.rope_neox, &rope_,
                              kv.keys().binding(), kv.values().binding()};
        rk.bias = has_bias_ ? &L.bqkv : nullptr;
        const bool fn = o.opt.fuse_norm;
        if (!fn) kernels::rmsnorm(o, {x_, 0}, D, L.attn_norm, {h_, 0}, D, T, D, c_.rms_eps, "attn_norm");
        for (const StackedPart& part : L.qkv) {
          rk.row0 = part.row0;
          kernels::matmul_qkv_rope_kv(o, part.w, {fn ? x_ : h_, 0}, D, fn ? &L.attn_norm : nullptr, fn ? c_.rms_eps : 0.0f,
                                      {proj_, part.row0}, QKV, T, rk, part.label.c_str());
        }
      } else {
        record_norm_proj(o, c_, x_, L.attn_norm, h_, std::span<const StackedPart>(L.qkv), proj_, QKV, T, "attn_norm");
        if (has_bias_) kernels::add_bias(o, L.bqkv, QKV, {proj_, 0}, QKV, T, "attn_qkv_bias");
        const QkNorm qkn{L.q_norm, L.k_norm};  // gemma3's QK-norm (folded into RoPE + KV store: fuse_qk_norm)
        if (gemma_) record_qk_norms(o, c_, {proj_, 0, QKV, Q, Q + KV, QKV}, T, qkn);
        for (const PoolGroup& g : plan.groups) {
          if (!g.rope_n) continue;
          KvState& kv = segs[g.first].seq->kv(l);  // the whole pool buffers
          kernels::rope_kv_store_rows(o, proj_, 0, QKV, Q, Q + KV, QKV, c_.n_heads, c_.n_kv_heads, c_.head_dim, c_.rope_dims,
                                      rope_, c_.rope_neox, kv.keys().buffer(), kv.values().buffer(), batch_tab_, g.rope_off,
                                      g.rope_n);
        }
        for (size_t i = 0; i < segs.size(); ++i) {
          if (plan.rope_done[i]) continue;
          const BatchSeg& s = segs[i];
          KvState& kv = s.seq->kv(l);
          const uint32_t r = s.row0 * QKV;
          const QkvRows rows{proj_, r, QKV, r + Q, r + Q + KV, QKV};
          if (gemma_)
            record_qk_norm_rope_kv(o, c_, rows, s.T, s.pos0, local ? rope_local_ : rope_, qkn, kv.keys().binding(),
                                   kv.values().binding());
          else
            record_rope_kv(o, c_, rows, s.T, s.pos0, rope_, kv.keys().binding(), kv.values().binding());
        }
      }
      kernels::AttentionPartials parts;  // the merge left to the output projection (--fuse-attn-combine)
      const bool defer = defer_attn_combine(o, segs, L.wo, T, c_.head_dim);
      const float scale = gemma_ ? gemma_->attn_scale : 1.0f / std::sqrt(float(c_.head_dim));
      for (const PoolGroup& g : plan.groups) {
        if (!g.attn_n) continue;
        KvState& kv = segs[g.first].seq->kv(l);  // the whole pool buffers
        const kernels::AttentionShape as{1, 0, c_.n_heads, c_.n_kv_heads, c_.head_dim, scale};
        kernels::attention_decode_batch(o, as, {proj_, 0}, QKV, kv.keys().buffer(), kv.values().buffer(), {att_, 0}, Q,
                                        batch_tab_, g.attn_off, g.attn_n, g.max_split, g.keys, &batch_split_);
      }
      for (size_t i = 0; i < segs.size(); ++i) {
        if (plan.attn_done[i]) continue;
        const BatchSeg& s = segs[i];
        KvState& kv = s.seq->kv(l);
        kernels::AttentionShape as{s.T, s.pos0, c_.n_heads, c_.n_kv_heads, c_.head_dim,
                                   scale};
        if (local) as.window = gemma_->sliding_window;  // gemma3 sliding layers: keys pos_q - pos_k < W only
        kernels::attention(o, as, {proj_, s.row0 * QKV}, QKV, kv.keys().binding(), kv.values().binding(), {att_, s.row0 * Q}, Q,
                           &attn_split_, sparse_.index ? &sparse_ : nullptr, kv.sparse_means(), defer ? &parts : nullptr);
      }
      if (gemma_) {
        gemma_block(o, L, parts, T);
        continue;
      }
      record_attn_output(o, L.wo, parts, att_, x_, D, T, true);
      record_swiglu_ffn(o, c_, {L.ffn_norm, fused_gu_ ? &L.wgu : nullptr, &L.wg, &L.wu, L.wd}, x_, h_, gu_, act_, T);
    }
  }

  // Gemma 3 (models/gemma3.h), after attention: x += rmsnorm(Wo att) * post_attn_norm; then
  // x += rmsnorm(down(gelu_tanh(gate(h)) * up(h))) * post_ffn_norm, h = rmsnorm(x) * ffn_norm.
  void gemma_block(kernels::OpContext& o, const Layer& L, const kernels::AttentionPartials& parts, uint32_t T) {
    const uint32_t D = c_.d_model, F = c_.ffn_dim;
    const float eps = c_.rms_eps;
    record_attn_output(o, L.wo, parts, att_, o_, D, T, false);
    kernels::rmsnorm(o, {o_, 0}, D, L.post_attn_norm, {h_, 0}, D, T, D, eps, "post_attention_norm");
    kernels::add_bias(o, h_, T * D, {x_, 0}, 0, 1, "attn_residual");
    kernels::rmsnorm(o, {x_, 0}, D, L.ffn_norm, {h_, 0}, D, T, D, eps, "ffn_norm");
    if (fused_gu_) {
      kernels::matmul(o, L.wgu, {h_, 0}, D, {gu_, 0}, 2 * F, T, false, "ffn_gate_up");
    } else {
      kernels::matmul(o, L.wg, {h_, 0}, D, {gu_, 0}, 2 * F, T, false, "ffn_gate");
      kernels::matmul(o, L.wu, {h_, 0}, D, {gu_, F}, 2 * F, T, false, "ffn_up");
    }
    kernels::gelu_mul(o, gu_, 0, F, 2 * F, T, F, {act_, 0});
    kernels::matmul(o, L.wd, {act_, 0}, F, {o_, 0}, D, T, false, "ffn_down");
    kernels::rmsnorm(o, {o_, 0}, D, L.post_ffn_norm, {h_, 0}, D, T, D, eps, "post_ffw_norm");
    kernels::add_bias(o, h_, T * D, {x_, 0}, 0, 1, "ffn_residual");
  }

  // Weights larger than one storage binding (the adapter's maxStorageBufferBindingSize; lavapipe:
  // 128 MiB, which the 150k-262k-row vocabularies of Qwen2.5 and Gemma 3 exceed): the embedding
  // is kept as stored bytes on the host and its rows gathered per step; the output head is
  // uploaded as blocks of rows, one matmul each into its range of the logits.
  void load_embed_and_head(const LlamaRefs& r) {
    uint64_t lim = binding_limit();
    // Test hook: a smaller limit, so that tiny models take these paths in CI (tests/e2e).
    if (const char* e = std::getenv("WGLLM_TEST_MAX_BINDING_BYTES"); e && *e) lim = std::min<uint64_t>(lim, std::stoull(e));
    auto packed_per_row = [](const TensorRef& t) {  // GPU bytes of one row (from 64 rows)
      const uint32_t K = uint32_t(t.shape[0]), n = uint32_t(std::min<uint64_t>(t.shape[1], 64));
      std::vector<uint8_t> head(dtype_row_bytes(t.type, K) * n);
      t.read(0, head.size(), head.data());
      return double(kernels::pack_weight(t.type, head.data(), K, n).words.size()) * 4.0 / n;
    };
    auto too_big = [&](const TensorRef& t) { return packed_per_row(t) * double(t.shape[1]) > 0.9 * double(lim); };
    if (too_big(r.embed)) {
      host_embed_ = true;
      embed_type_ = r.embed.type;
      embed_row_bytes_ = dtype_row_bytes(r.embed.type, r.embed.shape[0]);
      embed_host_ = r.embed.bytes();
    } else {
      embed_ = weight({&r.embed}, "token_embd");
    }
    const TensorRef& head = c_.tied_embeddings ? r.embed : r.lm_head;
    if (too_big(head)) {
      const uint64_t row_bytes = dtype_row_bytes(head.type, head.shape[0]);
      const uint32_t N = uint32_t(head.shape[1]);
      const uint32_t rows = std::max<uint32_t>(64, uint32_t(0.8 * double(lim) / packed_per_row(head)) / 64 * 64);
      for (uint32_t r0 = 0; r0 < N; r0 += rows) {
        const uint32_t n = std::min(rows, N - r0);
        head_parts_.push_back(upload_rows(*ctx_, head.type, uint32_t(head.shape[0]),
                                          {RowBlock{&head, r0 * row_bytes, n * row_bytes, n}},
                                          "output." + std::to_string(head_parts_.size()), mem_));
        head_row0_.push_back(r0);
      }
    } else if (!c_.tied_embeddings) {
      lm_head_ = weight({&r.lm_head}, "output");
    }
  }

  // finish_forward() (gpu_common.h) with the head in row blocks.
  int32_t finish_split_head(kernels::OpContext& o, uint32_t last_row, HeadOut out, std::vector<float>* logits) {
    if (out == HeadOut::None) {
      o.rec.submit();
      return -1;
    }
    const uint32_t D = c_.d_model;
    if (out == HeadOut::Nll) {
      record_nll_head(o, x_, last_row / D + 1, out_norm_, head_parts());
      return -1;
    }
    kernels::rmsnorm(o, {x_, last_row}, D, out_norm_, {h_, 0}, D, 1, D, c_.rms_eps, "output_norm");
    for (size_t i = 0; i < head_parts_.size(); ++i)
      kernels::matmul(o, head_parts_[i], {h_, 0}, D, {logits_, head_row0_[i]}, c_.vocab, 1, false, "output",
                      gpu::Traffic::Logits);
    if (out == HeadOut::Argmax || out == HeadOut::ArgmaxAsync) {
      kernels::argmax(o, {logits_, 0}, c_.vocab, amax_);
      return submit_argmax(o, amax_, out);
    }
    logits->resize(c_.vocab);
    o.rec.read_after(logits_, 0, uint64_t(c_.vocab) * 4);
    o.rec.submit(logits->data());
    return -1;
  }

  bool host_embed_ = false;
  DType embed_type_ = DType::F32;
  uint64_t embed_row_bytes_ = 0;
  std::vector<uint8_t> embed_host_;
  std::vector<GpuWeight> head_parts_;
  std::vector<uint32_t> head_row0_;

  bool fused_gu_ = false, has_bias_ = false;
  std::optional<Gemma3Params> gemma_;
  Buffer rope_local_, o_;  // gemma3: sliding layers' RoPE table (rope_local_rows_ positions); scratch [T, d]
  uint32_t rope_local_rows_ = 0;
  std::vector<Layer> layers_;
  // proj_ (q | k | v rows), att_, gu_, act_: GpuModel's block scratch
  Buffer batch_tab_, batch_split_;  // continuous batching over KV pools (plan_batch), grown on demand
};

}  // namespace

std::unique_ptr<Model> create_llama_gpu(const ModelSource& src, const ModelOptions& opt) {
  return std::make_unique<LlamaGpu>(src, opt);
}

}  // namespace wgllm
