#include "kernels/matmul_int8.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "kernels/wgsl.h"

namespace wgllm::kernels {

namespace {
// quantize_q8's and matmul_tiled_i8's uniforms (match their WGSL `struct P`: kernels/params_layout.h).
struct QuantizeQ8Params { uint32_t T, nb, x_off, x_stride, soff, gx; };
WGLLM_PARAMS(QuantizeQ8Params, T, nb, x_off, x_stride, soff, gx);
struct TiledI8Params { uint32_t K, N, T, nb, soff, y_off, y_stride; };
WGLLM_PARAMS(TiledI8Params, K, N, T, nb, soff, y_off, y_stride);

// The kernel source with its register tile written out as straight-line code (see
// matmul_tiled.cpp tiled_source() for why): accumulators c_A_B, per K-step the thread's RN weight
// rows' and RT tokens' block words loaded once from workgroup memory, then RN x RT acc_step calls.
std::string i8_source(const MatmulTile& t) {
  auto id = [](const char* pre, uint32_t a, uint32_t b) {
    return std::string(pre) + "_" + std::to_string(a) + "_" + std::to_string(b);
  };
  std::string decl, step, store;
  for (uint32_t a = 0; a < t.rn; ++a)
    for (uint32_t b = 0; b < t.rt; ++b) decl += "var " + id("c", a, b) + " = 0.0; ";
  for (uint32_t a = 0; a < t.rn; ++a) {
    const std::string r = "tn + " + std::to_string(a) + "u * WN", sa = std::to_string(a);
    step += "let w" + sa + "_0 = wt[" + r + "]; let w" + sa + "_1 = wt[BN + " + r + "]; let ws" + sa + " = wsc[" + r + "];\n    ";
  }
  for (uint32_t b = 0; b < t.rt; ++b) {
    const std::string r = "tq + " + std::to_string(b) + "u * WT", sb = std::to_string(b);
    step += "let x" + sb + "_0 = xt[" + r + "]; let x" + sb + "_1 = xt[BT + " + r + "]; let xs" + sb + " = xsc[" + r + "];\n    ";
  }
  for (uint32_t a = 0; a < t.rn; ++a)
    for (uint32_t b = 0; b < t.rt; ++b) {
      const std::string sa = std::to_string(a), sb = std::to_string(b), c = id("c", a, b);
      step += c + " = acc_step(" + c + ", w" + sa + "_0, w" + sa + "_1, ws" + sa + ", x" + sb + "_0, x" + sb + "_1, xs" + sb +
              ");\n    ";
    }
  for (uint32_t a = 0; a < t.rn; ++a)
    for (uint32_t b = 0; b < t.rt; ++b)
      store += "store1(n0 + tn + " + std::to_string(a) + "u * WN, t0 + tq + " + std::to_string(b) + "u * WT, " +
               id("c", a, b) + ");\n  ";
  const uint32_t nt = t.threads(), wpt = (t.bn * 4 + nt - 1) / nt, xpt = (t.bt * 2 + nt - 1) / nt;
  std::string src(wgsl_source("matmul_tiled_i8"));
  replace_marker(src, "matmul_tiled_i8", "/*TILE_DECL*/", decl);
  replace_marker(src, "matmul_tiled_i8", "/*TILE_STEP*/", step);
  replace_marker(src, "matmul_tiled_i8", "/*TILE_STORE*/", store);
  fill_tile_prefetch(src, "matmul_tiled_i8", wpt, xpt, "XRaw");
  return src;
}

uint64_t round_up(uint64_t v, uint64_t m) { return (v + m - 1) / m * m; }

}  // namespace

Q8Layout Q8Layout::of(uint32_t T, uint32_t K) {
  Q8Layout l;
  l.nb = K / 32;
  const uint64_t blocks = uint64_t(T) * l.nb;
  l.soff = round_up(blocks * 8, 64);  // 64 words = 256 bytes: a storage binding offset
  l.words = l.soff + blocks * 2;
  return l;
}

bool matmul_int8_supported(const GpuWeight& W) {
  return W.fmt != WFormat::F32 && W.K % 32 == 0;
}

bool matmul_int8_used(const OpContext& o, const GpuWeight& W) {
  return on_for_gpus(o, o.opt.matmul_int8) && matmul_int8_supported(W);
}

void ref_quantize_q8(const float* x, uint32_t K, int8_t* q, float* d, float* s) {
  for (uint32_t b = 0; b < K / 32; ++b) {
    const float* xb = x + b * 32;
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float db = amax / 127.0f, id = db != 0.0f ? 1.0f / db : 0.0f;
    int sum = 0;
    for (int j = 0; j < 32; ++j) {
      const int v = int(std::nearbyint(xb[j] * id));  // default rounding mode: ties to even
      q[b * 32 + j] = int8_t(v);
      sum += v;
    }
    d[b] = db;
    s[b] = db * float(sum);
  }
}

void quantize_q8(OpContext& o, F32Ref x, uint32_t x_stride, uint32_t T, uint32_t K, const gpu::Buffer& out) {
  if (K % 32 || x.off % 4 || x_stride % 4)
    throw Error("quantize_q8: K must be a multiple of 32, x offset and stride multiples of 4");
  const Q8Layout l = Q8Layout::of(T, K);
  if (out.size() < l.words * 4) throw Error("quantize_q8: output buffer too small");
  const auto& p = o.pipelines.get(variant_key("quantize_q8", {}), [&] {
    return gpu::KernelSpec{"", specialize("quantize_q8", {}),
                           {gpu::Bind::ReadOnly, gpu::Bind::ReadWrite, gpu::Bind::Uniform}};
  });
  const uint64_t wgs = (uint64_t(T) * l.nb + 255) / 256;
  const uint32_t gx = uint32_t(std::min<uint64_t>(wgs, 65535)), gy = uint32_t((wgs + gx - 1) / gx);
  QuantizeQ8Params prm{T, l.nb, x.off, x_stride, uint32_t(l.soff), gx};
  gpu::TrafficBytes tb;
  tb.r(gpu::Traffic::Activations, uint64_t(T) * K * 4).w(gpu::Traffic::Activations, uint64_t(T) * (K + l.nb * 8));
  o.rec.declare(tb);
  o.rec.dispatch(p, {x.buf, gpu::Binding(out, 0, l.words * 4)}, prm, gx, gy, 1, "quantize_q8");
}

void matmul_int8(OpContext& o, const GpuWeight& W, F32Ref x, uint32_t x_stride, F32Ref y, uint32_t y_stride,
                 uint32_t T, bool accumulate, const char* label, gpu::Traffic y_kind) {
  if (!matmul_int8_supported(W) || !matmul_tiled_supported(W, x, x_stride))
    throw Error("matmul_int8: needs a quantized weight with K a multiple of 32 and activation offset and stride multiples of 4");
  const MatmulTile t = matmul_tile(o, false, W.N, T);
  const Q8Layout l = Q8Layout::of(T, W.K);
  const gpu::Buffer& q = o.rec.scratch(l.words * 4);
  quantize_q8(o, x, x_stride, T, W.K, q);
  const bool offset = W.fmt == WFormat::Q4_0 || W.fmt == WFormat::Q4_1 || W.fmt == WFormat::Q4_K;
  auto pipeline = [&](const MatmulTile& tt) -> const gpu::Pipeline& {
    Defines d{{wformat_define(W.fmt), "1"}, {"BE", std::to_string(W.block)}, {"BE32", W.block == 32 ? "1" : "0"},
              {"MAGIC", o.opt.dequant_magic ? "1" : "0"}};
    add_tile_defines(d, tt);
    d["ADD"] = accumulate ? "1" : "0";
    d["OFFSET"] = offset ? "1" : "0";
    d["SPLIT"] = W.fmt == WFormat::Q8_F32 || W.fmt == WFormat::Q6_K ? "1" : "0";
    return o.pipelines.get(variant_key("matmul_tiled_i8", d), [&] {
      return gpu::KernelSpec{"", specialize("matmul_tiled_i8", i8_source(tt), d),
                             {gpu::Bind::ReadOnly, gpu::Bind::ReadOnly, gpu::Bind::ReadOnly, gpu::Bind::ReadWrite,
                              gpu::Bind::Uniform}};
    });
  };
  const auto& p = with_tile_classes(o, false, t, pipeline);
  TiledI8Params prm{W.K, W.N, T, W.K / W.block, W.soff, y.off, y_stride};
  gpu::TrafficBytes tb;
  tb.r(gpu::Traffic::Weights, W.bytes()).r(gpu::Traffic::Activations, uint64_t(T) * (W.K + l.nb * 8));
  tb.w(y_kind, uint64_t(T) * W.N * 4);
  if (accumulate) tb.r(y_kind, uint64_t(T) * W.N * 4);
  o.rec.declare(tb);
  o.rec.dispatch(p, {W.buf, gpu::Binding(q, 0, l.soff * 4), gpu::Binding(q, l.soff * 4, (l.words - l.soff) * 4), y.buf},
                 prm, (W.N + t.bn - 1) / t.bn, (T + t.bt - 1) / t.bt, 1, label);
}

std::vector<ParamsLayout> matmul_int8_params_layouts() {
  return {WGLLM_LAYOUT(QuantizeQ8Params, "quantize_q8"), WGLLM_LAYOUT(TiledI8Params, "matmul_tiled_i8")};
}

}  // namespace wgllm::kernels
