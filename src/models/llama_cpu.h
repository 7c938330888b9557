#pragma once
#include "models/model.h"

namespace wgllm {
std::unique_ptr<Model> create_llama_cpu(const ModelSource& src, const ModelOptions& opt);
std::unique_ptr<Model> create_llama_gpu(const ModelSource& src, const ModelOptions& opt);
}  // namespace wgllm
