#include "kernels/matmul_coop.h"

#include "core/error.h"
#include "kernels/matmul_tiled.h"
#include "kernels/wgsl.h"

namespace wgllm::kernels {

std::string CoopTile::str() const {
  return std::to_string(bn) + "x" + std::to_string(bt) + "/" + std::to_string(fn) + "x" + std::to_string(ft);
}

bool matmul_coop_used(OpContext& o, const GpuWeight& W) {
  // Cheap tests first: the availability probe runs a kernel once per device.
  return o.opt.matmul_coop && W.block % 4 == 0 && 32 % W.block == 0 && o.ctx.coop_matrix_f16();
}

CoopTile coop_tile(const OpContext& o) {
  CoopTile t;
  if (o.opt.matmul_coop_tile_n) t.bn = o.opt.matmul_coop_tile_n;
  if (o.opt.matmul_coop_tile_t) t.bt = o.opt.matmul_coop_tile_t;
  auto bad = [&](const std::string& why) { return Error("matmul_coop tile " + t.str() + ": " + why); };
  if (t.bn % (16 * t.fn) || t.bt % (16 * t.ft) || !t.bn || !t.bt)
    throw bad("sides must be multiples of 16 x the fragments per subgroup");
  const auto& lim = o.ctx.info().limits;
  const uint32_t sgs = std::max(1u, o.ctx.measured_subgroup_sizes().first);
  const uint32_t nt = t.subgroups() * sgs;
  if (nt > lim.maxComputeInvocationsPerWorkgroup || nt > lim.maxComputeWorkgroupSizeX)
    throw bad(std::to_string(nt) + " invocations exceed the adapter's " +
              std::to_string(std::min(lim.maxComputeInvocationsPerWorkgroup, lim.maxComputeWorkgroupSizeX)));
  if (t.workgroup_bytes() > lim.maxComputeWorkgroupStorageSize)
    throw bad(std::to_string(t.workgroup_bytes()) + " bytes of workgroup memory exceed the adapter's " +
              std::to_string(lim.maxComputeWorkgroupStorageSize));
  return t;
}

std::string coop_source(const CoopTile& t, uint32_t sgs) {
  auto acc = [](uint32_t j, uint32_t i) { return "acc_" + std::to_string(j) + "_" + std::to_string(i); };
  std::string decl, step, stage;
  for (uint32_t j = 0; j < t.ft; ++j)
    for (uint32_t i = 0; i < t.fn; ++i) decl += "var " + acc(j, i) + " = coop_mat16x16<f32, C>(); ";
  // Per 16 k: the subgroup's FT activation fragments (A, column-major in xs) and FN weight fragments
  // (B, row-major in ws), then FT x FN products.
  for (uint32_t j = 0; j < t.ft; ++j)
    step += "let a" + std::to_string(j) + " = coopLoad<coop_mat16x16<f16, A>>(&xs[kk * BT + ft0 + " +
            std::to_string(16 * j) + "u], BT);\n      ";
  for (uint32_t i = 0; i < t.fn; ++i)
    step += "let b" + std::to_string(i) + " = coopLoadT<coop_mat16x16<f16, B>>(&ws[kk * BN + fn0 + " +
            std::to_string(16 * i) + "u], BN);\n      ";
  for (uint32_t j = 0; j < t.ft; ++j)
    for (uint32_t i = 0; i < t.fn; ++i)
      step += acc(j, i) + " = coopMultiplyAdd(a" + std::to_string(j) + ", b" + std::to_string(i) + ", " + acc(j, i) +
              ");\n      ";
  for (uint32_t j = 0; j < t.ft; ++j)
    for (uint32_t i = 0; i < t.fn; ++i)
      stage += "coopStoreT(" + acc(j, i) + ", &cs[sg * 256u], 16u);\n  workgroupBarrier();\n  write_slot(sg, lane, t0 + ft0 + " +
               std::to_string(16 * j) + "u, n0 + fn0 + " + std::to_string(16 * i) + "u);\n  workgroupBarrier();\n  ";
  // Prefetch slots as matmul_tiled's: ceil(BN * 4 / NT) weight parts and ceil(BT * 8 / NT) activation vec4s.
  const uint32_t nt = t.subgroups() * sgs, wpt = (t.bn * 4 + nt - 1) / nt, xpt = (t.bt * 8 + nt - 1) / nt;
  std::string src(wgsl_source("matmul_coop"));
  fill_tile_prefetch(src, "matmul_coop", wpt, xpt, "vec4<f32>");
  replace_marker(src, "matmul_coop", "/*COOP_DECL*/", decl);
  replace_marker(src, "matmul_coop", "/*COOP_STEP*/", step);
  replace_marker(src, "matmul_coop", "/*COOP_STAGE*/", stage);
  return src;
}

void matmul_coop(OpContext& o, const GpuWeight& W, F32Ref x, uint32_t x_stride, F32Ref y, uint32_t y_stride,
                 uint32_t T, bool accumulate, const char* label, gpu::Traffic y_kind) {
  if (!matmul_tiled_supported(W, x, x_stride))
    throw Error("matmul_coop: activation offset and stride must be multiples of 4 and the weight block divide 32");
  if (!o.ctx.coop_matrix_f16())
    throw Error("matmul_coop: the device has no 16 x 16 x 16 f16 cooperative matrices (" + o.ctx.coop_matrix_status() + ")");
  const CoopTile t = coop_tile(o);
  const uint32_t sgs = o.ctx.measured_subgroup_sizes().first;
  Defines d{{wformat_define(W.fmt), "1"}, {"BE", std::to_string(W.block)}, {"BE32", W.block == 32 ? "1" : "0"},
            {"MAGIC", o.opt.dequant_magic ? "1" : "0"}, {"BN", std::to_string(t.bn)}, {"BT", std::to_string(t.bt)},
            {"FN", std::to_string(t.fn)}, {"FT", std::to_string(t.ft)}, {"SGS", std::to_string(sgs)},
            {"ADD", accumulate ? "1" : "0"}};
  const auto& p = o.pipelines.get(variant_key("matmul_coop", d), [&] {
    return gpu::KernelSpec{"", specialize("matmul_coop", coop_source(t, sgs), d),
                           {gpu::Bind::ReadOnly, gpu::Bind::ReadOnly, gpu::Bind::ReadWrite, gpu::Bind::Uniform}};
  });
  dispatch_tiled(o, p, W, x, x_stride, y, y_stride, T, accumulate, label, y_kind, t.bn, t.bt);
}

std::vector<ParamsLayout> matmul_coop_params_layouts() {
  return {WGLLM_LAYOUT(TiledParams, "matmul_coop")};
}

}  // namespace wgllm::kernels
