// Llama, and the forward of the llama family (llama.cpp): config parsing for both layouts (GGUF
// metadata, HF config.json), the family's tensor names and shape checks, and one forward written
// over the block interface of CpuModel / GpuModel (models/blocks.h) for Llama, Qwen2 (its biases;
// config in models/qwen2.{h,cpp}) and Gemma 3 (its per-layer options; config and params in
// models/gemma3.{h,cpp}). Shapes are ggml order {in, out}: a Linear weight W[out][in].
//
// Llama (transformers models/llama/modeling_llama.py, LlamaDecoderLayer): per layer
//   x += wo attention(rope(wq h), rope(wk h), wv h),  h = rmsnorm(x) * input_layernorm
//   x += down(silu(gate(h)) * up(h)),                 h = rmsnorm(x) * post_attention_layernorm
// then logits = lm_head(rmsnorm(x) * norm), lm_head tied to the embedding or not. GGUF llama files
// come from a converter that permutes Q/K rows for the (2i, 2i+1) RoPE pair layout; HF files keep
// rotate_half (i, i + d/2).
//
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "formats/tensor_store.h"
#include "models/config.h"
#include "models/model.h"

namespace wgllm {

class GgufFile;
struct ModelSource;

// ---- Config ----

/// `<arch>.*` GGUF metadata with llama.cpp's key names (block_count, embedding_length,
/// attention.head_count(_kv), key_length, rope.freq_base, rope.dimension_count, ...); RoPE in the
/// (2i, 2i+1) layout. Throws wgllm::Error naming a missing or out-of-range key.
ModelConfig llama_config_from_gguf(const GgufFile& f);
/// A transformers LlamaConfig; refuses rope scaling, partial_rotary_factor != 1, hidden_act other
/// than silu, attention_bias / mlp_bias.
ModelConfig llama_config_from_hf(const nlohmann::json& j, const std::string& path);

// ---- Tensors ----

struct LlamaLayerRefs {
  TensorRef attn_norm;       // {d_model} f32
  TensorRef wq, wk, wv, wo;  // {d, q_dim}, {d, kv_dim}, {d, kv_dim}, {q_dim, d}
  TensorRef ffn_norm;        // {d_model}
  TensorRef w_gate, w_up;    // {d, ffn}
  TensorRef w_down;          // {ffn, d}
  // Q/K/V projection biases {q_dim}, {kv_dim}, {kv_dim} (qwen2); absent (empty shape) otherwise.
  TensorRef bq, bk, bv;
  bool has_qkv_bias() const { return !bq.shape.empty(); }
  // Gemma 3: per-head q/k RMSNorm weights {head_dim} and the post-attention / post-FFN RMSNorm
  // weights {d}; absent (empty shape) otherwise.
  TensorRef q_norm, k_norm, post_attn_norm, post_ffn_norm;
};

struct LlamaRefs {
  TensorRef embed;     // {d, vocab}
  TensorRef out_norm;  // {d}
  TensorRef lm_head;   // {d, vocab}; the embedding when tied
  std::vector<LlamaLayerRefs> layers;
};

/// Finds every tensor and checks its shape. The Q/K/V biases are read (and required) when c.arch
/// is "qwen2" (GGUF attn_{q,k,v}.bias, HF self_attn.{q,k,v}_proj.bias), the Gemma 3 norms when it
/// is "gemma3" (GGUF attn_{q,k}_norm, post_attention_norm, post_ffw_norm). Throws wgllm::Error
/// naming the missing tensor or the expected and actual shape.
LlamaRefs llama_refs(const TensorStore& ts, const ModelConfig& c, bool gguf_names);

// ---- Models ----

/// The family on the CPU reference backend / on WebGPU: the same forward over each backend's
/// blocks, its variant chosen by ModelConfig::arch ("llama", "qwen2", "gemma3"). Sequence state: a
/// KV cache [ctx, kv_dim] f32 (K and V) per layer; on WebGPU, sequences made together share KV
/// pools (GpuModel::new_sequences; not Gemma 3). WebGPU refuses a final logit softcap.
std::unique_ptr<Model> create_llama_cpu(const ModelSource& src, const ModelOptions& opt);
std::unique_ptr<Model> create_llama_gpu(const ModelSource& src, const ModelOptions& opt);

}  // namespace wgllm
