// Qwen2 / Qwen2.5 (GGUF general.architecture "qwen2", config.json model_type "qwen2").
//
// The decoder is Llama's (RMSNorm, GQA attention with RoPE, SwiGLU FFN, final RMSNorm, tied or
// untied lm_head) with one difference: the Q, K and V projections have biases, y = W x + b, added
// before RoPE; the output projection and the FFN have none. Sources: transformers
// models/qwen2/modeling_qwen2.py (Qwen2Attention: q_proj/k_proj/v_proj `nn.Linear(..., bias=True)`,
// o_proj `bias=False`; apply_rotary_pos_emb with rotate_half, i.e. the NeoX pair layout (i, i+d/2);
// Qwen2MLP = down(act(gate(x)) * up(x)) with hidden_act "silu"), and llama.cpp (llama-model.cpp:
// LLM_ARCH_QWEN2 uses LLAMA_ROPE_TYPE_NEOX, its converter does not permute Q/K rows, unlike
// llama's; tensors blk.N.attn_{q,k,v}.bias). Cited from memory of those files (not fetched).
// RoPE theta comes from `qwen2.rope.freq_base` / config.json rope_theta (1e6 for Qwen2.5).
// Sliding-window attention (config.json use_sliding_window, off in every released Qwen2.5) is
// not supported: a config that turns it on is refused.
//
// The forward is the llama family's (models/llama.cpp), which reads the biases through llama_refs()
// when ModelConfig::arch is "qwen2".
#pragma once
#include <memory>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "models/config.h"
#include "models/model.h"

namespace wgllm {

class GgufFile;
struct ModelSource;

/// Reads `qwen2.*` metadata (llama.cpp key names, same as llama's) with rope_neox = true.
ModelConfig qwen2_config_from_gguf(const GgufFile& f);
/// Reads a transformers Qwen2 config.json (Qwen2Config): llama's fields, rope_neox; refuses
/// use_sliding_window = true.
ModelConfig qwen2_config_from_hf(const nlohmann::json& cfg, const std::string& path);
std::unique_ptr<Model> create_qwen2_cpu(const ModelSource& src, const ModelOptions& opt);
std::unique_ptr<Model> create_qwen2_gpu(const ModelSource& src, const ModelOptions& opt);

}  // namespace wgllm
