// Gemma 3 text decoder (GGUF general.architecture "gemma3"; config.json model_type "gemma3_text").
//
// Formulas (transformers models/gemma3/modeling_gemma3.py, cited from memory of the file, not
// fetched; cross-checked against llama.cpp's gemma3 graph and convert_hf_to_gguf.py, also from
// memory):
//   x = embed(tokens) * sqrt(d_model)                     Gemma3TextScaledWordEmbedding (llama.cpp
//                                                         scales in f32: ggml_scale(x, sqrtf(n_embd)))
//   per layer l:
//     h = rmsnorm(x) * w_attn_norm                        input_layernorm
//     q, k, v = Wq h, Wk h, Wv h                          no biases
//     q, k = per-head rmsnorm(q) * w_q_norm, (k) * w_k_norm   q_norm / k_norm over head_dim, before RoPE
//     q, k = rope_neox(q, k, pos, theta_l)                rotate_half; theta_l = 10000 (rope_local_base_freq)
//                                                         on sliding layers, rope.freq_base on global ones
//     a = softmax(q k^T * s + mask) v                     s = query_pre_attn_scalar^-0.5 (= head_dim in every
//                                                         released size but 27B; GGUF has no key, llama.cpp
//                                                         uses 1/sqrt(head_dim) likewise); on sliding layers
//                                                         the mask also hides keys with pos_q - pos_k >= W
//     x = x + rmsnorm(Wo a) * w_post_attn_norm            post_attention_layernorm
//     h = rmsnorm(x) * w_ffn_norm                         pre_feedforward_layernorm
//     x = x + rmsnorm(Wd (gelu_tanh(Wg h) * Wu h)) * w_post_ffw_norm   Gemma3MLP (gelu_pytorch_tanh),
//                                                         post_feedforward_layernorm
//   logits = lm_head(rmsnorm(x) * w_out_norm)             tied to the embedding; cap * tanh(l / cap)
//                                                         when final_logit_softcapping is set (not in Gemma 3)
// Gemma3RMSNorm multiplies by (1 + w); llama.cpp's converter stores w + 1 in the GGUF (every
// `*norm.weight`), so the GGUF weights multiply directly, as in every other model here.
// Sliding (local) layers: layer l is global when (l + 1) % pattern == 0, pattern 6
// (sliding_window_pattern; llama.cpp hparams.set_swa_pattern(6)); window W from
// gemma3.attention.sliding_window (512 for 270m/1B).
// gelu_tanh(a) = 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3))).
//
// The forward is the llama family's (models/llama.cpp) with these extras as the blocks' options
// (AttentionTensors: QK-norm, post-norm, window, local RoPE, scale; FfnOptions: GeGLU, post-norm;
// the scale block), switched on when ModelConfig::arch is "gemma3"; on WebGPU the sliding layers
// pass the window to the attention kernels (kernels::AttentionShape::window).
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "models/config.h"
#include "models/model.h"

namespace wgllm {

class GgufFile;
struct ModelSource;

/// Gemma 3 hyper-parameters beyond ModelConfig.
struct Gemma3Params {
  uint32_t sliding_window = 0;   // W: keys with pos_q - pos_k >= W are hidden on sliding layers
  uint32_t swa_pattern = 6;      // layer l is global when (l + 1) % swa_pattern == 0
  double rope_local_base = 10000.0;  // RoPE theta of sliding layers (global: ModelConfig::rope_base)
  float attn_scale = 0;          // query_pre_attn_scalar^-0.5
  float embed_scale = 0;         // sqrt(d_model)
  float final_softcap = 0;       // 0 = none
  bool sliding(uint32_t layer) const { return (layer + 1) % swa_pattern != 0; }
};

/// `gemma3.*` metadata: llama's keys (key_length = head_dim 256 != d_model / heads) plus
/// attention.sliding_window (required); rope_neox, tied embeddings.
ModelConfig gemma3_config_from_gguf(const GgufFile& f);
/// A transformers Gemma3TextConfig (model_type gemma3_text).
ModelConfig gemma3_config_from_hf(const nlohmann::json& cfg, const std::string& path);
/// The params of an opened gemma3 source (either layout). Throws wgllm::Error naming the key.
Gemma3Params gemma3_params(const ModelSource& src);

std::unique_ptr<Model> create_gemma3_cpu(const ModelSource& src, const ModelOptions& opt);
std::unique_ptr<Model> create_gemma3_gpu(const ModelSource& src, const ModelOptions& opt);

}  // namespace wgllm
