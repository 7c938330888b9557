// RoPE cos/sin table shared by the CPU reference and the GPU kernel (Su et al. 2021):
// theta_i = base^(-2i / rot_dims), angle(pos, i) = pos * theta_i, computed in double and rounded
// once to f32, so both backends rotate by bit-identical values.
#pragma once
#include <cstdint>
#include <vector>

namespace wgllm::kernels {

/// Returns [n_pos][rot_dims / 2] interleaved (cos, sin) floats: 2 * n_pos * rot_dims / 2 values.
std::vector<float> rope_table(uint32_t n_pos, uint32_t rot_dims, double base);

}  // namespace wgllm::kernels
