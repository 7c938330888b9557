// CPU twins of the GPU ops (plain C++, f32 arithmetic with f32 accumulation from dequantized
// weights). Same argument conventions as kernels/ops.h, on host arrays. This is the engine's CPU
// reference backend; every GPU op is checked against it (ops_test.cpp).
#pragma once
#include <cstdint>
#include <vector>

namespace wgllm::kernels::ref {

/// A dequantized weight matrix [N][K] in f32 (row-major).
struct Matrix {
  uint32_t K = 0, N = 0;
  std::vector<float> w;
};

/// y[t*y_stride + n] (+)= dot(W[n], x[t*x_stride ...]). Parallel over rows (threads).
void matmul(const Matrix& W, const float* x, uint32_t x_stride, float* y, uint32_t y_stride,
            uint32_t T, bool accumulate);
void rmsnorm(const float* x, const float* w, float* y, uint32_t D, float eps);
/// table from rope_table(); x: one token's H heads of HD.
void rope(float* x, uint32_t H, uint32_t HD, uint32_t rot, uint32_t pos, const float* table, bool neox);
/// One query token at position pos over cache rows [0, pos]; kc/vc rows of Hkv*HD.
void attention(const float* q, const float* kc, const float* vc, float* out, uint32_t pos,
               uint32_t Hq, uint32_t Hkv, uint32_t HD, float scale);
void silu_mul(const float* g, const float* u, float* y, uint32_t F);
/// GELU, tanh approximation (transformers gelu_pytorch_tanh; Hendrycks & Gimpel 2016):
/// 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3))), in f32.
float gelu_tanh(float a);
/// Lowest index of the maximum among the values above -inf (NaN and -inf never win); 0 when there is
/// none (an empty, all-NaN or all -inf input). The GPU scan's rule (argmax.wgsl),
/// so the CPU sampler and forward_argmax agree on every input, masked (-inf) logits included.
uint32_t argmax(const float* x, uint32_t n);
/// Twin of ops.h causal_conv (same formula and summation order j = 0..L-1): rows t < T of x at
/// x + t*x_stride; gate_in / gate_out / bias null when absent; w [C][L]; state [L-1][C], read then
/// updated in place to the last L-1 gated inputs; y rows at y + t*y_stride (must not alias x or
/// state). L >= 2.
void causal_conv(const float* x, uint32_t x_stride, const float* gate_in, uint32_t gi_stride,
                 const float* gate_out, uint32_t go_stride, const float* w, const float* bias, float* state,
                 float* y, uint32_t y_stride, uint32_t T, uint32_t C, uint32_t L, bool silu);

}  // namespace wgllm::kernels::ref
