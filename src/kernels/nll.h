// Per-row negative log-likelihood of a target id over rows of logits (wgsl/nll.wgsl), the device
// half of perplexity (runtime/perplexity.h): only one float per scored position is read back,
// never the [rows, vocab] logits. CPU twin ref::nll_rows; test kernels/nll_test.cpp.
#pragma once
#include <cstdint>

#include "kernels/ops.h"

namespace wgllm::kernels {

/// Records y[y.off + r] = logsumexp(x row r) - x[r, targets[t_off + r]] for r < rows, where row r
/// is the n floats at x.off + r * x_stride (f32 logits), targets an i32 buffer; 0 where the
/// target is < 0 or >= n (positions not scored). f32 arithmetic: the max, then sum(exp(x - max)),
/// each reduced over 256 threads in tree order. One workgroup per row. Throws wgllm::Error for
/// n == 0, rows == 0 or rows > 65535 (one dispatch dimension).
void nll_rows(OpContext& o, F32Ref x, uint32_t n, uint32_t x_stride, uint32_t rows, const gpu::Buffer& targets,
              uint32_t t_off, F32Ref y);

}  // namespace wgllm::kernels

namespace wgllm::ref {

/// CPU twin of kernels::nll_rows in double: y[r] = log(sum_j exp(x[r,j] - m)) + m - x[r, targets[r]],
/// m the row's max; 0 where targets[r] < 0 or >= n. llama.cpp's llama-perplexity computes the same
/// quantity per position (log_softmax in tools/perplexity/perplexity.cpp: double sum of expf).
void nll_rows(const float* x, uint32_t n, uint32_t x_stride, uint32_t rows, const int32_t* targets, float* y);

/// One row of nll_rows in double (the value before rounding to f32).
double nll_row(const float* x, uint32_t n, int32_t target);

}  // namespace wgllm::ref
