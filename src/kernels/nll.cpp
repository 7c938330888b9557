#include "kernels/nll.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "kernels/params_layout.h"
#include "kernels/wgsl.h"

namespace wgllm::kernels {
namespace {
// nll's uniform (matches its WGSL `struct P`: kernels/params_layout.h).
struct NllParams { uint32_t n, rows, x_off, x_stride, t_off, y_off; };
WGLLM_PARAMS(NllParams, n, rows, x_off, x_stride, t_off, y_off);
}  // namespace

void nll_rows(OpContext& o, F32Ref x, uint32_t n, uint32_t x_stride, uint32_t rows, const gpu::Buffer& targets,
              uint32_t t_off, F32Ref y) {
  if (n == 0 || rows == 0 || rows > 65535)
    throw Error("nll_rows: need n >= 1 and 1 <= rows <= 65535, got n " + std::to_string(n) + ", rows " +
                std::to_string(rows));
  using gpu::Bind;
  const auto& p = o.pipelines.get(variant_key("nll", {}), [] {
    return gpu::KernelSpec{"", specialize("nll", {}),
                           {Bind::ReadOnly, Bind::ReadOnly, Bind::ReadWrite, Bind::Uniform}};
  });
  NllParams prm{n, rows, x.off, x_stride, t_off, y.off};
  o.rec.declare(gpu::TrafficBytes()
                    .r(gpu::Traffic::Logits, 8ull * n * rows)  // two passes over each row
                    .r(gpu::Traffic::Activations, 4ull * rows)
                    .w(gpu::Traffic::Activations, 4ull * rows));
  o.rec.dispatch(p, {x.buf, targets, y.buf}, prm, rows, 1, 1, "nll");
}

std::vector<ParamsLayout> nll_params_layouts() { return {WGLLM_LAYOUT(NllParams, "nll")}; }

}  // namespace wgllm::kernels

namespace wgllm::ref {

double nll_row(const float* x, uint32_t n, int32_t target) {
  if (target < 0 || uint32_t(target) >= n) return 0.0;
  const float m = *std::max_element(x, x + n);
  double z = 0;
  for (uint32_t j = 0; j < n; ++j) z += std::exp(double(x[j]) - double(m));
  return std::log(z) + double(m) - double(x[target]);
}

void nll_rows(const float* x, uint32_t n, uint32_t x_stride, uint32_t rows, const int32_t* targets, float* y) {
  for (uint32_t r = 0; r < rows; ++r) y[r] = float(nll_row(x + size_t(r) * x_stride, n, targets[r]));
}

}  // namespace wgllm::ref
