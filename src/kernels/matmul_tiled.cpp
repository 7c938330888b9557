#include "kernels/matmul_tiled.h"

#include <algorithm>

#include "core/error.h"
#include "kernels/wgsl.h"

namespace wgllm::kernels {

std::string MatmulTile::str() const {
  return std::to_string(bn) + "x" + std::to_string(bt) + "/" + std::to_string(rn) + "x" + std::to_string(rt);
}

MatmulTile matmul_tile(const OpContext& o, bool f16) {
  const bool sw = o.ctx.info().is_software();
  MatmulTile t = sw ? MatmulTile{32, 32, 4, 4} : MatmulTile{64, 64, 4, 4};
  if (o.opt.matmul_tile_n) t.bn = o.opt.matmul_tile_n;
  if (o.opt.matmul_tile_t) t.bt = o.opt.matmul_tile_t;
  if (o.opt.matmul_reg_n) t.rn = o.opt.matmul_reg_n;
  if (o.opt.matmul_reg_t) t.rt = o.opt.matmul_reg_t;
  auto bad = [&](const std::string& why) { return Error("matmul tile " + t.str() + ": " + why); };
  if ((t.rn != 4 && t.rn != 8) || (t.rt != 4 && t.rt != 8)) throw bad("register tile sides must be 4 or 8");
  if (t.bn == 0 || t.bt == 0 || t.bn % t.rn || t.bt % t.rt) throw bad("tile sides must be multiples of the register tile's");
  const auto& lim = o.ctx.info().limits;
  if (t.threads() > lim.maxComputeInvocationsPerWorkgroup || t.threads() > lim.maxComputeWorkgroupSizeX)
    throw bad(std::to_string(t.threads()) + " threads exceed the adapter's " +
              std::to_string(std::min(lim.maxComputeInvocationsPerWorkgroup, lim.maxComputeWorkgroupSizeX)));
  if (t.workgroup_bytes(f16) > lim.maxComputeWorkgroupStorageSize)
    throw bad(std::to_string(t.workgroup_bytes(f16)) + " bytes of workgroup memory exceed the adapter's " +
              std::to_string(lim.maxComputeWorkgroupStorageSize));
  return t;
}

bool matmul_tiled_supported(const GpuWeight& W, F32Ref x, uint32_t x_stride) {
  return x.off % 4 == 0 && x_stride % 4 == 0 && W.block % 4 == 0 && 32 % W.block == 0;
}

bool matmul_tiled_uses_f16(const OpContext& o) {
  return o.opt.matmul_tiled_f16 && o.ctx.has_feature(WGPUFeatureName_ShaderF16);
}

void matmul_tiled(OpContext& o, const GpuWeight& W, F32Ref x, uint32_t x_stride, F32Ref y, uint32_t y_stride,
                  uint32_t T, bool accumulate, const char* label, gpu::Traffic y_kind) {
  if (!matmul_tiled_supported(W, x, x_stride))
    throw Error("matmul_tiled: activation offset and stride must be multiples of 4 and the weight block divide 32");
  const bool f16 = matmul_tiled_uses_f16(o);
  const MatmulTile t = matmul_tile(o, f16);
  // The weight defines as kernels::matmul sets them (ops.cpp keeps its helper file-local).
  Defines d{{wformat_define(W.fmt), "1"}, {"BE", std::to_string(W.block)}, {"BE16", W.block == 16 ? "1" : "0"},
            {"BE32", W.block == 32 ? "1" : "0"}};
  d["BN"] = std::to_string(t.bn);
  d["BT"] = std::to_string(t.bt);
  d["RN"] = std::to_string(t.rn);
  d["RT"] = std::to_string(t.rt);
  d["ADD"] = accumulate ? "1" : "0";
  d["F16"] = f16 ? "1" : "0";
  const auto& p = o.pipelines.get(variant_key("matmul_tiled", d), [&] {
    return gpu::KernelSpec{"", specialize(wgsl_source("matmul_tiled"), d),
                           {gpu::Bind::ReadOnly, gpu::Bind::ReadOnly, gpu::Bind::ReadWrite, gpu::Bind::Uniform}};
  });
  struct { uint32_t K, N, T, nb, soff, x_off, x_stride, y_off, y_stride; } prm{
      W.K, W.N, T, W.K / W.block, W.soff, x.off, x_stride, y.off, y_stride};
  // Traffic as kernels::matmul declares it (the minimum: each operand once; the tiles re-read the
  // weights ceil(T / BT) times and the activations ceil(N / BN) times, mostly from cache).
  gpu::TrafficBytes tb;
  tb.r(gpu::Traffic::Weights, W.bytes()).r(gpu::Traffic::Activations, uint64_t(T) * W.K * 4);
  tb.w(y_kind, uint64_t(T) * W.N * 4);
  if (accumulate) tb.r(y_kind, uint64_t(T) * W.N * 4);
  o.rec.declare(tb);
  o.rec.dispatch(p, {W.buf, x.buf, y.buf}, prm, (W.N + t.bn - 1) / t.bn, (T + t.bt - 1) / t.bt, 1, label);
}

}  // namespace wgllm::kernels
