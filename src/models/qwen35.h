// Qwen3.5 text model factories (registry entry "qwen35"; see models/qwen35_weights.h).
#pragma once
#include "models/model.h"

namespace wgllm {
std::unique_ptr<Model> create_qwen35_cpu(const ModelSource& src, const ModelOptions& opt);
std::unique_ptr<Model> create_qwen35_gpu(const ModelSource& src, const ModelOptions& opt);
}  // namespace wgllm
