// Gemma 3: config readers, params and constructors (models/gemma3.h: the formulas and their
// sources). The forward is the llama family's (models/llama.cpp) with Gemma 3's per-layer options
// (QK-norm, post-norms, sliding windows with their own RoPE table, GeGLU, the embedding scale),
// and its extra norms read by llama_refs() when ModelConfig::arch is "gemma3".
#include "models/gemma3.h"

#include <cmath>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/gguf.h"
#include "models/llama.h"
#include "models/source.h"

namespace wgllm {

ModelConfig gemma3_config_from_gguf(const GgufFile& f) {
  ModelConfig c = llama_config_from_gguf(f);  // the same `<arch>.*` keys; checks each
  c.rope_neox = true;                          // llama.cpp LLAMA_ROPE_TYPE_NEOX for gemma3
  return c;
}

ModelConfig gemma3_config_from_hf(const nlohmann::json&, const std::string& path) {
  // HF checkpoints store Gemma3RMSNorm's w (the GGUF converter stores w + 1): not wired yet.
  throw Error(path + ": gemma3 from a Hugging Face directory is not supported yet; use a GGUF file");
}

Gemma3Params gemma3_params(const ModelSource& src) {
  if (!src.gguf) throw Error(src.path + ": gemma3 needs a GGUF file");
  const GgufFile& f = *src.gguf;
  const ModelConfig& c = src.config;
  Gemma3Params p;
  p.sliding_window = gguf_uint(f, "gemma3.attention.sliding_window", {1, 0xffffffffu});
  p.swa_pattern = gguf_uint_or(f, "gemma3.attention.sliding_window_pattern", 6, {1, 1024});
  // llama.cpp: rope_freq_base_train_swa = 10000 for gemma3 (newer files: `<arch>.rope.freq_base_swa`).
  p.rope_local_base = gguf_real_or(f, "gemma3.rope.freq_base_swa", 10000.0, hp::rope_base);
  p.attn_scale = 1.0f / std::sqrt(float(c.head_dim));
  p.embed_scale = std::sqrt(float(c.d_model));
  p.final_softcap = float(gguf_real_or(f, "gemma3.final_logit_softcapping", 0.0, {0.0, 1e6}));
  return p;
}

std::unique_ptr<Model> create_gemma3_cpu(const ModelSource& src, const ModelOptions& opt) {
  return create_llama_cpu(src, opt);
}
std::unique_ptr<Model> create_gemma3_gpu(const ModelSource& src, const ModelOptions& opt) {
  return create_llama_gpu(src, opt);
}

}  // namespace wgllm
