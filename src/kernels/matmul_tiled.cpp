#include "kernels/matmul_tiled.h"

#include <algorithm>

#include "core/error.h"
#include "kernels/matmul_coop.h"
#include "kernels/matmul_int8.h"
#include "kernels/params_layout.h"
#include "kernels/wgsl.h"

namespace wgllm::kernels {

std::string MatmulTile::str() const {
  return std::to_string(bn) + "x" + std::to_string(bt) + "/" + std::to_string(rn) + "x" + std::to_string(rt);
}

namespace {
// One step of shrink_tile()'s halving rule; false (t unchanged) when neither side can be halved.
bool shrink_once(MatmulTile& t, bool fixed_n, bool fixed_t) {
  const bool can_n = !fixed_n && t.bn / 2 >= std::max(32u, t.rn);
  const bool can_t = !fixed_t && t.bt / 2 >= std::max(32u, t.rt);
  if (can_n && (t.bn >= t.bt || !can_t))
    t.bn /= 2;
  else if (can_t)
    t.bt /= 2;
  else
    return false;
  return true;
}
}  // namespace

MatmulTile shrink_tile(MatmulTile t, bool fixed_n, bool fixed_t, uint32_t N, uint32_t T, uint32_t min_workgroups) {
  if (!N || !T) return t;
  auto wgs = [&] { return uint64_t((N + t.bn - 1) / t.bn) * ((T + t.bt - 1) / t.bt); };
  while (wgs() < min_workgroups && shrink_once(t, fixed_n, fixed_t)) {
  }
  return t;
}

void add_tile_defines(Defines& d, const MatmulTile& t) {
  d["BN"] = std::to_string(t.bn);
  d["BT"] = std::to_string(t.bt);
  d["RN"] = std::to_string(t.rn);
  d["RT"] = std::to_string(t.rt);
}

std::vector<MatmulTile> matmul_tile_classes(const OpContext& o, bool f16) {
  std::vector<MatmulTile> v{matmul_tile(o, f16)};
  if (o.ctx.info().is_software() || !o.opt.matmul_tiled_min_workgroups) return v;
  MatmulTile t = v[0];
  while (shrink_once(t, o.opt.matmul_tile_n != 0, o.opt.matmul_tile_t != 0)) v.push_back(t);
  return v;
}

MatmulTile matmul_tile(const OpContext& o, bool f16, uint32_t N, uint32_t T) {
  const bool sw = o.ctx.info().is_software();
  MatmulTile t = sw ? MatmulTile{32, 32, 4, 4} : MatmulTile{64, 64, 4, 4};
  if (o.opt.matmul_reg_n) t.rn = o.opt.matmul_reg_n;
  if (o.opt.matmul_reg_t) t.rt = o.opt.matmul_reg_t;
  if (!sw) t = shrink_tile(t, o.opt.matmul_tile_n != 0, o.opt.matmul_tile_t != 0, N, T, o.opt.matmul_tiled_min_workgroups);
  if (o.opt.matmul_tile_n) t.bn = o.opt.matmul_tile_n;
  if (o.opt.matmul_tile_t) t.bt = o.opt.matmul_tile_t;
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

namespace {
// The kernel source with its register tile written out: one named vec4 accumulator per (feature
// quad a, lane i, token quad b) and the k loop unrolled by 4, as straight-line code. (Loops over
// private arrays rely on the driver unrolling them, else the tile lives in scratch memory; naga
// also adds a bounding counter to every loop, which can keep drivers from unrolling.)
std::string tiled_source(const MatmulTile& t, bool f16) {
  const uint32_t rn = t.rn, rt = t.rt;
  const uint32_t na = rn / 4, nb = rt / 4;
  const char* lane = "xyzw";
  auto acc = [&](const char* pre, uint32_t a, uint32_t i, uint32_t b) {
    return std::string(pre) + "_" + std::to_string(a) + "_" + std::to_string(i) + "_" + std::to_string(b);
  };
  std::string decl, begin, step, end, store;
  for (uint32_t a = 0; a < na; ++a)
    for (uint32_t i = 0; i < 4; ++i)
      for (uint32_t b = 0; b < nb; ++b) {
        decl += "var " + acc("c", a, i, b) + " = vec4<f32>(0.0); ";
        if (f16) {
          begin += "var " + acc("h", a, i, b) + " = vec4<f16>(0.0h); ";
          end += acc("c", a, i, b) + " += vec4<f32>(" + acc("h", a, i, b) + "); ";
        }
      }
  const std::string vt = f16 ? "vec4<f16>" : "vec4<f32>";
  for (uint32_t u = 0; u < 4; ++u) {
    const std::string ku = "(k + " + std::to_string(u) + "u)", su = std::to_string(u);
    for (uint32_t a = 0; a < na; ++a)
      step += "let w" + su + "_" + std::to_string(a) + " = ws[" + ku + " * SN4 + tn + " + std::to_string(a) + "u * WN];\n      ";
    for (uint32_t b = 0; b < nb; ++b)
      step += "let x" + su + "_" + std::to_string(b) + " = xs[" + ku + " * ST4 + tq + " + std::to_string(b) + "u * WT];\n      ";
    for (uint32_t a = 0; a < na; ++a)
      for (uint32_t i = 0; i < 4; ++i)
        for (uint32_t b = 0; b < nb; ++b) {
          const std::string c = acc(f16 ? "h" : "c", a, i, b);
          step += c + " = fma(" + vt + "(w" + su + "_" + std::to_string(a) + "." + lane[i] + "), x" + su + "_" +
                  std::to_string(b) + ", " + c + ");\n      ";
        }
  }
  for (uint32_t a = 0; a < na; ++a)
    for (uint32_t i = 0; i < 4; ++i) {
      store += "{\n    let n = n0 + (tn + " + std::to_string(a) + "u * WN) * 4u + " + std::to_string(i) + "u;\n    if (n < p.N) {\n";
      for (uint32_t b = 0; b < nb; ++b)
        store += "      store4(n, t0 / 4u + tq + " + std::to_string(b) + "u * WT, " + acc("c", a, i, b) + ");\n";
      store += "    }\n  }\n  ";
    }
  // Prefetch slots: each thread moves ceil(BN * 4 / NT) weight parts and ceil(BT * 8 / NT)
  // activation vec4s per K-step.
  const uint32_t nt = t.threads(), wpt = (t.bn * 4 + nt - 1) / nt, xpt = (t.bt * 8 + nt - 1) / nt;
  std::string src(wgsl_source("matmul_tiled"));
  fill_tile_prefetch(src, "matmul_tiled", wpt, xpt, "vec4<f32>");
  replace_marker(src, "matmul_tiled", "/*TILE_DECL*/", decl);
  replace_marker(src, "matmul_tiled", "/*TILE_STEP_BEGIN*/", begin);
  replace_marker(src, "matmul_tiled", "/*TILE_STEP*/", step);
  replace_marker(src, "matmul_tiled", "/*TILE_STEP_END*/", end);
  replace_marker(src, "matmul_tiled", "/*TILE_STORE*/", store);
  return src;
}

}  // namespace

bool matmul_tiled_supported(const GpuWeight& W, F32Ref x, uint32_t x_stride) {
  return x.off % 4 == 0 && x_stride % 4 == 0 && W.block % 4 == 0 && 32 % W.block == 0;
}

bool matmul_tiled_enabled(const OpContext& o) {
  return on_for_gpus(o, o.opt.matmul_tiled);
}

bool matmul_tiled_uses_f16(const OpContext& o) {
  return o.opt.matmul_tiled_f16 && o.ctx.has_feature(WGPUFeatureName_ShaderF16);
}

void matmul_tiled(OpContext& o, const GpuWeight& W, F32Ref x, uint32_t x_stride, F32Ref y, uint32_t y_stride,
                  uint32_t T, bool accumulate, const char* label, gpu::Traffic y_kind) {
  if (!matmul_tiled_supported(W, x, x_stride))
    throw Error("matmul_tiled: activation offset and stride must be multiples of 4 and the weight block divide 32");
  if (matmul_coop_used(o, W)) return matmul_coop(o, W, x, x_stride, y, y_stride, T, accumulate, label, y_kind);
  if (matmul_int8_used(o, W)) return matmul_int8(o, W, x, x_stride, y, y_stride, T, accumulate, label, y_kind);
  const bool f16 = matmul_tiled_uses_f16(o);
  const MatmulTile t = matmul_tile(o, f16, W.N, T);
  auto pipeline = [&](const MatmulTile& tt) -> const gpu::Pipeline& {
    // The weight defines as kernels::matmul sets them, less BE16 (matmul_tiled.wgsl has no 16-element path).
    Defines d{{wformat_define(W.fmt), "1"}, {"BE", std::to_string(W.block)}, {"BE32", W.block == 32 ? "1" : "0"},
              {"MAGIC", o.opt.dequant_magic ? "1" : "0"}};
    add_tile_defines(d, tt);
    d["ADD"] = accumulate ? "1" : "0";
    d["F16"] = f16 ? "1" : "0";
    return o.pipelines.get(variant_key("matmul_tiled", d), [&] {
      return gpu::KernelSpec{"", specialize("matmul_tiled", tiled_source(tt, f16), d),
                             {gpu::Bind::ReadOnly, gpu::Bind::ReadOnly, gpu::Bind::ReadWrite, gpu::Bind::Uniform}};
    });
  };
  const auto& p = with_tile_classes(o, f16, t, pipeline);
  dispatch_tiled(o, p, W, x, x_stride, y, y_stride, T, accumulate, label, y_kind, t.bn, t.bt);
}

void dispatch_tiled(OpContext& o, const gpu::Pipeline& p, const GpuWeight& W, F32Ref x, uint32_t x_stride, F32Ref y,
                    uint32_t y_stride, uint32_t T, bool accumulate, const char* label, gpu::Traffic y_kind, uint32_t bn,
                    uint32_t bt) {
  TiledParams prm{W.K, W.N, T, W.K / W.block, W.soff, x.off, x_stride, y.off, y_stride};
  // Traffic as kernels::matmul declares it (the minimum: each operand once; the tiles re-read the
  // weights ceil(T / BT) times and the activations ceil(N / BN) times, mostly from cache).
  gpu::TrafficBytes tb;
  tb.r(gpu::Traffic::Weights, W.bytes()).r(gpu::Traffic::Activations, uint64_t(T) * W.K * 4);
  tb.w(y_kind, uint64_t(T) * W.N * 4);
  if (accumulate) tb.r(y_kind, uint64_t(T) * W.N * 4);
  o.rec.declare(tb);
  o.rec.dispatch(p, {W.buf, x.buf, y.buf}, prm, (W.N + bn - 1) / bn, (T + bt - 1) / bt, 1, label);
}

std::vector<ParamsLayout> matmul_tiled_params_layouts() {
  std::vector<ParamsLayout> v{WGLLM_LAYOUT(TiledParams, "matmul_tiled", {{"F16", "0"}}),
                              WGLLM_LAYOUT(TiledParams, "matmul_tiled", {{"F16", "1"}})};
  for (auto& l : matmul_int8_params_layouts()) v.push_back(std::move(l));
  for (auto& l : matmul_coop_params_layouts()) v.push_back(std::move(l));
  return v;
}

void fill_tile_prefetch(std::string& src, const std::string& name, uint32_t wpt, uint32_t xpt, const std::string& x_type) {
  std::string decl, first, next, put;
  auto parts = [&](uint32_t n, const char* reg, const std::string& type, const char* fetch, const char* base,
                   const char* store) {
    for (uint32_t i = 0; i < n; ++i) {
      const std::string r = reg + std::to_string(i), slot = "lid + " + std::to_string(i) + "u * NT";
      decl += "var " + r + ": " + type + "; ";
      first += r + " = " + fetch + "(" + slot + ", " + base + ", 0u); ";
      next += r + " = " + fetch + "(" + slot + ", " + base + ", kt + 1u); ";
      put += std::string(store) + "(" + slot + ", " + r + "); ";
    }
  };
  parts(wpt, "wr_", "Raw", "fetch_w", "n0", "put_wslot");
  parts(xpt, "xr_", x_type, "fetch_x", "t0", "put_xslot");
  replace_marker(src, name, "/*TILE_PREFETCH_DECL*/", decl);
  replace_marker(src, name, "/*TILE_FETCH_FIRST*/", first);
  replace_marker(src, name, "/*TILE_FETCH_NEXT*/", next);
  replace_marker(src, name, "/*TILE_PUT*/", put);
}

}  // namespace wgllm::kernels
