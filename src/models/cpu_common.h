// Pieces every CPU reference model shares (plain C++ over kernels/ref.h): the SwiGLU FFN block,
// the output head, and greedy argmax on top of forward().
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/ref.h"
#include "models/model.h"

namespace wgllm {

/// Adds forward_argmax() = argmax of forward()'s logits (lowest id on ties) to a CPU model.
class CpuModel : public Model {
 public:
  int32_t forward_argmax(Sequence& seq, std::span<const int32_t> toks) override;
};

/// x[t] += down(silu(gate(h[t])) * up(h[t])), h[t] = rmsnorm(x[t]) * norm, for t < T rows of
/// x [T, d_model] (Shazeer 2020); h [T, d_model] is scratch.
void cpu_swiglu_ffn(const ModelConfig& c, const std::vector<float>& norm, const kernels::ref::Matrix& gate,
                    const kernels::ref::Matrix& up, const kernels::ref::Matrix& down, float* x, float* h, uint32_t T);

/// logits = lm_head(rmsnorm(x_last) * out_norm) ([vocab] floats).
void cpu_logits(const ModelConfig& c, const float* x_last, const std::vector<float>& out_norm,
                const kernels::ref::Matrix& lm_head, std::vector<float>* logits);

}  // namespace wgllm
