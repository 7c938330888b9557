#include "models/llama.h"

#include <cmath>
#include <optional>
#include <string>
#include <type_traits>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/gguf.h"
#include "models/cpu_common.h"
#include "models/gemma3.h"
#include "models/gpu_common.h"
#include "models/source.h"

namespace wgllm {

// ---- Config ----

ModelConfig llama_config_from_gguf(const GgufFile& f) {
  ModelConfig c;
  c.arch = f.get_str("general.architecture");
  const std::string a = c.arch + ".";
  c.name = f.get_str_or("general.name", c.arch);
  gguf_transformer_shape(f, a, c);
  c.max_context = gguf_uint_or(f, a + "context_length", 2048, hp::context);
  c.rms_eps = float(gguf_real_or(f, a + "attention.layer_norm_rms_epsilon", 1e-5, hp::rms_eps));
  c.rope_base = gguf_real_or(f, a + "rope.freq_base", 10000.0, hp::rope_base);
  c.rope_dims = gguf_uint_or(f, a + "rope.dimension_count", c.head_dim, {2, c.head_dim});
  c.rope_neox = false;  // llama.cpp's converter permutes Q/K rows for the (2i, 2i+1) layout
  gguf_check_rope_scaling(f, a);
  gguf_vocab(f, c);
  return c;
}

ModelConfig llama_config_from_hf(const nlohmann::json& j, const std::string& path) {
  ModelConfig c;
  c.arch = opt<std::string>(j, "model_type", "", path);
  c.name = opt<std::string>(j, "_name_or_path", c.arch, path);
  c.n_layers = hf_uint(j, "num_hidden_layers", path, hp::layers);
  c.d_model = hf_uint(j, "hidden_size", path, hp::d_model);
  c.ffn_dim = hf_uint(j, "intermediate_size", path, hp::ffn);
  hf_attention_shape(j, path, c);
  c.vocab = hf_uint(j, "vocab_size", path, hp::vocab);
  c.max_context = hf_uint_or(j, "max_position_embeddings", 2048, path, hp::context);
  c.rms_eps = float(hf_real_or(j, "rms_norm_eps", 1e-6, path, hp::rms_eps));
  // RoPE: transformers 5 rope_parameters, or the top-level rope_theta of older configs.
  if (j.contains("rope_parameters") && !j["rope_parameters"].is_null()) {
    const auto& rp = j["rope_parameters"];
    if (!rp.is_object()) throw Error(path + ": config.json rope_parameters must be an object");
    const std::string type = opt<std::string>(rp, "rope_type", "default", path);
    if (type != "default") throw Error(path + ": config.json rope_parameters.rope_type '" + type + "' is not supported");
    c.rope_base = hf_real_or(rp, "rope_theta", opt<double>(j, "rope_theta", 10000.0, path), path, hp::rope_base,
                             "rope_parameters");
  } else {
    c.rope_base = hf_real_or(j, "rope_theta", 10000.0, path, hp::rope_base);
  }
  if (j.contains("rope_scaling") && !j["rope_scaling"].is_null())
    throw Error(path + ": rope_scaling is not supported yet");
  const double prf = hf_real_or(j, "partial_rotary_factor", 1.0, path, {0.0, 1.0, true});
  if (prf != 1.0) throw Error(path + ": config.json partial_rotary_factor " + fmt::format("{:.9g}", prf) + " is not supported for llama (only 1)");
  if (opt<std::string>(j, "hidden_act", "silu", path) != "silu")
    throw Error(path + ": config.json hidden_act '" + j["hidden_act"].get<std::string>() + "' is not supported (only silu)");
  for (const char* b : {"attention_bias", "mlp_bias"})
    if (opt<bool>(j, b, false, path)) throw Error(path + ": config.json " + b + " = true is not supported");
  c.rope_dims = c.head_dim;
  c.rope_neox = true;  // HF rotate_half layout
  c.tied_embeddings = opt<bool>(j, "tie_word_embeddings", false, path);
  return c;
}

// ---- Tensors ----

LlamaRefs llama_refs(const TensorStore& ts, const ModelConfig& c, bool g) {
  const uint64_t d = c.d_model, q = c.q_dim(), kv = c.kv_dim(), f = c.ffn_dim, v = c.vocab;
  auto need = [&](const std::string& name, std::vector<uint64_t> shape) { return require_tensor(ts, name, {std::move(shape)}); };
  LlamaRefs r;
  r.embed = need(g ? "token_embd.weight" : "model.embed_tokens.weight", {d, v});
  r.out_norm = need(g ? "output_norm.weight" : "model.norm.weight", {d});
  r.lm_head = c.tied_embeddings ? r.embed : need(g ? "output.weight" : "lm_head.weight", {d, v});
  for (uint32_t i = 0; i < c.n_layers; ++i) {
    const std::string p = g ? "blk." + std::to_string(i) + "." : "model.layers." + std::to_string(i) + ".";
    auto n = [&](const char* gguf, const char* hf) { return p + (g ? gguf : hf) + ".weight"; };
    LlamaLayerRefs L;
    L.attn_norm = need(n("attn_norm", "input_layernorm"), {d});
    L.wq = need(n("attn_q", "self_attn.q_proj"), {d, q});
    L.wk = need(n("attn_k", "self_attn.k_proj"), {d, kv});
    L.wv = need(n("attn_v", "self_attn.v_proj"), {d, kv});
    L.wo = need(n("attn_output", "self_attn.o_proj"), {q, d});
    if (c.arch == "qwen2") {
      auto b = [&](const char* gguf, const char* hf) { return p + (g ? gguf : hf) + ".bias"; };
      L.bq = need(b("attn_q", "self_attn.q_proj"), {q});
      L.bk = need(b("attn_k", "self_attn.k_proj"), {kv});
      L.bv = need(b("attn_v", "self_attn.v_proj"), {kv});
    }
    if (c.arch == "gemma3") {
      if (!g) throw Error(ts.source() + ": gemma3 needs GGUF tensor names");
      L.q_norm = need(n("attn_q_norm", ""), {c.head_dim});
      L.k_norm = need(n("attn_k_norm", ""), {c.head_dim});
      L.post_attn_norm = need(n("post_attention_norm", ""), {d});
      L.post_ffn_norm = need(n("post_ffw_norm", ""), {d});
    }
    L.ffn_norm = need(n("ffn_norm", "post_attention_layernorm"), {d});
    L.w_gate = need(n("ffn_gate", "mlp.gate_proj"), {d, f});
    L.w_up = need(n("ffn_up", "mlp.up_proj"), {d, f});
    L.w_down = need(n("ffn_down", "mlp.down_proj"), {f, d});
    r.layers.push_back(std::move(L));
  }
  return r;
}

// ---- The forward, once for both backends ----

namespace {

/// The llama family over a backend's block interface: Base = CpuModel (kernels' CPU twins) or
/// GpuModel (WGSL kernels).
template <class Base>
class LlamaModel final : public Base {
  static constexpr bool kGpu = std::is_same_v<Base, GpuModel>;

 public:
  LlamaModel(const ModelSource& src, const ModelOptions& opt) : Base(src.config, opt) {
    const ModelConfig& c = this->c_;
    if (c.arch == "gemma3") {
      gemma_ = gemma3_params(src);
      if constexpr (kGpu)
        if (gemma_->final_softcap > 0) throw Error(src.path + ": gemma3 final logit softcapping is not supported on WebGPU yet");
      this->rope_local_base_ = gemma_->rope_local_base;
      if constexpr (!kGpu) this->final_softcap_ = gemma_->final_softcap;
    }
    LlamaRefs r = llama_refs(*src.tensors, c, src.is_gguf());
    this->embedding(r.embed, c.tied_embeddings ? nullptr : &r.lm_head);
    this->out_norm_ = this->vector(r.out_norm, "output_norm");
    for (uint32_t i = 0; i < c.n_layers; ++i) {
      const LlamaLayerRefs& R = r.layers[i];
      const std::string p = "blk." + std::to_string(i) + ".";
      Layer L;
      L.norm = this->vector(R.attn_norm, p + "attn_norm");
      L.ffn_norm = this->vector(R.ffn_norm, p + "ffn_norm");
      AttentionTensors t{&R.wq, &R.wk, &R.wv, &R.wo};
      if (R.has_qkv_bias()) {
        t.bq = &R.bq;
        t.bk = &R.bk;
        t.bv = &R.bv;
      }
      FfnOptions f;
      std::vector<float> qn, kn;
      if (gemma_) {
        qn = dequantize_tensor(R.q_norm);
        kn = dequantize_tensor(R.k_norm);
        t.q_norm = &qn;
        t.k_norm = &kn;
        t.post_norm = &R.post_attn_norm;
        t.scale = gemma_->attn_scale;
        if (gemma_->sliding(i)) {
          t.window = gemma_->sliding_window;
          t.local_rope = true;
        }
        f = {true, &R.post_ffn_norm};
      }
      L.attention = this->attention_weights(t, p);
      L.ffn = this->ffn_weights(R.w_gate, R.w_up, R.w_down, p, f);
      layers_.push_back(std::move(L));
    }
    if constexpr (kGpu) {
      this->kv_pools_ = true;
      this->pool_batching_ = !gemma_;
      this->ctx_->wait_idle();  // the RoPE table is made by new_sequence(), sized by the sequence's context
      const uint64_t F = c.ffn_dim;
      this->alloc_chunk_buffers({{&this->proj_, GpuModel::attention_stride(c, /*gate=*/false), "qkv"},
                                 {&this->att_, c.q_dim(), "attn_out"},
                                 {&this->gu_, 2 * F, "gate_up"},
                                 {&this->act_, F, "ffn_act"}});
    }
  }

  std::unique_ptr<Sequence> new_sequence(uint32_t ctx) override {
    const ModelConfig& c = this->c_;
    const SequenceSize s = SequenceSize::all_attention(this->sequence_length(ctx), c.n_layers, c.kv_dim());
    return this->make_sequence(s, /*rope=*/true, [&] {
      std::vector<std::unique_ptr<LayerState>> st;
      for (uint32_t i = 0; i < c.n_layers; ++i)
        st.push_back(std::make_unique<KvState>(this->device(), i, s.context, c.kv_dim()));
      return std::make_unique<Sequence>(s.context, this->device(), std::move(st));
    });
  }

 private:
  struct Layer {
    typename Base::Vector norm, ffn_norm;  // input_layernorm, post_attention_layernorm (pre_feedforward)
    typename Base::Attention attention;
    typename Base::Ffn ffn;
  };

  void body(typename Base::Pass& p) override {
    if (gemma_) this->scale(p, gemma_->embed_scale);
    for (uint32_t l = 0; l < this->c_.n_layers; ++l) {
      const Layer& L = layers_[l];
      this->attention(p, l, L.norm, L.attention);
      this->gated_ffn(p, L.ffn_norm, L.ffn);
    }
  }

  std::optional<Gemma3Params> gemma_;
  std::vector<Layer> layers_;
};

}  // namespace

std::unique_ptr<Model> create_llama_cpu(const ModelSource& src, const ModelOptions& opt) {
  return std::make_unique<LlamaModel<CpuModel>>(src, opt);
}

std::unique_ptr<Model> create_llama_gpu(const ModelSource& src, const ModelOptions& opt) {
  return std::make_unique<LlamaModel<GpuModel>>(src, opt);
}

}  // namespace wgllm
