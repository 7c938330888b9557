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
};

struct LlamaRefs {
  TensorRef embed;     // {d, vocab}
  TensorRef out_norm;  // {d}
  TensorRef lm_head;   // {d, vocab}; the embedding when tied
  std::vector<LlamaLayerRefs> layers;
};

/// Finds every tensor and checks its shape. Throws wgllm::Error naming the missing tensor or the
/// expected and actual shape.
LlamaRefs llama_refs(const TensorStore& ts, const ModelConfig& c, bool gguf_names);

}  // namespace wgllm
