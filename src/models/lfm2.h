// LFM2 (Liquid AI; transformers `lfm2`, llama.cpp GGUF arch `lfm2`), one file pair (lfm2.cpp):
// hyper-parameters beyond ModelConfig, config parsing for both layouts, tensor names and shape
// checks, and the forward, written once over the block interface of CpuModel / GpuModel.
// Architecture (transformers models/lfm2/modeling_lfm2.py, Lfm2DecoderLayer): every layer is
//   x += op(operator_norm(x));  x += w2(silu(w1(h)) * w3(h)), h = ffn_norm(x)
// where op is, per the config's layer pattern, either
//   - "conv" (Lfm2ShortConv): [B | C | xs] = in_proj(h) (3 x d_model rows, in this order);
//     y = C * causal_depthwise_conv_L(B * xs); out_proj(y). No activation, no bias (conv_bias
//     false in every released model; conv_bias = true is rejected). The per-sequence state is
//     the last L-1 rows of B * xs (d_model floats each).
//   - "full_attention" (Lfm2Attention): q/k/v projections, per-head RMSNorm of q and k
//     (q_layernorm / k_layernorm, weight {head_dim}) before RoPE (rotate_half layout, theta from
//     rope_parameters), causal GQA, out_proj.
// The final norm is model.embedding_norm (GGUF token_embd_norm) despite its name; the LM head is
// tied to the embedding unless lm_head.weight / output.weight exists.
// Shapes are ggml order {in, out}.
#pragma once
#include <optional>
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

/// LFM2-specific hyper-parameters (transformers configuration_lfm2.py Lfm2Config).
struct Lfm2Params {
  std::vector<bool> attn;  // per layer: true = "full_attention", false = "conv" (ShortConv)
  uint32_t conv_L = 0;     // conv_L_cache / GGUF lfm2.shortconv.l_cache: kernel width, 2..64
  uint32_t n_attn() const;
  /// Bytes of one conv layer's recurrent state: (L-1) rows x d_model f32.
  uint64_t conv_state_bytes(const ModelConfig& c) const { return uint64_t(conv_L - 1) * c.d_model * 4; }
  /// Bytes of one attention layer's KV cache for ctx positions (K and V, f32).
  static uint64_t kv_bytes(const ModelConfig& c, uint32_t ctx) { return 2ull * ctx * c.kv_dim() * 4; }
};

/// A new sequence of `context` positions: a KvState per attention layer, a ConvState [L-1,
/// d_model] per conv layer (models/state.h), on ctx's GPU (nullptr: host).
std::unique_ptr<Sequence> lfm2_sequence(gpu::Context* ctx, const ModelConfig& c, const Lfm2Params& p, uint32_t context);

/// config.json (model_type "lfm2"). Layer pattern from `layer_types` ("conv"/"full_attention"),
/// else `full_attn_idxs`, else all attention (Lfm2Config.__post_init__). FFN width from
/// intermediate_size (alias block_ff_dim) adjusted as Lfm2MLP does when block_auto_adjust_ff_dim:
/// ff = int(2*ff/3); if block_ffn_dim_multiplier is set: ff = multiple_of * ceil(int(m*ff) / multiple_of).
/// RoPE theta from rope_parameters.rope_theta (type "default" only) or top-level rope_theta
/// (default 1e6). Throws wgllm::Error naming the field (missing/mistyped, unknown layer type,
/// layer_types length != num_hidden_layers, index out of range, no conv or attention sizes, conv_bias,
/// L out of range, rope scaling).
ModelConfig lfm2_config_from_hf(const nlohmann::json& j, const std::string& path);
Lfm2Params lfm2_params_from_hf(const nlohmann::json& j, const std::string& path);
/// GGUF metadata (llama.cpp names): lfm2.attention.head_count_kv is an array with 0 for conv
/// layers (a scalar means all attention); lfm2.shortconv.l_cache is required. RoPE is the NEOX
/// (rotate_half) layout: convert_hf_to_gguf.py does not permute LFM2's Q/K.
ModelConfig lfm2_config_from_gguf(const GgufFile& f);
Lfm2Params lfm2_params_from_gguf(const GgufFile& f);
/// The params of an opened source (either layout).
Lfm2Params lfm2_params(const ModelSource& src);

struct Lfm2LayerRefs {
  TensorRef attn_norm, ffn_norm;    // operator_norm / ffn_norm {d}
  TensorRef w_gate, w_up, w_down;   // feed_forward.w1, w3 {d, ffn}; w2 {ffn, d}
  // full attention
  TensorRef wq, wk, wv, wo;         // {d, q_dim}, {d, kv_dim}, {d, kv_dim}, {q_dim, d}
  TensorRef q_norm, k_norm;         // {head_dim}
  // ShortConv
  TensorRef in_proj;                // {d, 3d}: output rows [B | C | x]
  TensorRef conv;                   // HF {L, 1, d} / GGUF {L, d}: w[c][j] at c*L + j
  TensorRef out_proj;               // {d, d}
};

struct Lfm2Refs {
  TensorRef embed;     // {d, vocab}
  TensorRef out_norm;  // {d} (embedding_norm / token_embd_norm)
  TensorRef lm_head;   // {d, vocab}; the embedding when tied
  std::vector<Lfm2LayerRefs> layers;
};

/// Finds every tensor the layer pattern needs and checks its shape. Throws wgllm::Error naming a
/// missing tensor or the expected and actual shape.
Lfm2Refs lfm2_refs(const TensorStore& ts, const ModelConfig& c, const Lfm2Params& p, bool gguf_names);

/// The model on the CPU reference backend / on WebGPU: the same forward over each backend's blocks.
/// Sequence state: for each attention layer a KV cache [ctx, kv_dim] f32 (K and V), for each conv
/// layer the last L-1 rows of B*x, [L-1, d_model] f32 (Lfm2Params::conv_state_bytes). memory()
/// reports them as kv_cache and recurrent; truncate() throws (recurrent state), as by design.
std::unique_ptr<Model> create_lfm2_cpu(const ModelSource& src, const ModelOptions& opt);
std::unique_ptr<Model> create_lfm2_gpu(const ModelSource& src, const ModelOptions& opt);

}  // namespace wgllm
