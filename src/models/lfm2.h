// LFM2 on both backends (lfm2_cpu.cpp, lfm2_gpu.cpp); architecture and names in lfm2_weights.h.
// Sequence state: for each attention layer a KV cache [ctx, kv_dim] f32 (K and V), for each conv
// layer the last L-1 rows of B*x, [L-1, d_model] f32 (Lfm2Params::conv_state_bytes). memory()
// reports them as kv_cache and recurrent; truncate() throws (recurrent state), as by design.
#pragma once
#include "models/model.h"

namespace wgllm {
std::unique_ptr<Model> create_lfm2_cpu(const ModelSource& src, const ModelOptions& opt);
std::unique_ptr<Model> create_lfm2_gpu(const ModelSource& src, const ModelOptions& opt);
}  // namespace wgllm
