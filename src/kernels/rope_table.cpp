#include "kernels/rope_table.h"

#include <cmath>

namespace wgllm::kernels {

std::vector<float> rope_table(uint32_t n_pos, uint32_t rot_dims, double base) {
  const uint32_t half = rot_dims / 2;
  std::vector<float> t(size_t(n_pos) * half * 2);
  for (uint32_t i = 0; i < half; ++i) {
    const double theta = std::pow(base, -2.0 * double(i) / double(rot_dims));
    for (uint32_t p = 0; p < n_pos; ++p) {
      const double a = double(p) * theta;
      t[(size_t(p) * half + i) * 2] = float(std::cos(a));
      t[(size_t(p) * half + i) * 2 + 1] = float(std::sin(a));
    }
  }
  return t;
}

}  // namespace wgllm::kernels
