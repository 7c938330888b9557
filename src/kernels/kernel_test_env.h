// The fixture the kernel tests share (test-only, header-only): one GPU context with its pipeline
// cache and recorder for the whole test binary, buffer upload/download, and seeded random inputs
// (normal activations, well-formed quantized weight blocks).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "core/half.h"
#include "formats/dtype.h"
#include "gpu/context.h"
#include "kernels/ops.h"

namespace wgllm::kernels::testing {

struct GpuEnv {
  explicit GpuEnv(const gpu::ContextOptions& co = {}) : ctx(gpu::Context::create(co)) {}
  std::unique_ptr<gpu::Context> ctx;
  gpu::PipelineCache cache{*ctx};
  gpu::Recorder rec{*ctx};
  /// The ops' context. The int8 activation switches at their adapter default (2: on for hardware
  /// GPUs since 2026-12-02) are taken as off, so that kernel tests check the f32 paths on every
  /// adapter (the H200 parity recipe runs them too) unless they ask for int8 (1).
  OpContext op(KernelOptions o = {}) {
    if (o.matvec_int8 == 2) o.matvec_int8 = 0;
    if (o.matmul_int8 == 2) o.matmul_int8 = 0;
    return OpContext{*ctx, cache, rec, o};
  }
  /// A storage buffer holding `bytes` bytes from p (at least 4 bytes: WebGPU has no empty bindings).
  gpu::Buffer upload(const void* p, size_t bytes) {
    gpu::Buffer b(*ctx, std::max<size_t>(bytes, 4), gpu::BufferKind::Storage, "t");
    if (bytes) b.write(*ctx, 0, p, bytes);
    return b;
  }
  template <class T>
  gpu::Buffer upload(const std::vector<T>& v) {
    return upload(v.data(), v.size() * sizeof(T));
  }
  /// The first n elements of b.
  template <class T = float>
  std::vector<T> download(const gpu::Buffer& b, size_t n) {
    std::vector<T> v(n);
    b.read(*ctx, 0, v.data(), n * sizeof(T));
    return v;
  }
};

/// The test binary's one GPU environment (created on first use).
inline GpuEnv& env() {
  static GpuEnv e;
  return e;
}

/// A matmul test's output y against two CPU references of the same call (y0: y's prior contents):
/// want_twin on the operands as the kernel rounds them, want in f32. twin / f32: max |y - want_twin| and
/// max |y - want| over max |want| (inf when y holds a non-finite value); changed: the elements outside the
/// output (where want equals y0) whose bits y changed.
struct OutputErrors {
  float twin = 0, f32 = 0;
  std::vector<size_t> changed;
};
inline OutputErrors output_errors(const std::vector<float>& y, const std::vector<float>& want_twin,
                                  const std::vector<float>& want, const std::vector<float>& y0) {
  OutputErrors r;
  float mx = 0;
  for (float v : want) mx = std::max(mx, std::fabs(v));
  for (size_t i = 0; i < y.size(); ++i) {
    const float a = std::fabs(y[i] - want_twin[i]), b = std::fabs(y[i] - want[i]);
    r.twin = std::max(r.twin, a <= 1e30f ? a : INFINITY);
    r.f32 = std::max(r.f32, b <= 1e30f ? b : INFINITY);
    if (want[i] == y0[i] && std::memcmp(&y[i], &y0[i], 4) != 0) r.changed.push_back(i);
  }
  r.twin /= mx;
  r.f32 /= mx;
  return r;
}

/// n samples of N(0, scale^2) from seed.
inline std::vector<float> randn(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

/// Stores v as an IEEE half, little-endian.
inline void put_f16(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  p[0] = uint8_t(h);
  p[1] = uint8_t(h >> 8);
}

/// Random well-formed blocks of type t for N rows of K elements (K a multiple of t's block):
/// random quants with sane scales (d in [0.001, 0.05), Q4_1 / Q4_K mins to match), N(0, 1) values
/// for the float types.
inline std::vector<uint8_t> random_blocks(DType t, uint32_t K, uint32_t N, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> sc(0.001f, 0.05f);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  const size_t bb = dtype_block_bytes(t), be = dtype_block_elems(t), nblocks = size_t(K) * N / be;
  std::vector<uint8_t> d(nblocks * bb);
  for (auto& b : d) b = uint8_t(g());
  for (size_t i = 0; i < nblocks; ++i) {
    uint8_t* b = d.data() + i * bb;
    switch (t) {
      case DType::F16: put_f16(b, nd(g)); break;
      case DType::BF16: {
        const uint32_t u = bits_from_f32(nd(g));
        b[0] = uint8_t(u >> 16);
        b[1] = uint8_t(u >> 24);
        break;
      }
      case DType::F32: {
        const float v = nd(g);
        std::memcpy(b, &v, 4);
        break;
      }
      case DType::Q4_0: case DType::Q5_0: case DType::Q8_0: put_f16(b, sc(g)); break;
      case DType::Q4_1: put_f16(b, sc(g)); put_f16(b + 2, -sc(g) * 8); break;
      case DType::Q4_K: put_f16(b, sc(g)); put_f16(b + 2, sc(g)); break;
      case DType::Q6_K: put_f16(b + 208, sc(g) * 0.1f); break;
      default: break;
    }
  }
  return d;
}

}  // namespace wgllm::kernels::testing
