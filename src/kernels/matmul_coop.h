// Tiled prefill matrix product on the GPU's matrix units: wgsl/matmul_coop.wgsl (WGSL cooperative
// matrices, wgpu's experimental `wgpu_cooperative_matrix`: 16 x 16 x 16 fragments, f16 operands, f32
// sums; NVIDIA's tensor cores through VK_KHR_cooperative_matrix). Same semantics as kernels::matmul;
// matmul_tiled() records it instead of its own kernel when matmul_coop_used() (--matmul-coop, which
// takes precedence over --matmul-int8 and --matmul-tiled-f16). CPU twin: ref::matmul. Test:
// kernels/matmul_coop_test.cpp (skipped where the device has no cooperative matrices, e.g. CI's lavapipe).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "kernels/params_layout.h"

namespace wgllm::kernels {

/// Tile of one matmul_coop workgroup: BT tokens x BN output features, each subgroup FT x FN fragments
/// of 16 x 16 (so BN / (16 FN) x BT / (16 FT) subgroups).
struct CoopTile {
  uint32_t bn = 64, bt = 64, fn = 2, ft = 2;
  uint32_t subgroups() const { return (bn / (16 * fn)) * (bt / (16 * ft)); }
  /// Workgroup memory in bytes: the f16 weight and activation tiles of 32 k and a 16 x 16 f32 output slot
  /// per subgroup.
  uint32_t workgroup_bytes() const { return 32u * (bn + bt) * 2u + subgroups() * 1024u; }
  std::string str() const;  // "64x64/2x2"
};

/// The tile for this adapter: 64 x 64 features x tokens, 2 x 2 fragments per subgroup (4 subgroups),
/// sides set by KernelOptions::matmul_coop_tile_n / _t where non-zero. Throws wgllm::Error when the tile
/// is invalid: sides not multiples of 16 x the fragments, more invocations (subgroups x subgroup size)
/// than the adapter allows or more workgroup memory than it has.
CoopTile coop_tile(const OpContext& o);

/// Whether matmul_tiled() records matmul_coop for W: KernelOptions::matmul_coop on, the device can run it
/// (gpu::Context::coop_matrix_f16(): cooperative matrices granted, one subgroup size, an exact probe
/// product), and a weight layout the tiled loads read.
bool matmul_coop_used(OpContext& o, const GpuWeight& W);

/// Records y[t, n] (+)= sum_k W[n, k] x[t, k] for t < T with matmul_coop.wgsl. Arguments as
/// kernels::matmul. Throws wgllm::Error unless gpu::Context::coop_matrix_f16(), matmul_tiled_supported() and the
/// tile is valid.
void matmul_coop(OpContext& o, const GpuWeight& W, F32Ref x, uint32_t x_stride, F32Ref y, uint32_t y_stride,
                 uint32_t T, bool accumulate, const char* label = "matmul", gpu::Traffic y_kind = gpu::Traffic::Activations);

/// The kernel source with its fragment code written out (accumulators, per-16-k loads and products, the
/// staging store) and the prefetch of matmul_tiled; sgs = the subgroup size.
std::string coop_source(const CoopTile& t, uint32_t sgs);

/// matmul_coop's uniform layout (its WGSL `struct P`) for the params-layout check.
std::vector<ParamsLayout> matmul_coop_params_layouts();

}  // namespace wgllm::kernels
