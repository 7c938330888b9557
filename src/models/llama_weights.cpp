#include "models/llama_weights.h"

#include "core/error.h"

namespace wgllm {
namespace {

TensorRef need(const TensorStore& ts, const std::string& name, std::vector<uint64_t> shape) {
  return require_tensor(ts, name, {std::move(shape)});
}

}  // namespace

LlamaRefs llama_refs(const TensorStore& ts, const ModelConfig& c, bool g) {
  const uint64_t d = c.d_model, q = c.q_dim(), kv = c.kv_dim(), f = c.ffn_dim, v = c.vocab;
  LlamaRefs r;
  r.embed = need(ts, g ? "token_embd.weight" : "model.embed_tokens.weight", {d, v});
  r.out_norm = need(ts, g ? "output_norm.weight" : "model.norm.weight", {d});
  if (c.tied_embeddings)
    r.lm_head = r.embed;
  else
    r.lm_head = need(ts, g ? "output.weight" : "lm_head.weight", {d, v});
  for (uint32_t i = 0; i < c.n_layers; ++i) {
    const std::string p = g ? "blk." + std::to_string(i) + "." : "model.layers." + std::to_string(i) + ".";
    auto n = [&](const char* gguf, const char* hf) { return p + (g ? gguf : hf) + ".weight"; };
    LlamaLayerRefs L;
    L.attn_norm = need(ts, n("attn_norm", "input_layernorm"), {d});
    L.wq = need(ts, n("attn_q", "self_attn.q_proj"), {d, q});
    L.wk = need(ts, n("attn_k", "self_attn.k_proj"), {d, kv});
    L.wv = need(ts, n("attn_v", "self_attn.v_proj"), {d, kv});
    L.wo = need(ts, n("attn_output", "self_attn.o_proj"), {q, d});
    if (c.arch == "qwen2") {
      auto b = [&](const char* gguf, const char* hf) { return p + (g ? gguf : hf) + ".bias"; };
      L.bq = need(ts, b("attn_q", "self_attn.q_proj"), {q});
      L.bk = need(ts, b("attn_k", "self_attn.k_proj"), {kv});
      L.bv = need(ts, b("attn_v", "self_attn.v_proj"), {kv});
    }
    if (c.arch == "gemma3") {
      if (!g) throw Error(ts.source() + ": gemma3 needs GGUF tensor names");
      L.q_norm = need(ts, n("attn_q_norm", ""), {c.head_dim});
      L.k_norm = need(ts, n("attn_k_norm", ""), {c.head_dim});
      L.post_attn_norm = need(ts, n("post_attention_norm", ""), {d});
      L.post_ffn_norm = need(ts, n("post_ffw_norm", ""), {d});
    }
    L.ffn_norm = need(ts, n("ffn_norm", "post_attention_layernorm"), {d});
    L.w_gate = need(ts, n("ffn_gate", "mlp.gate_proj"), {d, f});
    L.w_up = need(ts, n("ffn_up", "mlp.up_proj"), {d, f});
    L.w_down = need(ts, n("ffn_down", "mlp.down_proj"), {f, d});
    r.layers.push_back(std::move(L));
  }
  return r;
}

}  // namespace wgllm
