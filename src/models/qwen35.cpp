#include "models/qwen35.h"

#include <cmath>
#include <cstring>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/gguf.h"
#include "models/cpu_common.h"
#include "models/gpu_common.h"
#include "models/model.h"
#include "models/source.h"

namespace wgllm {
namespace {

TensorRef need_t(const TensorStore& ts, const std::string& name, std::vector<uint64_t> shape) {
  return require_tensor(ts, name, {std::move(shape)});
}

// The text config: the object itself (qwen3_5_text) or its "text_config" (qwen3_5).
const nlohmann::json& text_config(const nlohmann::json& j, const std::string& path) {
  const std::string type = opt<std::string>(j, "model_type", "", path);
  if (type == "qwen3_5") {
    if (!j.contains("text_config") || !j["text_config"].is_object())
      throw Error(path + ": config.json of model_type 'qwen3_5' has no 'text_config' object");
    return j["text_config"];
  }
  return j;
}

// rope_parameters.<key>, else the legacy top-level <key>, else def.
template <class T>
T rope_param(const nlohmann::json& t, const char* key, T def, const std::string& path) {
  if (t.contains("rope_parameters") && t["rope_parameters"].is_object() && t["rope_parameters"].contains(key))
    return opt<T>(t["rope_parameters"], key, def, path + " (rope_parameters)");
  return opt<T>(t, key, def, path);
}

}  // namespace

uint32_t Qwen35Params::n_linear() const {
  uint32_t n = 0;
  for (bool b : linear) n += b;
  return n;
}

ModelConfig qwen35_config_from_hf(const nlohmann::json& j, const std::string& path) {
  const nlohmann::json& t = text_config(j, path);
  ModelConfig c;
  c.name = opt<std::string>(j, "_name_or_path", "qwen3.5", path);
  c.n_layers = hf_uint(t, "num_hidden_layers", path, hp::layers);
  c.d_model = hf_uint(t, "hidden_size", path, hp::d_model);
  c.ffn_dim = hf_uint(t, "intermediate_size", path, hp::ffn);
  hf_attention_shape(t, path, c);
  c.vocab = hf_uint(t, "vocab_size", path, hp::vocab);
  c.max_context = hf_uint_or(t, "max_position_embeddings", 2048, path, hp::context);
  c.rms_eps = float(hf_real_or(t, "rms_norm_eps", 1e-6, path, hp::rms_eps));
  if (opt<bool>(t, "attention_bias", false, path)) throw Error(path + ": attention_bias = true is not supported");
  if (opt<std::string>(t, "hidden_act", "silu", path) != "silu")
    throw Error(path + ": hidden_act '" + t["hidden_act"].get<std::string>() + "' is not supported (only silu)");
  if (t.contains("rope_scaling") && !t["rope_scaling"].is_null()) throw Error(path + ": rope_scaling is not supported");
  const std::string rope_type = rope_param<std::string>(t, "rope_type", "default", path);
  if (rope_type != "default")
    throw Error(path + ": rope_parameters.rope_type '" + rope_type + "' is not supported (only default)");
  c.rope_base = rope_param<double>(t, "rope_theta", 10000.0, path);
  if (!(std::isfinite(c.rope_base) && c.rope_base > hp::rope_base.lo))
    throw Error(path + ": config.json field 'rope_theta' = " + std::to_string(c.rope_base) +
                ": must be a finite number in (1, 1e+300]");
  const double prf = rope_param<double>(t, "partial_rotary_factor", 0.25, path);
  if (!(prf > 0.0 && prf <= 1.0))
    throw Error(path + ": config.json field 'partial_rotary_factor' = " + std::to_string(prf) + ": must be in (0, 1]");
  c.rope_dims = uint32_t(double(c.head_dim) * prf);  // int(head_dim * factor), as in transformers
  if (c.rope_dims < 2 || c.rope_dims % 2)
    throw Error(path + ": config.json partial_rotary_factor " + std::to_string(prf) + " x head_dim " +
                std::to_string(c.head_dim) + " gives " + std::to_string(c.rope_dims) +
                " rotated dims: must be even and at least 2");
  c.rope_neox = true;  // rotate_half layout
  c.tied_embeddings = t.contains("tie_word_embeddings") ? opt<bool>(t, "tie_word_embeddings", false, path)
                                                        : opt<bool>(j, "tie_word_embeddings", false, path);
  qwen35_params_from_hf(j, path);  // validates the hybrid fields now, at open
  return c;
}

Qwen35Params qwen35_params_from_hf(const nlohmann::json& j, const std::string& path) {
  const nlohmann::json& t = text_config(j, path);
  Qwen35Params p;
  p.prefix = opt<std::string>(j, "model_type", "", path) == "qwen3_5" ? "model.language_model." : "model.";
  const uint32_t n = hf_uint(t, "num_hidden_layers", path, hp::layers);
  if (t.contains("layer_types") && !t["layer_types"].is_null()) {
    if (!t["layer_types"].is_array()) throw Error(path + ": layer_types must be a list of strings");
    if (t["layer_types"].size() != n)
      throw Error(path + ": layer_types has " + std::to_string(t["layer_types"].size()) + " entries, num_hidden_layers is " +
                  std::to_string(n));
    for (auto& e : t["layer_types"]) {
      const std::string s = e.is_string() ? e.get<std::string>() : e.dump();
      if (s == "linear_attention" || s == "mamba") p.linear.push_back(true);  // legacy names as transformers remaps
      else if (s == "full_attention" || s == "attention") p.linear.push_back(false);
      else throw Error(path + ": unknown layer type '" + s + "' in layer_types (expected linear_attention or full_attention)");
    }
  } else {
    const uint32_t every = hf_uint_or(t, "full_attention_interval", 4, path, {1, hp::layers.hi});
    for (uint32_t i = 0; i < n; ++i) p.linear.push_back((i + 1) % every != 0);
  }
  p.nk = opt<uint32_t>(t, "linear_num_key_heads", 16, path);
  p.nv = opt<uint32_t>(t, "linear_num_value_heads", 32, path);
  p.dk = opt<uint32_t>(t, "linear_key_head_dim", 128, path);
  p.dv = opt<uint32_t>(t, "linear_value_head_dim", 128, path);
  p.conv_k = opt<uint32_t>(t, "linear_conv_kernel_dim", 4, path);
  if (p.n_linear()) {  // the ranges only matter when there is a DeltaNet layer
    p.nk = hf_uint_or(t, "linear_num_key_heads", 16, path, {1, hp::heads.hi});
    p.nv = hf_uint_or(t, "linear_num_value_heads", 32, path, {1, hp::heads.hi});
    p.dk = hf_uint_or(t, "linear_key_head_dim", 128, path, {1, 256});
    p.dv = hf_uint_or(t, "linear_value_head_dim", 128, path, {1, 1024});
    p.conv_k = hf_uint_or(t, "linear_conv_kernel_dim", 4, path, {2, 16});
    if (p.nv % p.nk) throw Error(path + ": linear_num_value_heads must be a multiple of linear_num_key_heads");
    if (p.value_dim() % 4) throw Error(path + ": linear_num_value_heads * linear_value_head_dim must be a multiple of 4");
  }
  return p;
}

Qwen35Params qwen35_params_from_gguf(const GgufFile& f) {
  const std::string a = "qwen35.";
  Qwen35Params p;
  p.gguf_layout = true;
  const uint32_t n = gguf_uint(f, a + "block_count", hp::layers);
  if (f.has(a + "attention.recurrent_layers")) {
    const auto& r = f.get_int_array(a + "attention.recurrent_layers");
    if (r.size() < n)
      throw Error(f.path() + ": " + a + "attention.recurrent_layers has " + std::to_string(r.size()) + " entries for " +
                  std::to_string(n) + " layers");
    for (uint32_t i = 0; i < n; ++i) p.linear.push_back(r[i] != 0);  // entries past n: MTP layers (not used)
  } else {
    const uint32_t every = gguf_uint_or(f, a + "full_attention_interval", 4, {1, hp::layers.hi});
    for (uint32_t i = 0; i < n; ++i) p.linear.push_back((i + 1) % every != 0);
  }
  if (p.n_linear()) {
    p.conv_k = gguf_uint(f, a + "ssm.conv_kernel", {2, 16});
    p.dk = gguf_uint(f, a + "ssm.state_size", {1, 256});
    p.nk = gguf_uint(f, a + "ssm.group_count", {1, hp::heads.hi});
    p.nv = gguf_uint(f, a + "ssm.time_step_rank", {1, hp::heads.hi});
    const uint32_t inner = gguf_uint(f, a + "ssm.inner_size", {1, uint64_t(p.nv) * 1024});
    if (inner % p.nv)
      throw Error(f.path() + ": " + a + "ssm.inner_size " + std::to_string(inner) + " is not a multiple of ssm.time_step_rank " +
                  std::to_string(p.nv));
    p.dv = uint32_t(inner / p.nv);
    if (p.nv % p.nk) throw Error(f.path() + ": " + a + "ssm.time_step_rank must be a multiple of ssm.group_count");
    if (p.value_dim() % 4) throw Error(f.path() + ": " + a + "ssm.inner_size must be a multiple of 4");
  }
  return p;
}

ModelConfig qwen35_config_from_gguf(const GgufFile& f) {
  const std::string a = "qwen35.";
  ModelConfig c;
  c.arch = "qwen35";
  c.name = f.get_str_or("general.name", "qwen3.5");
  gguf_transformer_shape(f, a, c);
  c.max_context = gguf_uint_or(f, a + "context_length", 262144, hp::context);
  c.rms_eps = float(gguf_real_or(f, a + "attention.layer_norm_rms_epsilon", 1e-6, hp::rms_eps));
  c.rope_base = gguf_real_or(f, a + "rope.freq_base", 10000000.0, hp::rope_base);
  c.rope_dims = gguf_uint_or(f, a + "rope.dimension_count", c.head_dim / 4, {0, c.head_dim});
  if (c.rope_dims == 0 || c.rope_dims > c.head_dim || c.rope_dims % 2)
    throw Error(f.path() + ": " + a + "rope.dimension_count must be even and in [2, head_dim]");
  // Interleaved M-RoPE (rope.dimension_sections) with text positions (all sections at the same
  // position) is the plain rotate_half RoPE of transformers' text path.
  c.rope_neox = true;
  gguf_check_rope_scaling(f, a);
  if (f.get_u64_or(a + "expert_count", 0) != 0) throw Error(f.path() + ": mixture-of-experts qwen35 files are not supported");
  gguf_vocab(f, c);
  qwen35_params_from_gguf(f);  // validates the hybrid fields now, at open
  return c;
}

Qwen35Params qwen35_params(const ModelSource& src) {
  if (src.gguf) return qwen35_params_from_gguf(*src.gguf);
  return qwen35_params_from_hf(src.hf->config(), src.path + "/config.json");
}

namespace {

// Tensor names of one layout: Hugging Face (prefix + transformers' names) or llama.cpp GGUF.
struct Names {
  std::string embed, out_norm, lm_head;
  std::string attn_norm, ffn_norm, gate, up, down;                           // per layer
  std::string qkv, z, b, a, out, conv, a_log, dt_bias, gdn_norm;            // linear attention
  std::string q, k, v, o, q_norm, k_norm;                                   // full attention
  std::string layer;                                                         // layer prefix stem
};

Names names(const Qwen35Params& p) {
  if (p.gguf_layout)
    return {"token_embd.weight", "output_norm.weight", "output.weight",
            "attn_norm.weight", "post_attention_norm.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight",
            "attn_qkv.weight", "attn_gate.weight", "ssm_beta.weight", "ssm_alpha.weight", "ssm_out.weight",
            "ssm_conv1d.weight", "ssm_a", "ssm_dt.bias", "ssm_norm.weight",
            "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight", "attn_q_norm.weight",
            "attn_k_norm.weight", "blk."};
  return {p.prefix + "embed_tokens.weight", p.prefix + "norm.weight", "lm_head.weight",
          "input_layernorm.weight", "post_attention_layernorm.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
          "mlp.down_proj.weight",
          "linear_attn.in_proj_qkv.weight", "linear_attn.in_proj_z.weight", "linear_attn.in_proj_b.weight",
          "linear_attn.in_proj_a.weight", "linear_attn.out_proj.weight", "linear_attn.conv1d.weight",
          "linear_attn.A_log", "linear_attn.dt_bias", "linear_attn.norm.weight",
          "self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight", "self_attn.o_proj.weight",
          "self_attn.q_norm.weight", "self_attn.k_norm.weight", p.prefix + "layers."};
}

}  // namespace

Qwen35Refs qwen35_refs(const TensorStore& ts, const ModelConfig& c, const Qwen35Params& p) {
  const uint64_t d = c.d_model, q = c.q_dim(), kv = c.kv_dim(), f = c.ffn_dim, v = c.vocab;
  const Names n = names(p);
  Qwen35Refs r;
  r.embed = need_t(ts, n.embed, {d, v});
  r.out_norm = need_t(ts, n.out_norm, {d});
  r.lm_head = c.tied_embeddings ? r.embed : need_t(ts, n.lm_head, {d, v});
  for (uint32_t i = 0; i < c.n_layers; ++i) {
    const std::string l = n.layer + std::to_string(i) + ".";
    Qwen35LayerRefs L;
    L.attn_norm = need_t(ts, l + n.attn_norm, {d});
    L.ffn_norm = need_t(ts, l + n.ffn_norm, {d});
    L.w_gate = need_t(ts, l + n.gate, {d, f});
    L.w_up = need_t(ts, l + n.up, {d, f});
    L.w_down = need_t(ts, l + n.down, {f, d});
    if (p.linear[i]) {
      L.w_qkv = need_t(ts, l + n.qkv, {d, p.conv_dim()});
      L.w_z = need_t(ts, l + n.z, {d, p.value_dim()});
      L.w_b = need_t(ts, l + n.b, {d, p.nv});
      L.w_a = need_t(ts, l + n.a, {d, p.nv});
      L.w_out = need_t(ts, l + n.out, {p.value_dim(), d});
      // HF keeps the conv1d weight's middle dimension of 1; the GGUF converter squeezes it
      L.conv = p.gguf_layout ? need_t(ts, l + n.conv, {p.conv_k, p.conv_dim()})
                             : need_t(ts, l + n.conv, {p.conv_k, 1, p.conv_dim()});
      L.a_log = need_t(ts, l + n.a_log, {p.nv});
      L.dt_bias = need_t(ts, l + n.dt_bias, {p.nv});
      L.gdn_norm = need_t(ts, l + n.gdn_norm, {p.dv});
    } else {
      L.wq = need_t(ts, l + n.q, {d, 2 * q});
      L.wk = need_t(ts, l + n.k, {d, kv});
      L.wv = need_t(ts, l + n.v, {d, kv});
      L.wo = need_t(ts, l + n.o, {q, d});
      L.q_norm = need_t(ts, l + n.q_norm, {c.head_dim});
      L.k_norm = need_t(ts, l + n.k_norm, {c.head_dim});
    }
    r.layers.push_back(std::move(L));
  }
  return r;
}

std::vector<uint8_t> qwen35_deinterleave_q(const TensorRef& wq, uint32_t H, uint32_t hd) {
  const uint64_t rows = uint64_t(2) * H * hd;
  if (wq.shape.size() != 2 || wq.shape[1] != rows || wq.nbytes % rows)
    throw Error("q_proj '" + wq.name + "': cannot split rows into per-head query and gate");
  const uint64_t rb = wq.nbytes / rows;  // bytes per row
  std::vector<uint8_t> out(wq.nbytes);
  for (uint32_t h = 0; h < H; ++h)
    for (uint32_t i = 0; i < hd; ++i) {
      // file row h*2hd + i is query row h*hd + i; file row h*2hd + hd + i is gate row h*hd + i
      wq.read((uint64_t(h) * 2 * hd + i) * rb, rb, &out[(uint64_t(h) * hd + i) * rb]);
      wq.read((uint64_t(h) * 2 * hd + hd + i) * rb, rb, &out[(uint64_t(H) * hd + uint64_t(h) * hd + i) * rb]);
    }
  return out;
}

std::vector<float> qwen35_norm_weight(const TensorRef& w, const Qwen35Params& p) {
  std::vector<float> v = dequantize_tensor(w);
  if (!p.gguf_layout)
    for (float& x : v) x = 1.0f + x;
  return v;
}

std::vector<float> qwen35_a_log(const TensorRef& a, const Qwen35Params& p) {
  std::vector<float> v = dequantize_tensor(a);
  if (p.gguf_layout)
    for (float& x : v) {
      if (!(x < 0.0f)) throw Error("tensor '" + a.name + "': ssm_a must be negative (-exp(A_log)), got " + std::to_string(x));
      x = float(std::log(-double(x)));
    }
  return v;
}

std::unique_ptr<Sequence> qwen35_sequence(gpu::Context* ctx, const ModelConfig& c, const Qwen35Params& p,
                                          uint32_t context) {
  std::vector<std::unique_ptr<LayerState>> st;
  for (uint32_t i = 0; i < c.n_layers; ++i) {
    if (p.linear[i])
      st.push_back(std::make_unique<DeltaState>(ctx, i, p.conv_k - 1, p.conv_dim(), p.nv, p.dk, p.dv));
    else
      st.push_back(std::make_unique<KvState>(ctx, i, context, c.kv_dim()));
  }
  return std::make_unique<Sequence>(context, ctx, std::move(st));
}

// ---- The forward, once for both backends ----

namespace {

/// Qwen3.5 over a backend's block interface: Base = CpuModel (kernels' CPU twins) or GpuModel
/// (WGSL kernels); Base::Vector / Ffn / Attention / DeltaNet are that backend's weights.
template <class Base>
class Qwen35Model final : public Base {
 public:
  Qwen35Model(const ModelSource& src, const ModelOptions& opt) : Base(src.config, opt), p_(qwen35_params(src)) {
    const ModelConfig& c = this->c_;
    if constexpr (std::is_same_v<Base, GpuModel>)
      if (opt.kernels.gdn_chunk < 1 || opt.kernels.gdn_chunk > 256 || opt.kernels.gdn_chunk_long > 256)
        throw Error("gdn_chunk must be in [1, 256] and gdn_chunk_long in [0, 256]");
    Qwen35Refs r = qwen35_refs(*src.tensors, c, p_);
    this->embedding(r.embed, c.tied_embeddings ? nullptr : &r.lm_head);
    this->out_norm_ = this->vector(qwen35_norm_weight(r.out_norm, p_), "output_norm");
    for (uint32_t i = 0; i < c.n_layers; ++i) {
      const Qwen35LayerRefs& R = r.layers[i];
      const std::string p = "blk." + std::to_string(i) + ".";
      Layer L;
      L.linear = p_.linear[i];
      L.norm = this->vector(qwen35_norm_weight(R.attn_norm, p_), p + "attn_norm");
      L.ffn_norm = this->vector(qwen35_norm_weight(R.ffn_norm, p_), p + "ffn_norm");
      if (L.linear) {
        ++n_lin_;
        L.delta = this->delta_net_weights(R.w_qkv, R.w_z, R.w_b, R.w_a, R.w_out, R.conv, qwen35_a_log(R.a_log, p_),
                                          R.dt_bias, R.gdn_norm, p_.shape(), p);
      } else {
        ++n_attn_;
        const std::vector<uint8_t> q = qwen35_deinterleave_q(R.wq, c.n_heads, c.head_dim);
        TensorRef wq = R.wq;  // rows [all q | all gates]
        wq.data = q.data();
        wq.reader = nullptr;
        const std::vector<float> qn = qwen35_norm_weight(R.q_norm, p_), kn = qwen35_norm_weight(R.k_norm, p_);
        AttentionTensors t{&wq, &R.wk, &R.wv, &R.wo};
        t.q_norm = &qn;
        t.k_norm = &kn;
        t.gate = true;
        L.attention = this->attention_weights(t, p);
      }
      L.ffn = this->ffn_weights(R.w_gate, R.w_up, R.w_down, p, FfnOptions{});
      layers_.push_back(std::move(L));
    }
    if constexpr (std::is_same_v<Base, GpuModel>) {
      this->ctx_->wait_idle();  // the RoPE table is made by new_sequence(), sized by the sequence's context
      const uint32_t S = n_attn_ ? GpuModel::attention_stride(c, /*gate=*/true) : 0;
      const DeltaNetShape sh = p_.shape();
      const uint32_t DS = n_lin_ ? GpuModel::delta_net_stride(sh) : 0;
      this->alloc_chunk_buffers({{&this->proj_, std::max(S, DS), "proj"},
                                 // attention rows: the projection's stride S (the gate's)
                                 {&this->att_, std::max(S, n_lin_ ? sh.value_dim() : 0), "mixer_out"},
                                 {&this->gdn_conv_, n_lin_ ? sh.conv_dim() : 0, "gdn_conv_out"},
                                 {&this->gdn_gates_, n_lin_ ? 2 * sh.nv : 0, "gdn_gates"},
                                 {&this->gu_, 2 * c.ffn_dim, "gate_up"},
                                 {&this->act_, c.ffn_dim, "ffn_act"}});
      if (n_lin_) this->alloc_delta_net_scratch(sh);
    }
  }

  std::unique_ptr<Sequence> new_sequence(uint32_t ctx) override {
    const ModelConfig& c = this->c_;
    SequenceSize s;
    s.context = this->sequence_length(ctx);
    const uint64_t kvb = uint64_t(s.context) * c.kv_dim() * 4, conv = uint64_t(p_.conv_k - 1) * p_.conv_dim() * 4,
                   ssm = uint64_t(p_.nv) * p_.dk * p_.dv * 4;
    s.kv_cache = 2ull * n_attn_ * kvb;
    s.recurrent = uint64_t(n_lin_) * (conv + ssm);
    s.largest_buffer = std::max({n_attn_ ? kvb : 0, n_lin_ ? conv : 0, n_lin_ ? ssm : 0});
    return this->make_sequence(s, true, [&] { return qwen35_sequence(this->device(), c, p_, s.context); });
  }

 private:
  struct Layer {
    bool linear = false;
    typename Base::Vector norm, ffn_norm;  // input_layernorm, post_attention_layernorm: (1 + w)
    typename Base::Ffn ffn;
    typename Base::Attention attention;    // "full_attention" layers (gated, QK-norm (1 + w))
    typename Base::DeltaNet delta;         // "linear_attention" layers
  };

  // Qwen3_5DecoderLayer: x += mixer(input_layernorm(x)); x += mlp(post_attention_layernorm(x)).
  void body(typename Base::Pass& p) override {
    for (uint32_t l = 0; l < this->c_.n_layers; ++l) {
      const Layer& L = layers_[l];
      if (L.linear) this->delta_net(p, l, L.norm, L.delta);
      else this->attention(p, l, L.norm, L.attention);
      this->gated_ffn(p, L.ffn_norm, L.ffn);
    }
  }

  Qwen35Params p_;
  uint32_t n_attn_ = 0, n_lin_ = 0;
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> create_qwen35_cpu(const ModelSource& src, const ModelOptions& opt) {
  return std::make_unique<Qwen35Model<CpuModel>>(src, opt);
}

std::unique_ptr<Model> create_qwen35_gpu(const ModelSource& src, const ModelOptions& opt) {
  return std::make_unique<Qwen35Model<GpuModel>>(src, opt);
}

}  // namespace wgllm
