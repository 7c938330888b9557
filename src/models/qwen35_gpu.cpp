#include "core/error.h"
#include "models/qwen35.h"
namespace wgllm {
std::unique_ptr<Model> create_qwen35_gpu(const ModelSource&, const ModelOptions&) { throw Error("qwen35 on WebGPU: not yet"); }
}
