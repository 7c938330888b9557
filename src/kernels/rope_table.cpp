#include "kernels/rope_table.h"

#include <cmath>

namespace wgllm::kernels {

namespace {
void fill(float* t, uint32_t first, uint32_t n_pos, uint32_t rot_dims, double base) {
  const uint32_t half = rot_dims / 2;
  for (uint32_t i = 0; i < half; ++i) {
    const double theta = std::pow(base, -2.0 * double(i) / double(rot_dims));
    for (uint32_t p = first; p < n_pos; ++p) {
      const double a = double(p) * theta;
      t[(size_t(p) * half + i) * 2] = float(std::cos(a));
      t[(size_t(p) * half + i) * 2 + 1] = float(std::sin(a));
    }
  }
}
}  // namespace

std::vector<float> rope_table(uint32_t n_pos, uint32_t rot_dims, double base) {
  std::vector<float> t(size_t(n_pos) * (rot_dims / 2) * 2);
  fill(t.data(), 0, n_pos, rot_dims, base);
  return t;
}

void rope_table_grow(std::vector<float>& t, uint32_t n_pos, uint32_t rot_dims, double base) {
  const size_t row = size_t(rot_dims / 2) * 2;
  if (!row) return;
  const uint32_t have = uint32_t(t.size() / row);
  if (n_pos <= have) return;
  t.resize(size_t(n_pos) * row);
  fill(t.data(), have, n_pos, rot_dims, base);
}

}  // namespace wgllm::kernels
