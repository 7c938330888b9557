// Qwen2 / Qwen2.5: config readers and constructors (models/qwen2.h: the formulas and their
// sources). The forward is the llama family's (models/llama.cpp) with the Q/K/V biases, which
// llama_refs() reads when ModelConfig::arch is "qwen2".
#include "models/qwen2.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/gguf.h"
#include "models/llama.h"

namespace wgllm {

ModelConfig qwen2_config_from_gguf(const GgufFile& f) {
  ModelConfig c = llama_config_from_gguf(f);  // same `<arch>.*` keys; checks each
  c.rope_neox = true;  // LLAMA_ROPE_TYPE_NEOX: the converter keeps HF's rotate_half row order
  return c;
}

ModelConfig qwen2_config_from_hf(const nlohmann::json& j, const std::string& path) {
  if (opt<bool>(j, "use_sliding_window", false, path))
    throw Error(path + ": config.json use_sliding_window = true is not supported for qwen2");
  // Qwen2Config has no attention_bias field (the Q/K/V biases are always there); llama's reader
  // refuses attention_bias / mlp_bias = true, which Qwen2 configs do not set.
  ModelConfig c = llama_config_from_hf(j, path);
  c.rope_neox = true;
  return c;
}

std::unique_ptr<Model> create_qwen2_cpu(const ModelSource& src, const ModelOptions& opt) {
  return create_llama_cpu(src, opt);
}
std::unique_ptr<Model> create_qwen2_gpu(const ModelSource& src, const ModelOptions& opt) {
  return create_llama_gpu(src, opt);
}

}  // namespace wgllm
