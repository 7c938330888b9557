// Qwen3.5 text model (transformers `qwen3_5_text` / the text part of `qwen3_5`), one file pair
// (qwen35.cpp): hyper-parameters beyond ModelConfig, tensor names and shape checks, and the
// forward, written once over the block interface of CpuModel / GpuModel. Architecture (transformers
// models/qwen3_5/modeling_qwen3_5.py, Qwen3_5DecoderLayer): every layer is x += mixer(norm(x));
// x += SwiGLU(norm(x)) with RMSNorm weights applied as (1 + w) (Qwen3_5RMSNorm). The mixer is either
//   - "linear_attention": Gated DeltaNet (Qwen3_5GatedDeltaNet): in_proj_qkv -> depthwise causal
//     conv1d (kernel conv_k, no bias) + SiLU -> q, k L2-normalised per head, q scaled by dk^-1/2;
//     beta = sigmoid(in_proj_b x), g = -exp(A_log) * softplus(in_proj_a x + dt_bias); the gated
//     delta rule with a [dk, dv] fp32 state per value head (k heads repeat_interleave'd to value
//     heads); output RMSNormGated(o, z = in_proj_z x) = rmsnorm(o) * w * silu(z); out_proj.
//   - "full_attention": gated attention (Qwen3_5Attention): q_proj gives per head [q | gate]
//     (interleaved per head in the file; de-interleaved to [all q | all gates] at load), per-head
//     q_norm/k_norm (1 + w), partial rotary on the first rope_dims dims (rotate_half layout),
//     causal GQA softmax attention, output * sigmoid(gate), o_proj.
// Shapes are ggml order {in, out}.
//
// GGUF (llama.cpp arch `qwen35`, written by convert_hf_to_gguf.py's Qwen3_5TextModel, llama.cpp
// conversion/qwen.py Qwen3NextModel + _LinearAttentionVReorderBase): tensors renamed (blk.N.attn_qkv,
// attn_gate = in_proj_z, ssm_alpha/ssm_beta = in_proj_a/b, ssm_out, ssm_conv1d {K, C}, ssm_dt.bias,
// ssm_a, ssm_norm, attn_q (still [q | gate] per head), post_attention_norm); every Qwen3_5RMSNorm
// weight stored as (1 + w) (the gated norm's plain w as is); ssm_a = -exp(A_log); and the value
// heads of the linear layers in "tiled" order (value head j uses key head j % nk, instead of
// j / (nv / nk)) in every per-value-head tensor, including ssm_out's input columns. The loader
// keeps the file's layout (Qwen35Params::gguf_layout) and the kernels use the tiled head map.
#pragma once
#include <memory>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "formats/tensor_store.h"
#include "models/config.h"
#include "models/model.h"

namespace wgllm {

class GgufFile;
struct ModelSource;
class Sequence;
namespace gpu { class Context; }

/// Qwen3.5-specific hyper-parameters (transformers configuration_qwen3_5.py Qwen3_5TextConfig).
struct Qwen35Params {
  std::vector<bool> linear;  // per layer: true = Gated DeltaNet ("linear_attention")
  uint32_t nk = 0, nv = 0;   // linear_num_key_heads, linear_num_value_heads (nv % nk == 0)
  uint32_t dk = 0, dv = 0;   // linear_key_head_dim, linear_value_head_dim
  uint32_t conv_k = 0;       // linear_conv_kernel_dim
  std::string prefix;        // tensor name prefix: "model." or "model.language_model." (HF)
  bool gguf_layout = false;  // llama.cpp qwen35 GGUF layout (see above): tiled value heads,
                             // norms stored as (1 + w), ssm_a = -exp(A_log)
  uint32_t key_dim() const { return nk * dk; }
  uint32_t value_dim() const { return nv * dv; }
  uint32_t conv_dim() const { return 2 * key_dim() + value_dim(); }
  uint32_t n_linear() const;
  DeltaNetShape shape() const { return {nk, nv, dk, dv, conv_k, gguf_layout}; }
};

/// A new sequence of `context` positions: a KvState per attention layer, a DeltaState (conv
/// [conv_k - 1, conv_dim], recurrent [nv, dk, dv]) per linear layer (models/state.h), on ctx's
/// GPU (nullptr: host).
std::unique_ptr<Sequence> qwen35_sequence(gpu::Context* ctx, const ModelConfig& c, const Qwen35Params& p,
                                          uint32_t context);

/// Parses a config.json (model_type "qwen3_5_text", or "qwen3_5" with a nested text_config).
/// Throws wgllm::Error naming the field for missing/mistyped/inconsistent values (unknown layer
/// type, layer_types length != num_hidden_layers, nv % nk != 0, rope type other than default, ...).
ModelConfig qwen35_config_from_hf(const nlohmann::json& j, const std::string& path);
Qwen35Params qwen35_params_from_hf(const nlohmann::json& j, const std::string& path);
/// llama.cpp `qwen35` GGUF metadata (qwen35.block_count, .ssm.{conv_kernel, state_size = dk,
/// group_count = nk, time_step_rank = nv, inner_size = nv * dv}, .attention.recurrent_layers or
/// .full_attention_interval, .rope.dimension_count, ...). Throws wgllm::Error naming the key for
/// missing or inconsistent values (and for rope scaling or value_length != key_length).
ModelConfig qwen35_config_from_gguf(const GgufFile& f);
Qwen35Params qwen35_params_from_gguf(const GgufFile& f);
/// The params of an opened source (HF directory or GGUF).
Qwen35Params qwen35_params(const ModelSource& src);

struct Qwen35LayerRefs {
  TensorRef attn_norm, ffn_norm;           // {d}; applied as (1 + w)
  TensorRef w_gate, w_up, w_down;          // {d, ffn}, {d, ffn}, {ffn, d}
  // full attention
  TensorRef wq, wk, wv, wo;                // {d, 2*q_dim} ([q|gate] per head), {d, kv}, {d, kv}, {q_dim, d}
  TensorRef q_norm, k_norm;                // {head_dim}; (1 + w)
  // Gated DeltaNet
  TensorRef w_qkv, w_z, w_b, w_a, w_out;   // {d, conv_dim}, {d, vd}, {d, nv}, {d, nv}, {vd, d}
  TensorRef conv;                          // {conv_k, 1, conv_dim} (GGUF {conv_k, conv_dim}): conv[c][j] at c*conv_k + j
  TensorRef a_log, dt_bias;                // {nv} (GGUF: ssm_a = -exp(A_log); see qwen35_a_log)
  TensorRef gdn_norm;                      // {dv}; applied as w (no +1)
};

struct Qwen35Refs {
  TensorRef embed, out_norm, lm_head;  // {d, vocab}, {d}, {d, vocab} (the embedding when tied)
  std::vector<Qwen35LayerRefs> layers;
};

/// Finds every tensor and checks its shape. Throws wgllm::Error naming the missing tensor or the
/// expected and actual shape.
Qwen35Refs qwen35_refs(const TensorStore& ts, const ModelConfig& c, const Qwen35Params& p);

/// The rows of q_proj de-interleaved from per head [q_h | gate_h] to [q_0..q_{H-1} | gate_0..]:
/// returns the stored bytes of the {d, 2*q_dim} tensor with rows permuted (any dtype whose rows
/// are whole blocks). Throws wgllm::Error when a row is not a whole number of bytes.
std::vector<uint8_t> qwen35_deinterleave_q(const TensorRef& wq, uint32_t n_heads, uint32_t head_dim);

/// The multiplier of a Qwen3_5RMSNorm, as f32: 1 + w from a Hugging Face file, the stored value
/// from a GGUF file (the converter already added 1).
std::vector<float> qwen35_norm_weight(const TensorRef& w, const Qwen35Params& p);
/// A_log per value head as f32: as stored (HF), or log(-ssm_a) (GGUF; throws wgllm::Error if an
/// entry is not negative).
std::vector<float> qwen35_a_log(const TensorRef& a, const Qwen35Params& p);

/// The model on the CPU reference backend (its Gated DeltaNet the plain per-token recurrence,
/// kernels/gdn_ref.h, which the GPU's chunked form is checked against) / on WebGPU.
std::unique_ptr<Model> create_qwen35_cpu(const ModelSource& src, const ModelOptions& opt);
std::unique_ptr<Model> create_qwen35_gpu(const ModelSource& src, const ModelOptions& opt);

}  // namespace wgllm
