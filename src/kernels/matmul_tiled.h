// Tiled matrix product for prefill forwards (T > 8 tokens): wgsl/matmul_tiled.wgsl. Same semantics
// as kernels::matmul (ops.h), which records this kernel instead of the per-row one when
// matmul_tiled_enabled(), T > kMatmulTiledMinTokens and matmul_tiled_supported().
// CPU twin: ref::matmul. Test: kernels/matmul_tiled_test.cpp.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/ops.h"
#include "kernels/params_layout.h"

namespace wgllm::kernels {

/// The uniform of matmul_tiled.wgsl and matmul_coop.wgsl (their WGSL `struct P`; kernels/params_layout.h):
/// K, N, T; nb = K / block; soff = the weight's scale region (words); activation and output offsets and
/// row strides (floats).
struct TiledParams { uint32_t K, N, T, nb, soff, x_off, x_stride, y_off, y_stride; };
WGLLM_PARAMS(TiledParams, K, N, T, nb, soff, x_off, x_stride, y_off, y_stride);

/// kernels::matmul takes the tiled kernel for forwards of more than this many tokens.
constexpr uint32_t kMatmulTiledMinTokens = 8;

/// Tile of one matmul_tiled workgroup: BN output features x BT tokens, each of its
/// (BN / RN) x (BT / RT) threads computing RN features x RT tokens.
struct MatmulTile {
  uint32_t bn = 64, bt = 64, rn = 4, rt = 4;
  uint32_t threads() const { return (bn / rn) * (bt / rt); }
  /// Workgroup memory in bytes: the k-major weight and activation tiles of 32 k (f32, or f16).
  uint32_t workgroup_bytes(bool f16) const { return 32u * (bn + bt) * (f16 ? 2u : 4u); }
  std::string str() const;  // "64x64/4x4"
};

/// The generated register-prefetch code of the tiled matmul kernels (matmul_tiled.wgsl and
/// matmul_tiled_i8.wgsl): each thread moves `wpt` weight parts (WGSL type Raw, fetch_w / put_wslot)
/// and `xpt` activation parts (WGSL type `x_type`, fetch_x / put_xslot) per K-step, slots lid + i * NT.
/// Fills the kernel's markers /*TILE_PREFETCH_DECL*/ (registers), /*TILE_FETCH_FIRST*/ (K-step 0),
/// /*TILE_FETCH_NEXT*/ (K-step kt + 1) and /*TILE_PUT*/ (to workgroup memory) in `src` of kernel `name`.
void fill_tile_prefetch(std::string& src, const std::string& name, uint32_t wpt, uint32_t xpt, const std::string& x_type);

/// The tile the options select on this adapter for N output features and T tokens: the sides
/// KernelOptions::matmul_tile_n / _t / matmul_reg_n / _t set (non-zero), the others from the adapter
/// default: hardware 64 x 64 / 4 x 4 (256 threads), where the unset tile sides are halved
/// (features first, down to 32) while the grid has fewer than
/// KernelOptions::matmul_tiled_min_workgroups workgroups (N = T = 0: no halving); software
/// adapters 32 x 32 / 4 x 4. Throws wgllm::Error when the tile is invalid: RN, RT not in {4, 8};
/// BN, BT not multiples of RN, RT; more threads than maxComputeInvocationsPerWorkgroup or more
/// workgroup memory than maxComputeWorkgroupStorageSize.
MatmulTile matmul_tile(const OpContext& o, bool f16, uint32_t N = 0, uint32_t T = 0);

/// The halving rule of matmul_tile(): halves t.bn (unless fixed_n) or t.bt (unless fixed_t), the
/// larger first (features on ties), never below 32 or the register tile, while the grid of an N x T
/// product has fewer than min_workgroups workgroups. N or T = 0: t unchanged.
MatmulTile shrink_tile(MatmulTile t, bool fixed_n, bool fixed_t, uint32_t N, uint32_t T, uint32_t min_workgroups);

/// Every tile matmul_tile() can return on this adapter with these options, for some N and T: the
/// unhalved tile, then each halving step (hardware adapters with matmul_tiled_min_workgroups > 0).
/// The first dispatch of a tiled-matmul variant (weight format, accumulate, f16 / int8) compiles
/// the variant's pipeline for each of these tiles, so that the warm-up's first prefill forward
/// (runtime/warmup.h) compiles what prompts of any length use: without it, the first prompt whose
/// length and matrix shape select another tile compiled it inside its TTFT (H200, 2026-12-04: the
/// first request on a fresh `wgllm serve` took 159 ms / 441 ms against 6-20 ms later, SmolLM2 /
/// Qwen2.5-1.5B shapes).
std::vector<MatmulTile> matmul_tile_classes(const OpContext& o, bool f16);

/// pipeline(t) (a callable returning the variant's gpu::Pipeline for a tile) for the tile a
/// dispatch uses; when that call compiled it (the variant's first use), also pipeline(c) for every
/// other tile class (matmul_tile_classes()).
template <class F>
const gpu::Pipeline& with_tile_classes(OpContext& o, bool f16, const MatmulTile& t, F&& pipeline) {
  const size_t compiled = o.pipelines.size();
  const gpu::Pipeline& p = pipeline(t);
  if (o.pipelines.size() > compiled)
    for (const MatmulTile& c : matmul_tile_classes(o, f16)) pipeline(c);
  return p;
}

/// The tile's defines of matmul_tiled.wgsl / matmul_tiled_i8.wgsl: BN, BT, RN, RT.
void add_tile_defines(Defines& d, const MatmulTile& t);

/// Records pipeline p (matmul_tiled.wgsl or matmul_coop.wgsl, bindings w, x, y and TiledParams) over a grid of
/// ceil(N / bn) x ceil(T / bt) workgroups, declaring the product's traffic (each operand once).
void dispatch_tiled(OpContext& o, const gpu::Pipeline& p, const GpuWeight& W, F32Ref x, uint32_t x_stride, F32Ref y,
                    uint32_t y_stride, uint32_t T, bool accumulate, const char* label, gpu::Traffic y_kind, uint32_t bn,
                    uint32_t bt);

/// Whether matmul_tiled can run this product: x offset and row stride multiples of 4 (vec4 loads).
bool matmul_tiled_supported(const GpuWeight& W, F32Ref x, uint32_t x_stride);

/// Whether kernels::matmul may take the tiled kernel: KernelOptions::matmul_tiled 1, or 2 (adapter
/// default) on a hardware adapter.
bool matmul_tiled_enabled(const OpContext& o);

/// Whether the f16 variant runs: KernelOptions::matmul_tiled_f16 and the device has shader-f16.
bool matmul_tiled_uses_f16(const OpContext& o);

/// Records y[t, n] (+)= sum_k W[n, k] x[t, k] for t < T with matmul_tiled.wgsl (any T >= 1; the
/// model path uses it for T > kMatmulTiledMinTokens). Arguments as kernels::matmul. Throws
/// wgllm::Error unless matmul_tiled_supported() and the tile is valid (see matmul_tile()).
void matmul_tiled(OpContext& o, const GpuWeight& W, F32Ref x, uint32_t x_stride, F32Ref y, uint32_t y_stride,
                  uint32_t T, bool accumulate, const char* label = "matmul",
                  gpu::Traffic y_kind = gpu::Traffic::Activations);

}  // namespace wgllm::kernels
