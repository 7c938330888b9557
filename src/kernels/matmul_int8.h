// The int8 variant of the prefill matmul (KernelOptions::matmul_int8, --matmul-int8): activations
// quantized per block of 32 to int8 with one f32 scale (quantize_q8.wgsl, ggml's Q8_1), weights'
// 4-bit / 6-bit / 8-bit quants as int8 lanes packed 4 per u32, `dot4I8Packed` products summed in
// i32 per block, then scaled in f32 (matmul_tiled_i8.wgsl). kernels::matmul_tiled records it
// instead of the f32 tiled kernel when matmul_int8_used(). Not bit-exact with the f32 path: the
// activations are rounded to 8 bits (relative error ~1/254 of each block's largest |x|).
// CPU twin: ref::matmul on the activations as quantize_q8 rounds them (ref_quantize_q8 below);
// test: kernels/matmul_int8_test.cpp.
#pragma once
#include <cstdint>
#include <vector>

#include "kernels/matmul_tiled.h"
#include "kernels/ops.h"
#include "kernels/params_layout.h"

namespace wgllm::kernels {

/// Whether W has an int8 path: Q4_0, Q4_1, Q4_K, Q8_0 (and Q5_0, widened to it) and Q8_F32 / Q6_K (Q6_K widened or as stored)
/// layouts with K a multiple of 32; F32/F16/BF16 weights keep the f32 kernel.
bool matmul_int8_supported(const GpuWeight& W);

/// Whether kernels::matmul_tiled takes the int8 path for W: KernelOptions::matmul_int8 and
/// matmul_int8_supported(W). It takes precedence over KernelOptions::matmul_tiled_f16.
bool matmul_int8_used(const OpContext& o, const GpuWeight& W);

/// Where quantize_q8 puts T rows of K (a multiple of 32) elements, in 4-byte words: words
/// [0, T * K / 4) the int8 lanes (block b of row t at (b * T + t) * 8: block-major), then from
/// `soff` (rounded up to 256 bytes, a storage binding offset) 2 words (f32 d, f32 s) per block,
/// block (b, t) at soff + 2 (b * T + t).
struct Q8Layout {
  uint32_t nb = 0;         // blocks per row: K / 32
  uint64_t soff = 0;       // first scale word
  uint64_t words = 0;      // total
  static Q8Layout of(uint32_t T, uint32_t K);
};

/// Records quantize_q8.wgsl: the T rows of K elements of x (rows at x.off + t * x_stride; offset
/// and stride multiples of 4, K of 32) into `out` as Q8Layout::of(T, K) says. Throws wgllm::Error
/// for a K or offset it cannot take or an `out` smaller than the layout.
void quantize_q8(OpContext& o, F32Ref x, uint32_t x_stride, uint32_t T, uint32_t K, const gpu::Buffer& out);

/// CPU twin of one row of quantize_q8 (K a multiple of 32): q[k] int8, per block b of 32 d[b] =
/// max|x| / 127 and s[b] = d[b] * sum q (ggml quantize_row_q8_1_ref with nearest-even rounding).
void ref_quantize_q8(const float* x, uint32_t K, int8_t* q, float* d, float* s);

/// Records y[t, n] (+)= sum_k W[n, k] x[t, k] for t < T through quantize_q8 (into
/// gpu::Recorder::scratch) and matmul_tiled_i8.wgsl. Arguments as kernels::matmul; tile as
/// matmul_tile(). Throws wgllm::Error unless matmul_int8_supported(W) and matmul_tiled_supported().
void matmul_int8(OpContext& o, const GpuWeight& W, F32Ref x, uint32_t x_stride, F32Ref y, uint32_t y_stride,
                 uint32_t T, bool accumulate, const char* label = "matmul",
                 gpu::Traffic y_kind = gpu::Traffic::Activations);

std::vector<ParamsLayout> matmul_int8_params_layouts();

}  // namespace wgllm::kernels
