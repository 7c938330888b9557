// Llama-family tensor names and shape checks, for GGUF (llama.cpp names) and HF (transformers
// LlamaForCausalLM names). Shapes are ggml order {in, out}: a Linear weight W[out][in].
#pragma once
#include <vector>

#include "formats/tensor_store.h"
#include "models/config.h"

namespace wgllm {

struct LlamaLayerRefs {
  TensorRef attn_norm;       // {d_model} f32
  TensorRef wq, wk, wv, wo;  // {d, q_dim}, {d, kv_dim}, {d, kv_dim}, {q_dim, d}
  TensorRef ffn_norm;        // {d_model}
  TensorRef w_gate, w_up;    // {d, ffn}
  TensorRef w_down;          // {ffn, d}
  // Q/K/V projection biases {q_dim}, {kv_dim}, {kv_dim}: present for qwen2 (models/qwen2.h), which
  // adds them after the projections (y = W x + b); absent (empty shape) for llama.
  TensorRef bq, bk, bv;
  bool has_qkv_bias() const { return !bq.shape.empty(); }
  // Gemma 3 (models/gemma3.h): per-head q/k RMSNorm weights {head_dim} and the post-attention /
  // post-FFN RMSNorm weights {d}; absent (empty shape) otherwise.
  TensorRef q_norm, k_norm, post_attn_norm, post_ffn_norm;
  bool has_gemma_norms() const { return !q_norm.shape.empty(); }
};

struct LlamaRefs {
  TensorRef embed;     // {d, vocab}
  TensorRef out_norm;  // {d}
  TensorRef lm_head;   // {d, vocab}; the embedding when tied
  std::vector<LlamaLayerRefs> layers;
};

/// Finds every tensor and checks its shape. The Q/K/V biases are read (and required) when
/// c.arch is "qwen2" (GGUF attn_{q,k,v}.bias, HF self_attn.{q,k,v}_proj.bias), the Gemma 3 norms
/// when it is "gemma3" (GGUF attn_{q,k}_norm, post_attention_norm, post_ffw_norm). Throws wgllm::Error naming the missing tensor or the
/// expected and actual shape.
LlamaRefs llama_refs(const TensorStore& ts, const ModelConfig& c, bool gguf_names);

}  // namespace wgllm
