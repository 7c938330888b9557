#include "models/lfm2.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/gguf.h"
#include "models/cpu_common.h"
#include "models/gpu_common.h"
#include "models/model.h"
#include "models/source.h"

namespace wgllm {
namespace {

void check_params(const Lfm2Params& p, const ModelConfig& c, const std::string& src) {
  if (p.attn.size() != c.n_layers)
    throw Error(src + ": layer pattern has " + std::to_string(p.attn.size()) + " entries for " +
                std::to_string(c.n_layers) + " layers");
  if (p.conv_L < 2 || p.conv_L > 64)
    throw Error(src + ": conv kernel width (conv_L_cache / shortconv.l_cache) " + std::to_string(p.conv_L) +
                " is out of range [2, 64]");
}

}  // namespace

uint32_t Lfm2Params::n_attn() const { return uint32_t(std::count(attn.begin(), attn.end(), true)); }

// ---- Hugging Face config.json ----

Lfm2Params lfm2_params_from_hf(const nlohmann::json& j, const std::string& path) {
  Lfm2Params p;
  const uint32_t n = hf_uint(j, "num_hidden_layers", path, hp::layers);
  if (j.contains("layer_types") && !j["layer_types"].is_null()) {
    const auto& lt = j["layer_types"];
    if (!lt.is_array()) throw Error(path + ": config.json field 'layer_types' must be a list of strings");
    if (lt.size() != n)
      throw Error(path + ": config.json 'layer_types' has " + std::to_string(lt.size()) + " entries, num_hidden_layers is " +
                  std::to_string(n));
    for (size_t i = 0; i < lt.size(); ++i) {
      const std::string t = lt[i].is_string() ? lt[i].get<std::string>() : lt[i].dump();
      if (t != "conv" && t != "full_attention")
        throw Error(path + ": config.json layer_types[" + std::to_string(i) + "] is '" + t +
                    "' (expected \"conv\" or \"full_attention\")");
      p.attn.push_back(t == "full_attention");
    }
  } else if (j.contains("full_attn_idxs") && !j["full_attn_idxs"].is_null()) {
    const auto& ix = j["full_attn_idxs"];
    if (!ix.is_array()) throw Error(path + ": config.json field 'full_attn_idxs' must be a list of layer indices");
    p.attn.assign(n, false);
    for (auto& v : ix) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= int64_t(n))
        throw Error(path + ": config.json full_attn_idxs entry " + v.dump() + " is not a layer index in [0, " +
                    std::to_string(n) + ")");
      p.attn[v.get<size_t>()] = true;
    }
  } else {
    p.attn.assign(n, true);  // Lfm2Config: full_attn_idxs defaults to every layer
  }
  p.conv_L = hf_uint_or(j, "conv_L_cache", 3, path, {2, 64});
  if (opt<bool>(j, "conv_bias", false, path))
    throw Error(path + ": config.json conv_bias = true is not supported (no released LFM2 model uses it)");
  return p;
}

ModelConfig lfm2_config_from_hf(const nlohmann::json& j, const std::string& path) {
  ModelConfig c;
  c.arch = "lfm2";
  c.name = opt<std::string>(j, "_name_or_path", "lfm2", path);
  c.n_layers = hf_uint(j, "num_hidden_layers", path, hp::layers);
  c.d_model = hf_uint(j, "hidden_size", path, hp::d_model);
  hf_attention_shape(j, path, c);
  c.vocab = hf_uint(j, "vocab_size", path, hp::vocab);
  c.max_context = hf_uint_or(j, "max_position_embeddings", 128000, path, hp::context);
  c.rms_eps = float(hf_real_or(j, "norm_eps", 1e-5, path, hp::rms_eps));
  // FFN width: Lfm2MLP.__init__ (intermediate_size is block_ff_dim in older configs).
  double ff = j.contains("intermediate_size") && !j["intermediate_size"].is_null()
                  ? hf_uint(j, "intermediate_size", path, {1, 4 * hp::ffn.hi})
                  : hf_uint(j, "block_ff_dim", path, {1, 4 * hp::ffn.hi});
  if (opt<bool>(j, "block_auto_adjust_ff_dim", true, path)) {
    ff = std::floor(2.0 * ff / 3.0);
    if (j.contains("block_ffn_dim_multiplier") && !j["block_ffn_dim_multiplier"].is_null()) {
      const double m = hf_real_or(j, "block_ffn_dim_multiplier", 1.0, path, {0.0, 64.0, true});
      const uint32_t mult = hf_uint_or(j, "block_multiple_of", 256, path, {1, 65536});
      ff = std::floor(m * ff);
      ff = double(mult) * std::ceil(ff / mult);
    }
  }
  if (ff < hp::ffn.lo || ff > hp::ffn.hi)
    throw Error(path + ": config.json intermediate_size / block_* fields give an FFN width of " + std::to_string(int64_t(ff)) +
                ", out of range [1, " + std::to_string(hp::ffn.hi) + "]");
  c.ffn_dim = uint32_t(ff);
  // RoPE: transformers 5 rope_parameters, or a top-level rope_theta (older configs).
  c.rope_base = 1000000.0;  // Lfm2Config.default_theta
  if (j.contains("rope_parameters") && !j["rope_parameters"].is_null()) {
    const auto& rp = j["rope_parameters"];
    if (!rp.is_object()) throw Error(path + ": config.json rope_parameters must be an object");
    const std::string type = opt<std::string>(rp, "rope_type", "default", path);
    if (type != "default") throw Error(path + ": config.json rope_parameters.rope_type '" + type + "' is not supported");
    c.rope_base = hf_real_or(rp, "rope_theta", opt<double>(j, "rope_theta", c.rope_base, path), path, hp::rope_base,
                             "rope_parameters");
  } else {
    c.rope_base = hf_real_or(j, "rope_theta", c.rope_base, path, hp::rope_base);
  }
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
    throw Error(path + ": config.json rope_scaling is not supported");
  c.rope_dims = c.head_dim;
  c.rope_neox = true;  // rotate_half
  c.tied_embeddings = j.contains("tie_embedding") ? opt<bool>(j, "tie_embedding", true, path)
                                                   : opt<bool>(j, "tie_word_embeddings", true, path);
  const Lfm2Params p = lfm2_params_from_hf(j, path);
  check_params(p, c, path);
  if (p.n_attn() == 0) {  // attention sizes are unused; keep validate() meaningful
    c.n_kv_heads = c.n_kv_heads ? c.n_kv_heads : c.n_heads;
  }
  return c;
}

// ---- GGUF ----

Lfm2Params lfm2_params_from_gguf(const GgufFile& f) {
  Lfm2Params p;
  const uint32_t n = gguf_uint(f, "lfm2.block_count", hp::layers);
  const std::string key = "lfm2.attention.head_count_kv";
  auto it = f.metadata().find(key);
  if (it != f.metadata().end() && it->second.type == GgufType::ARRAY) {
    const auto& kv = f.get_int_array(key);
    if (kv.size() != n)
      throw Error(f.path() + ": " + key + " has " + std::to_string(kv.size()) + " entries for " + std::to_string(n) +
                  " layers");
    for (size_t i = 0; i < kv.size(); ++i) {
      if (kv[i] < 0 || kv[i] > int64_t(hp::heads.hi))
        throw Error(f.path() + ": metadata '" + key + "'[" + std::to_string(i) + "] = " + std::to_string(kv[i]) +
                    ": must be 0 (conv layer) or a head count in [1, " + std::to_string(hp::heads.hi) + "]");
      p.attn.push_back(kv[i] != 0);
    }
  } else {
    p.attn.assign(n, true);
  }
  if (!f.has("lfm2.shortconv.l_cache") && std::count(p.attn.begin(), p.attn.end(), false) > 0)
    throw Error(f.path() + ": missing lfm2.shortconv.l_cache (conv kernel width)");
  p.conv_L = gguf_uint_or(f, "lfm2.shortconv.l_cache", 3, {2, 64});
  return p;
}

ModelConfig lfm2_config_from_gguf(const GgufFile& f) {
  ModelConfig c;
  c.arch = "lfm2";
  const std::string a = "lfm2.";
  c.name = f.get_str_or("general.name", "lfm2");
  c.n_layers = gguf_uint(f, a + "block_count", hp::layers);
  c.d_model = gguf_uint(f, a + "embedding_length", hp::d_model);
  c.ffn_dim = gguf_uint(f, a + "feed_forward_length", hp::ffn);
  c.n_heads = gguf_uint(f, a + "attention.head_count", hp::heads);
  const Lfm2Params p = lfm2_params_from_gguf(f);
  auto it = f.metadata().find(a + "attention.head_count_kv");
  if (it == f.metadata().end()) {
    c.n_kv_heads = c.n_heads;
  } else if (it->second.type == GgufType::ARRAY) {
    for (int64_t v : f.get_int_array(a + "attention.head_count_kv")) {
      if (v < 0) throw Error(f.path() + ": negative " + a + "attention.head_count_kv");
      if (v && c.n_kv_heads && uint32_t(v) != c.n_kv_heads)
        throw Error(f.path() + ": attention layers with different KV head counts are not supported");
      if (v) c.n_kv_heads = uint32_t(v);
    }
    if (!c.n_kv_heads) c.n_kv_heads = c.n_heads;  // no attention layer
  } else {
    c.n_kv_heads = gguf_uint(f, a + "attention.head_count_kv", {1, c.n_heads});
  }
  gguf_attention_shape(f, a, c);  // a head_count_kv above head_count is not a divisor either
  c.max_context = gguf_uint_or(f, a + "context_length", 128000, hp::context);
  c.rms_eps = float(gguf_real_or(f, a + "attention.layer_norm_rms_epsilon", 1e-5, hp::rms_eps));
  c.rope_base = gguf_real_or(f, a + "rope.freq_base", 1000000.0, hp::rope_base);
  c.rope_dims = gguf_uint_or(f, a + "rope.dimension_count", c.head_dim, {2, c.head_dim});
  c.rope_neox = true;
  gguf_check_rope_scaling(f, a);
  gguf_vocab(f, c);
  check_params(p, c, f.path());
  return c;
}

Lfm2Params lfm2_params(const ModelSource& src) {
  Lfm2Params p = src.gguf ? lfm2_params_from_gguf(*src.gguf) : lfm2_params_from_hf(src.hf->config(), src.path + "/config.json");
  check_params(p, src.config, src.path);
  return p;
}

// ---- tensors ----

Lfm2Refs lfm2_refs(const TensorStore& ts, const ModelConfig& c, const Lfm2Params& p, bool g) {
  const uint64_t d = c.d_model, q = c.q_dim(), kv = c.kv_dim(), f = c.ffn_dim, v = c.vocab, hd = c.head_dim,
                 L = p.conv_L;
  Lfm2Refs r;
  r.embed = require_tensor(ts, g ? "token_embd.weight" : "model.embed_tokens.weight", {{d, v}});
  r.out_norm = require_tensor(ts, g ? "token_embd_norm.weight" : "model.embedding_norm.weight", {{d}});
  r.lm_head = c.tied_embeddings ? r.embed : require_tensor(ts, g ? "output.weight" : "lm_head.weight", {{d, v}});
  for (uint32_t i = 0; i < c.n_layers; ++i) {
    const std::string pre = g ? "blk." + std::to_string(i) + "." : "model.layers." + std::to_string(i) + ".";
    auto n = [&](const char* gguf, const char* hf) { return pre + (g ? gguf : hf) + ".weight"; };
    if (g) {  // a bias would be silently ignored: refuse it (conv_bias)
      for (const char* b : {"shortconv.in_proj.bias", "shortconv.conv.bias", "shortconv.out_proj.bias"})
        if (ts.has(pre + b)) throw Error(ts.source() + ": tensor '" + pre + b + "': conv biases are not supported");
    }
    Lfm2LayerRefs R;
    R.attn_norm = require_tensor(ts, n("attn_norm", "operator_norm"), {{d}});
    R.ffn_norm = require_tensor(ts, n("ffn_norm", "ffn_norm"), {{d}});
    R.w_gate = require_tensor(ts, n("ffn_gate", "feed_forward.w1"), {{d, f}});
    R.w_up = require_tensor(ts, n("ffn_up", "feed_forward.w3"), {{d, f}});
    R.w_down = require_tensor(ts, n("ffn_down", "feed_forward.w2"), {{f, d}});
    if (p.attn[i]) {
      R.wq = require_tensor(ts, n("attn_q", "self_attn.q_proj"), {{d, q}});
      R.wk = require_tensor(ts, n("attn_k", "self_attn.k_proj"), {{d, kv}});
      R.wv = require_tensor(ts, n("attn_v", "self_attn.v_proj"), {{d, kv}});
      R.wo = require_tensor(ts, n("attn_output", "self_attn.out_proj"), {{q, d}});
      R.q_norm = require_tensor(ts, n("attn_q_norm", "self_attn.q_layernorm"), {{hd}});
      R.k_norm = require_tensor(ts, n("attn_k_norm", "self_attn.k_layernorm"), {{hd}});
    } else {
      R.in_proj = require_tensor(ts, n("shortconv.in_proj", "conv.in_proj"), {{d, 3 * d}});
      R.conv = require_tensor(ts, n("shortconv.conv", "conv.conv"), {{L, d}, {L, 1, d}});
      R.out_proj = require_tensor(ts, n("shortconv.out_proj", "conv.out_proj"), {{d, d}});
    }
    r.layers.push_back(std::move(R));
  }
  return r;
}

std::unique_ptr<Sequence> lfm2_sequence(gpu::Context* ctx, const ModelConfig& c, const Lfm2Params& p, uint32_t context) {
  std::vector<std::unique_ptr<LayerState>> st;
  for (uint32_t i = 0; i < c.n_layers; ++i) {
    if (p.attn[i])
      st.push_back(std::make_unique<KvState>(ctx, i, context, c.kv_dim()));
    else
      st.push_back(std::make_unique<ConvState>(ctx, i, p.conv_L - 1, c.d_model));
  }
  return std::make_unique<Sequence>(context, ctx, std::move(st));
}

// ---- The forward, once for both backends ----

namespace {

/// LFM2 over a backend's block interface: Base = CpuModel (kernels' CPU twins) or GpuModel
/// (WGSL kernels); Base::Matrix / Vector / Ffn / Attention / ShortConv are that backend's weights.
template <class Base>
class Lfm2Model final : public Base {
 public:
  Lfm2Model(const ModelSource& src, const ModelOptions& opt) : Base(src.config, opt), p_(lfm2_params(src)) {
    const ModelConfig& c = this->c_;
    Lfm2Refs r = lfm2_refs(*src.tensors, c, p_, src.is_gguf());
    this->embedding(r.embed, c.tied_embeddings ? nullptr : &r.lm_head);
    this->out_norm_ = this->vector(r.out_norm, "token_embd_norm");
    for (uint32_t i = 0; i < c.n_layers; ++i) {
      const Lfm2LayerRefs& R = r.layers[i];
      const std::string p = "blk." + std::to_string(i) + ".";
      Layer L;
      L.attn = p_.attn[i];
      L.norm = this->vector(R.attn_norm, p + "attn_norm");
      L.ffn_norm = this->vector(R.ffn_norm, p + "ffn_norm");
      L.ffn = this->ffn_weights(R.w_gate, R.w_up, R.w_down, p, FfnOptions{});
      if (L.attn) {
        const std::vector<float> qn = dequantize_tensor(R.q_norm), kn = dequantize_tensor(R.k_norm);
        AttentionTensors t{&R.wq, &R.wk, &R.wv, &R.wo};
        t.q_norm = &qn;
        t.k_norm = &kn;
        L.attention = this->attention_weights(t, p);
      } else L.conv = this->short_conv_weights(R.in_proj, R.conv, R.out_proj, p_.conv_L, p);
      layers_.push_back(std::move(L));
    }
    if constexpr (std::is_same_v<Base, GpuModel>) {
      // The RoPE table is made by new_sequence(), sized by the sequence's context (a placeholder
      // when there is no attention layer).
      if (!p_.n_attn()) this->rope_ = gpu::Buffer(*this->ctx_, 16, gpu::BufferKind::Storage, "rope_table");
      this->ctx_->wait_idle();
      const uint64_t D = c.d_model, Q = c.q_dim(), F = c.ffn_dim;
      this->norm_label_ = "operator_norm";
      const uint64_t S = GpuModel::attention_stride(c, /*gate=*/false);
      this->alloc_chunk_buffers({{&this->proj_, std::max(p_.n_attn() ? S : 0, p_.n_attn() < c.n_layers ? 3 * D : 0), "proj"},
                                 {&this->att_, std::max(Q, D), "mixer_out"},
                                 {&this->gu_, 2 * F, "gate_up"},
                                 {&this->act_, F, "ffn_act"}});
    }
  }

  std::unique_ptr<Sequence> new_sequence(uint32_t ctx) override {
    const ModelConfig& c = this->c_;
    SequenceSize s;
    s.context = this->sequence_length(ctx);
    s.kv_cache = uint64_t(p_.n_attn()) * Lfm2Params::kv_bytes(c, s.context);
    s.recurrent = uint64_t(c.n_layers - p_.n_attn()) * p_.conv_state_bytes(c);
    s.largest_buffer = std::max(p_.n_attn() ? Lfm2Params::kv_bytes(c, s.context) / 2 : 0, p_.conv_state_bytes(c));
    return this->make_sequence(s, p_.n_attn() != 0, [&] { return lfm2_sequence(this->device(), c, p_, s.context); });
  }

 private:
  struct Layer {
    bool attn = false;
    typename Base::Vector norm, ffn_norm;  // operator_norm, ffn_norm
    typename Base::Ffn ffn;
    typename Base::Attention attention;    // "full_attention" layers
    typename Base::ShortConv conv;         // "conv" layers
  };

  // Lfm2DecoderLayer: x += op(operator_norm(x)); x += ffn(ffn_norm(x)).
  void body(typename Base::Pass& p) override {
    for (uint32_t l = 0; l < this->c_.n_layers; ++l) {
      const Layer& L = layers_[l];
      if (L.attn) this->attention(p, l, L.norm, L.attention);
      else this->short_conv(p, l, L.norm, L.conv);
      this->gated_ffn(p, L.ffn_norm, L.ffn);
    }
  }

  Lfm2Params p_;
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> create_lfm2_cpu(const ModelSource& src, const ModelOptions& opt) {
  return std::make_unique<Lfm2Model<CpuModel>>(src, opt);
}

std::unique_ptr<Model> create_lfm2_gpu(const ModelSource& src, const ModelOptions& opt) {
  return std::make_unique<Lfm2Model<GpuModel>>(src, opt);
}

}  // namespace wgllm
