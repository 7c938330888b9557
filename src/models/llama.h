// The llama family, one file pair (llama.cpp): Llama, Qwen2 / Qwen2.5 and Gemma 3 text decoders:
// hyper-parameters beyond ModelConfig, config parsing for both layouts (GGUF metadata, HF
// config.json), tensor names and shape checks, and the forward, written once over the block
// interface of CpuModel / GpuModel (models/blocks.h). Shapes are ggml order {in, out}: a Linear
// weight W[out][in].
//
// Llama (transformers models/llama/modeling_llama.py, LlamaDecoderLayer): per layer
//   x += wo attention(rope(wq h), rope(wk h), wv h),  h = rmsnorm(x) * input_layernorm
//   x += down(silu(gate(h)) * up(h)),                 h = rmsnorm(x) * post_attention_layernorm
// then logits = lm_head(rmsnorm(x) * norm), lm_head tied to the embedding or not. GGUF llama files
// come from a converter that permutes Q/K rows for the (2i, 2i+1) RoPE pair layout; HF files keep
// rotate_half (i, i + d/2).
//
// Qwen2 / Qwen2.5 (GGUF "qwen2", config.json model_type "qwen2"): Llama's decoder with biases on
// the Q, K and V projections, y = W x + b, added before RoPE; the output projection and the FFN
// have none. Sources: transformers models/qwen2/modeling_qwen2.py (Qwen2Attention: q_proj / k_proj /
// v_proj `nn.Linear(..., bias=True)`, o_proj `bias=False`; rotate_half, i.e. the NeoX pair layout)
// and llama.cpp (LLM_ARCH_QWEN2 uses LLAMA_ROPE_TYPE_NEOX, its converter does not permute Q/K;
// tensors blk.N.attn_{q,k,v}.bias), cited from memory of those files. RoPE theta from
// `qwen2.rope.freq_base` / rope_theta (1e6 for Qwen2.5). Sliding-window attention
// (use_sliding_window, off in every released Qwen2.5) is refused.
//
// Gemma 3 (GGUF "gemma3"; config.json model_type "gemma3_text"), from transformers
// models/gemma3/modeling_gemma3.py cross-checked against llama.cpp's gemma3 graph and
// convert_hf_to_gguf.py (cited from memory, not fetched):
//   x = embed(tokens) * sqrt(d_model)                     Gemma3TextScaledWordEmbedding (llama.cpp
//                                                         scales in f32)
//   per layer l:
//     h = rmsnorm(x) * w_attn_norm                        input_layernorm
//     q, k, v = Wq h, Wk h, Wv h                          no biases
//     q, k = per-head rmsnorm(q) * w_q_norm, (k) * w_k_norm   over head_dim, before RoPE
//     q, k = rope_neox(q, k, pos, theta_l)                theta_l = rope_local_base (10000) on sliding
//                                                         layers, rope.freq_base on global ones
//     a = softmax(q k^T * s + mask) v                     s = query_pre_attn_scalar^-0.5 = head_dim^-0.5
//                                                         in every released size but 27B (GGUF has no
//                                                         key; llama.cpp uses 1/sqrt(head_dim) too); on
//                                                         sliding layers keys with pos_q - pos_k >= W
//                                                         are hidden
//     x = x + rmsnorm(Wo a) * w_post_attn_norm            post_attention_layernorm
//     h = rmsnorm(x) * w_ffn_norm                         pre_feedforward_layernorm
//     x = x + rmsnorm(Wd (gelu_tanh(Wg h) * Wu h)) * w_post_ffw_norm   Gemma3MLP (gelu_pytorch_tanh)
//   logits = lm_head(rmsnorm(x) * w_out_norm)             tied; cap * tanh(l / cap) when
//                                                         final_logit_softcapping is set (not in Gemma 3)
// Gemma3RMSNorm multiplies by (1 + w); llama.cpp's converter stores w + 1 in the GGUF (every
// `*norm.weight`), so the GGUF weights multiply directly. Layer l is global when
// (l + 1) % pattern == 0, pattern 6 (llama.cpp hparams.set_swa_pattern(6)); window W from
// gemma3.attention.sliding_window (512 for 270m / 1B).
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
/// `qwen2.*` metadata (llama's keys) with rope_neox = true.
ModelConfig qwen2_config_from_gguf(const GgufFile& f);
/// A transformers Qwen2Config: llama's fields, rope_neox; refuses use_sliding_window = true.
ModelConfig qwen2_config_from_hf(const nlohmann::json& cfg, const std::string& path);
/// `gemma3.*` metadata: llama's keys (key_length = head_dim 256 != d_model / heads) plus
/// attention.sliding_window (required); rope_neox, tied embeddings.
ModelConfig gemma3_config_from_gguf(const GgufFile& f);
/// Throws: Gemma 3 from a Hugging Face directory is not wired yet (its norms store w, not w + 1).
ModelConfig gemma3_config_from_hf(const nlohmann::json& cfg, const std::string& path);

/// Gemma 3 hyper-parameters beyond ModelConfig.
struct Gemma3Params {
  uint32_t sliding_window = 0;       // W: keys with pos_q - pos_k >= W are hidden on sliding layers
  uint32_t swa_pattern = 6;          // layer l is global when (l + 1) % swa_pattern == 0
  double rope_local_base = 10000.0; // RoPE theta of sliding layers (global: ModelConfig::rope_base)
  float attn_scale = 0;              // query_pre_attn_scalar^-0.5 (GGUF: head_dim^-0.5)
  float embed_scale = 0;             // sqrt(d_model)
  float final_softcap = 0;           // 0 = none
  bool sliding(uint32_t layer) const { return (layer + 1) % swa_pattern != 0; }
};
/// The params of an opened gemma3 source (GGUF only). Throws wgllm::Error naming the key.
Gemma3Params gemma3_params(const ModelSource& src);

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
  bool has_gemma_norms() const { return !q_norm.shape.empty(); }
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
/// blocks, chosen by ModelConfig::arch. Sequence state: a KV cache [ctx, kv_dim] f32 (K and V)
/// per layer; on WebGPU, sequences made together share KV pools (GpuModel::new_sequences; not
/// Gemma 3). WebGPU refuses a final logit softcap.
std::unique_ptr<Model> create_llama_cpu(const ModelSource& src, const ModelOptions& opt);
std::unique_ptr<Model> create_llama_gpu(const ModelSource& src, const ModelOptions& opt);

}  // namespace wgllm
