// RoPE cos/sin table shared by the CPU reference and the GPU kernel (Su et al. 2021):
// theta_i = base^(-2i / rot_dims), angle(pos, i) = pos * theta_i, computed in double and rounded
// once to f32, so both backends rotate by bit-identical values.
// Models size the table by the longest sequence they have created (rope_table_grow), never by the
// model's trained context length, which real models declare as 128k to 10M positions.
#pragma once
#include <cstdint>
#include <vector>

namespace wgllm::kernels {

/// Returns [n_pos][rot_dims / 2] interleaved (cos, sin) floats: 2 * n_pos * rot_dims / 2 values.
std::vector<float> rope_table(uint32_t n_pos, uint32_t rot_dims, double base);

/// Extends a table made by rope_table(m, rot_dims, base) (or empty) to n_pos positions, appending
/// rows m .. n_pos-1 (the same values rope_table(n_pos, ...) holds); no-op when n_pos <= m.
/// Throws std::bad_alloc like any vector growth.
void rope_table_grow(std::vector<float>& table, uint32_t n_pos, uint32_t rot_dims, double base);

/// Bytes of a table of n_pos positions: n_pos * rot_dims * 4 (rot_dims / 2 (cos, sin) f32 pairs).
inline uint64_t rope_table_bytes(uint32_t n_pos, uint32_t rot_dims) { return uint64_t(n_pos) * (rot_dims / 2) * 8; }

}  // namespace wgllm::kernels
