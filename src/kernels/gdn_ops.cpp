#include "kernels/gdn_ops.h"

#include <algorithm>
#include <utility>

#include "core/error.h"
#include "kernels/params_layout.h"
#include "kernels/wgsl.h"

namespace wgllm::kernels {
namespace {

using gpu::Bind;
using gpu::Traffic;
using gpu::TrafficBytes;

const gpu::Pipeline& get(OpContext& o, const std::string& name, const Defines& defs, std::vector<Bind> binds) {
  return o.pipelines.get(variant_key(name, defs), [&] {
    return gpu::KernelSpec{"", specialize(name, defs), std::move(binds)};
  });
}

uint32_t ceil_div(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

// The uniforms of this file's kernels (each matches its WGSL `struct P`: kernels/params_layout.h,
// gdn_ops_params_layouts() at the end).
struct HeadNormParams { uint32_t H, D, off, stride, head_stride; float eps; };
WGLLM_PARAMS(HeadNormParams, H, D, off, stride, head_stride, eps);
struct GatedRmsnormParams { uint32_t D; float eps; uint32_t x_off, x_stride, z_off, z_stride; };
WGLLM_PARAMS(GatedRmsnormParams, D, eps, x_off, x_stride, z_off, z_stride);
struct SigmoidGateParams { uint32_t T, N, x_off, x_stride, g_off, g_stride; };
WGLLM_PARAMS(SigmoidGateParams, T, N, x_off, x_stride, g_off, g_stride);
struct GatesParams { uint32_t T, NV, a_off, b_off, src_stride, out_off, out_stride, pad; };
WGLLM_PARAMS(GatesParams, T, NV, a_off, b_off, src_stride, out_off, out_stride, pad);
struct DecodePrepParams { uint32_t NK, NV, DK, VD, L, C, x_off, y_off, a_off, b_off, g_off; float eps; };
WGLLM_PARAMS(DecodePrepParams, NK, NV, DK, VD, L, C, x_off, y_off, a_off, b_off, g_off, eps);
struct DecodeParams {
  uint32_t NK, NV, DV, L, C, x_off, z_off, a_off, b_off, o_off, TILED;  // TILED: GdnDecodeOperands::tiled_v_heads
  float scale, l2_eps, norm_eps;
};
WGLLM_PARAMS(DecodeParams, NK, NV, DV, L, C, x_off, z_off, a_off, b_off, o_off, TILED, scale, l2_eps, norm_eps);

void head_norm(OpContext& o, bool l2, F32Ref x, uint32_t stride, uint32_t hs, uint32_t T, uint32_t H, uint32_t D,
               const gpu::Buffer* w, float eps, const char* label) {
  if (w == &x.buf) throw Error("rmsnorm_heads: the weight must not alias x");
  HeadNormParams prm{H, D, x.off, stride, hs, eps};
  o.rec.declare(TrafficBytes().r(Traffic::Activations, 4ull * T * H * D).w(Traffic::Activations, 4ull * T * H * D));
  if (l2)
    o.rec.dispatch(get(o, "head_norm", {{"L2", "1"}}, {Bind::ReadWrite, Bind::Uniform}), {x.buf}, prm, H, T, 1, label);
  else
    o.rec.dispatch(get(o, "head_norm", {{"L2", "0"}}, {Bind::ReadWrite, Bind::ReadOnly, Bind::Uniform}), {x.buf, *w}, prm,
                   H, T, 1, label);
}

struct QkNormRopeKvParams {
  uint32_t T, Hq, Hkv, HD, rot, pos0, q_off, q_stride, k_off, v_off, kv_stride, table_pairs;
  float eps;
  uint32_t pad0 = 0, pad1 = 0, pad2 = 0;
};
WGLLM_PARAMS(QkNormRopeKvParams, T, Hq, Hkv, HD, rot, pos0, q_off, q_stride, k_off, v_off, kv_stride, table_pairs, eps,
             pad0, pad1, pad2);

}  // namespace

void qk_norm_rope_kv_store(OpContext& o, const gpu::Buffer& src, uint32_t q_off, uint32_t q_stride, uint32_t k_off,
                           uint32_t v_off, uint32_t kv_stride, uint32_t T, uint32_t Hq, uint32_t Hkv, uint32_t HD,
                           uint32_t rot, uint32_t pos0, const gpu::Buffer& table, bool neox, const gpu::Buffer& qw,
                           const gpu::Buffer& kw, float eps, gpu::Binding kc, gpu::Binding vc) {
  if (rot % 2 || rot > HD) throw Error("qk_norm_rope_kv_store: rotary dims must be even and <= head_dim");
  const auto& p = get(o, "qk_norm_rope_kv", {{"NEOX", neox ? "1" : "0"}},
                      {Bind::ReadWrite, Bind::ReadOnly, Bind::ReadOnly, Bind::ReadOnly, Bind::ReadWrite, Bind::ReadWrite,
                       Bind::Uniform});
  const uint32_t kv_dim = Hkv * HD;
  QkNormRopeKvParams prm{T, Hq, Hkv, HD, rot, pos0, q_off, q_stride, k_off, v_off, kv_stride, rot / 2, eps};
  o.rec.declare(TrafficBytes()
                    .r(Traffic::Activations, 4ull * T * (Hq * HD + 2 * kv_dim))
                    .r(Traffic::Weights, 4ull * (T * rot + 2 * HD))
                    .w(Traffic::Activations, 4ull * T * Hq * HD)
                    .w(Traffic::KvCache, 8ull * T * kv_dim));
  o.rec.dispatch(p, {src, qw, kw, table, kc, vc}, prm, Hq + Hkv, T, 1, "qk_norm_rope_kv");
}

namespace {

struct GdnParams {
  uint32_t T, NK, NV, DK, DV, C, q_off, k_off, v_off, qkv_stride, g_off, gb_stride, s_off, o_off, o_stride, a_off,
      p_off, gc_off, w_off, u_off;
  float scale;
  uint32_t TILED;  // GdnOperands::tiled_v_heads
  float norm_eps = 0;  // gdn_step_norm only
  uint32_t z_off = 0;
};
WGLLM_PARAMS(GdnParams, T, NK, NV, DK, DV, C, q_off, k_off, v_off, qkv_stride, g_off, gb_stride, s_off, o_off, o_stride,
             a_off, p_off, gc_off, w_off, u_off, scale, TILED, norm_eps, z_off);

GdnParams params(const GdnOperands& a, uint32_t C) {
  if (!a.NK || !a.NV || a.NV % a.NK || !a.DK || !a.DV || !a.T) throw Error("gated delta rule: bad head shape");
  if (&a.state == &a.out || &a.state == &a.qkv || &a.out == &a.qkv || &a.gates == &a.state || &a.gates == &a.out)
    throw Error("gated delta rule: state and out must be buffers distinct from every other operand");
  const uint64_t nch = ceil_div(a.T, C);
  const uint64_t mats = nch * a.NV * C * C;
  GdnParams p{a.T, a.NK, a.NV, a.DK, a.DV, C, a.q_off, a.k_off, a.v_off, a.qkv_stride, a.g_off, a.gb_stride, 0,
              a.o_off, a.o_stride, 0, 0, 0, 0, 0, a.scale, a.tiled_v_heads ? 1u : 0u};
  p.a_off = 0;
  p.p_off = uint32_t(mats);
  p.gc_off = uint32_t(2 * mats);
  p.w_off = uint32_t(2 * mats + nch * a.NV * C);
  p.u_off = uint32_t(p.w_off + uint64_t(a.T) * a.NV * a.DK);
  return p;
}

}  // namespace

void l2norm_heads(OpContext& o, F32Ref x, uint32_t stride, uint32_t hs, uint32_t T, uint32_t H, uint32_t D, float eps,
                  const char* label) {
  head_norm(o, true, x, stride, hs, T, H, D, nullptr, eps, label);
}

void rmsnorm_heads(OpContext& o, F32Ref x, uint32_t stride, uint32_t hs, uint32_t T, uint32_t H, uint32_t D,
                   const gpu::Buffer& w, float eps, const char* label) {
  head_norm(o, false, x, stride, hs, T, H, D, &w, eps, label);
}

void gated_rmsnorm(OpContext& o, F32Ref x, uint32_t x_stride, F32Ref z, uint32_t z_stride, const gpu::Buffer& w,
                   uint32_t T, uint32_t H, uint32_t D, float eps) {
  if (&x.buf == &z.buf || &x.buf == &w) throw Error("gated_rmsnorm: x must not alias z or w");
  const auto& p = get(o, "gated_rmsnorm", {}, {Bind::ReadWrite, Bind::ReadOnly, Bind::ReadOnly, Bind::Uniform});
  GatedRmsnormParams prm{D, eps, x.off, x_stride, z.off, z_stride};
  o.rec.declare(TrafficBytes().r(Traffic::Activations, 8ull * T * H * D).w(Traffic::Activations, 4ull * T * H * D));
  o.rec.dispatch(p, {x.buf, z.buf, w}, prm, H, T, 1, "gated_rmsnorm");
}

void sigmoid_gate(OpContext& o, F32Ref x, uint32_t x_stride, F32Ref g, uint32_t g_stride, uint32_t T, uint32_t N) {
  if (&x.buf == &g.buf) throw Error("sigmoid_gate: x must not alias g");
  const auto& p = get(o, "sigmoid_gate", {}, {Bind::ReadWrite, Bind::ReadOnly, Bind::Uniform});
  SigmoidGateParams prm{T, N, x.off, x_stride, g.off, g_stride};
  o.rec.declare(TrafficBytes().r(Traffic::Activations, 8ull * T * N).w(Traffic::Activations, 4ull * T * N));
  o.rec.dispatch(p, {x.buf, g.buf}, prm, ceil_div(N, 64), T, 1, "sigmoid_gate");
}

void gdn_gates(OpContext& o, const gpu::Buffer& src, uint32_t a_off, uint32_t b_off, uint32_t src_stride,
               const gpu::Buffer& a_log, const gpu::Buffer& dt_bias, F32Ref out, uint32_t out_stride, uint32_t T,
               uint32_t NV) {
  if (&out.buf == &src) throw Error("gdn_gates: out must not alias src");
  const auto& p = get(o, "gdn_gates", {}, {Bind::ReadOnly, Bind::ReadOnly, Bind::ReadOnly, Bind::ReadWrite, Bind::Uniform});
  GatesParams prm{
      T, NV, a_off, b_off, src_stride, out.off, out_stride, 0};
  o.rec.declare(TrafficBytes().r(Traffic::Activations, 8ull * T * NV).r(Traffic::Weights, 8ull * NV)
                    .w(Traffic::Activations, 8ull * T * NV));
  o.rec.dispatch(p, {src, a_log, dt_bias, out.buf}, prm, ceil_div(NV, 64), T, 1, "gdn_gates");
}

void gdn_step(OpContext& o, const GdnOperands& a) {
  if (a.T != 1) throw Error("gdn_step: exactly one token (use gdn_chunked for prefill)");
  const GdnParams prm = params(a, 1);
  const auto& p = get(o, "gdn_step", {{"NORM", "0"}}, {Bind::ReadOnly, Bind::ReadOnly, Bind::ReadWrite, Bind::ReadWrite, Bind::Uniform});
  const uint64_t sb = 4ull * a.NV * a.DK * a.DV;
  o.rec.declare(TrafficBytes().r(Traffic::Activations, 4ull * (2 * a.NK * a.DK + a.NV * a.DV + 2 * a.NV))
                    .r(Traffic::Recurrent, sb).w(Traffic::Recurrent, sb).w(Traffic::Activations, 4ull * a.NV * a.DV));
  o.rec.dispatch(p, {a.qkv, a.gates, a.state, a.out}, prm, ceil_div(a.DV, 64), a.NV, 1, "gdn_step");
}

void gdn_step_norm(OpContext& o, const GdnOperands& a, F32Ref z, const gpu::Buffer& norm_w, float eps) {
  if (a.T != 1) throw Error("gdn_step_norm: exactly one token");
  if (&z.buf == &a.out || &z.buf == &a.state || &norm_w == &a.out || &norm_w == &a.state)
    throw Error("gdn_step_norm: z and the norm weight must not alias out or state");
  GdnParams prm = params(a, 1);
  prm.norm_eps = eps;
  prm.z_off = z.off;
  const uint32_t wg = std::min(256u, ceil_div(a.DV, 64) * 64);  // one thread per column up to 256
  const auto& p = get(o, "gdn_step", {{"NORM", "1"}, {"WG", std::to_string(wg)}, {"DV", std::to_string(a.DV)}},
                      {Bind::ReadOnly, Bind::ReadOnly, Bind::ReadWrite, Bind::ReadWrite, Bind::ReadOnly, Bind::ReadOnly,
                       Bind::Uniform});
  const uint64_t sb = 4ull * a.NV * a.DK * a.DV, vd = 4ull * a.NV * a.DV;
  o.rec.declare(TrafficBytes().r(Traffic::Activations, 4ull * (2 * a.NK * a.DK + 2 * a.NV) + 2 * vd)
                    .r(Traffic::Weights, 4ull * a.DV).r(Traffic::Recurrent, sb).w(Traffic::Recurrent, sb)
                    .w(Traffic::Activations, vd));
  o.rec.dispatch(p, {a.qkv, a.gates, a.state, a.out, z.buf, norm_w}, prm, a.NV, 1, 1, "gdn_step_norm");
}

void gdn_decode_prep(OpContext& o, const GdnPrepShape& s, const gpu::Buffer& src, uint32_t x_off, uint32_t a_off,
                     uint32_t b_off, const gpu::Buffer& conv_w, const gpu::Buffer& state, const gpu::Buffer& a_log,
                     const gpu::Buffer& dt_bias, F32Ref y, F32Ref gates) {
  if (!s.NK || !s.NV || !s.DK || !s.DV) throw Error("gdn_decode_prep: bad head shape");
  if (s.L < 2 || s.L > 64) throw Error("gdn_decode_prep: kernel width L must be in [2, 64]");
  for (const gpu::Buffer* b : {&src, &conv_w, &a_log, &dt_bias})
    if (b == &y.buf || b == &state || b == &gates.buf) throw Error("gdn_decode_prep: y, state and gates must not alias an input");
  if (&y.buf == &state || &y.buf == &gates.buf || &state == &gates.buf)
    throw Error("gdn_decode_prep: y, state and gates must be different buffers");
  const uint32_t VD = s.NV * s.DV, C = 2 * s.NK * s.DK + VD;
  DecodePrepParams prm{
      s.NK, s.NV, s.DK, VD, s.L, C, x_off, y.off, a_off, b_off, gates.off, s.eps};
  const auto& p = get(o, "gdn_decode_prep", {},
                      {Bind::ReadOnly, Bind::ReadOnly, Bind::ReadOnly, Bind::ReadOnly, Bind::ReadWrite, Bind::ReadWrite,
                       Bind::ReadWrite, Bind::Uniform});
  const uint64_t sb = 4ull * (s.L - 1) * C;
  o.rec.declare(TrafficBytes().r(Traffic::Activations, 4ull * (C + 2 * s.NV)).r(Traffic::Weights, 4ull * (C * s.L + 2 * s.NV))
                    .r(Traffic::Recurrent, sb).w(Traffic::Recurrent, sb).w(Traffic::Activations, 4ull * (C + 2 * s.NV)));
  const uint32_t groups = 2 * s.NK + ceil_div(VD, 64) + ceil_div(s.NV, 64);
  o.rec.dispatch(p, {src, conv_w, a_log, dt_bias, state, y.buf, gates.buf}, prm, groups, 1, 1, "gdn_decode_prep");
}

namespace {
// gdn_decode.wgsl's WG: RS threads for each of a key head's RDV = R*DV state columns, rounded up to 64, at
// most 256 (more columns: the threads loop).
uint32_t gdn_decode_threads(uint32_t RDV, uint32_t rs) { return std::min(256u, ceil_div(RDV * rs, 64) * 64); }

// Bytes of gdn_decode.wgsl's workgroup variables for RS threads per column: qs, ks (DK), vs (R*DV), gs (2R),
// redq, redk (64 each) and, with RS > 1, part (WG). Each variable is rounded up to 16 bytes, as WebGPU counts
// it against maxComputeWorkgroupStorageSize.
uint64_t gdn_decode_wg_bytes(const GdnPrepShape& s, uint32_t rs) {
  const uint32_t R = s.NV / s.NK, RDV = R * s.DV;
  auto r16 = [](uint64_t bytes) { return (bytes + 15) / 16 * 16; };
  return 2 * r16(4ull * s.DK) + r16(4ull * RDV) + r16(8ull * R) + 2 * 256 +
         (rs > 1 ? r16(4ull * gdn_decode_threads(RDV, rs)) : 0);
}
}  // namespace

bool gdn_decode_fits(const GdnPrepShape& s) {
  if (!s.NK || s.NV % s.NK) return false;
  // R <= 64: the gates of a workgroup's value heads are one per thread.
  return s.NV / s.NK <= 64 && gdn_decode_wg_bytes(s, 1) <= 16384;
}

uint32_t gdn_decode_row_split(const OpContext& o, const GdnPrepShape& s) {
  const uint32_t set = o.opt.gdn_decode_row_split;
  if (set != 0 && set != 1 && set != 2 && set != 4)
    throw Error("gdn_decode_row_split must be 0 (adapter default), 1, 2 or 4, not " + std::to_string(set));
  uint32_t rs = set ? set : (o.ctx.info().is_software() ? 1u : kGdnDecodeRowSplitGpu);
  // RS divides DK; the partial sums (one f32 per thread) fit beside the rest in WebGPU's default 16 KiB.
  while (rs > 1 && (s.DK % rs || !s.NK || gdn_decode_wg_bytes(s, rs) > 16384)) rs /= 2;
  return rs;
}

void gdn_decode(OpContext& o, const GdnDecodeOperands& a) {
  const GdnPrepShape& s = a.shape;
  if (!s.NK || !s.NV || s.NV % s.NK || !s.DK || !s.DV) throw Error("gdn_decode: bad head shape");
  if (!gdn_decode_fits(s)) throw Error("gdn_decode: a key head's values exceed 16 KiB of workgroup memory");
  if (s.L < 2 || s.L > 64) throw Error("gdn_decode: kernel width L must be in [2, 64]");
  for (const gpu::Buffer* b : {&a.proj, &a.conv_w, &a.a_log, &a.dt_bias, &a.norm_w})
    if (b == &a.conv_state || b == &a.state || b == &a.out.buf) throw Error("gdn_decode: outputs must not alias an input");
  if (&a.conv_state == &a.state || &a.conv_state == &a.out.buf || &a.state == &a.out.buf)
    throw Error("gdn_decode: conv_state, state and out must be different buffers");
  const uint32_t R = s.NV / s.NK, RDV = R * s.DV, C = 2 * s.NK * s.DK + s.NV * s.DV;
  const uint32_t rs = gdn_decode_row_split(o, s);
  const uint32_t wg = gdn_decode_threads(RDV, rs);
  DecodeParams prm{
      s.NK, s.NV, s.DV, s.L, C, a.x_off, a.z_off, a.a_off, a.b_off, a.out.off, a.tiled_v_heads ? 1u : 0u,
      a.scale, s.eps, a.norm_eps};
  const Defines d{{"WG", std::to_string(wg)}, {"DK", std::to_string(s.DK)}, {"R", std::to_string(R)},
                  {"RDV", std::to_string(RDV)}, {"RS", std::to_string(rs)}, {"ROWSPLIT", rs > 1 ? "1" : "0"}};
  const auto& p = get(o, "gdn_decode", d,
                      {Bind::ReadOnly, Bind::ReadOnly, Bind::ReadOnly, Bind::ReadOnly, Bind::ReadOnly, Bind::ReadWrite,
                       Bind::ReadWrite, Bind::ReadWrite, Bind::Uniform});
  const uint64_t cs = 4ull * (s.L - 1) * C, sb = 4ull * s.NV * s.DK * s.DV, vd = 4ull * s.NV * s.DV;
  o.rec.declare(TrafficBytes().r(Traffic::Activations, 4ull * (C + 2 * s.NV) + vd)
                    .r(Traffic::Weights, 4ull * (C * s.L + 2 * s.NV + s.DV))
                    .r(Traffic::Recurrent, cs + sb).w(Traffic::Recurrent, cs + sb).w(Traffic::Activations, vd));
  o.rec.dispatch(p, {a.proj, a.conv_w, a.a_log, a.dt_bias, a.norm_w, a.conv_state, a.state, a.out.buf}, prm, s.NK, 1, 1,
                 "gdn_decode");
}

uint64_t gdn_chunk_work_floats(uint32_t T, uint32_t C, uint32_t NV, uint32_t DK, uint32_t DV) {
  const uint64_t nch = ceil_div(T, C);
  return 2 * nch * NV * C * C + nch * NV * C + uint64_t(T) * NV * (DK + DV);
}

uint32_t gdn_chunk_for(const KernelOptions& k, uint32_t T) {
  if (k.gdn_chunk < 1 || k.gdn_chunk > 256) throw Error("gdn_chunk must be in [1, 256], got " + std::to_string(k.gdn_chunk));
  if (k.gdn_chunk_long > 256) throw Error("gdn_chunk_long must be in [0, 256], got " + std::to_string(k.gdn_chunk_long));
  return k.gdn_chunk_long && T >= k.gdn_chunk_long_from ? k.gdn_chunk_long : k.gdn_chunk;
}

uint64_t gdn_chunk_work_floats_max(const KernelOptions& k, uint32_t T, uint32_t NV, uint32_t DK, uint32_t DV) {
  // the chunk of the shortest forward (2 tokens or fewer never take the long chunk) and of the longest
  return std::max(gdn_chunk_work_floats(T, gdn_chunk_for(k, 1), NV, DK, DV),
                  gdn_chunk_work_floats(T, gdn_chunk_for(k, T), NV, DK, DV));
}

namespace {

const std::vector<Bind> kScanBinds{Bind::ReadOnly, Bind::ReadWrite, Bind::ReadWrite, Bind::ReadWrite, Bind::Uniform};

// gdn_prep_staged on this adapter with this context's switch.
bool prep_staged(const OpContext& o, uint32_t C, uint32_t DK, uint32_t DV) {
  return gdn_prep_staged(o.opt.gdn_prep_stage, C, DK, DV, o.ctx.info().limits.maxComputeWorkgroupStorageSize);
}

const gpu::Pipeline& chunk_prep_pipe(OpContext& o, uint32_t C, uint32_t DK, uint32_t DV) {
  Defines d{{"C", std::to_string(C)}, {"STAGE", "0"}};
  if (prep_staged(o, C, DK, DV))
    d = {{"C", std::to_string(C)}, {"STAGE", "1"}, {"RK", std::to_string(DK + 1)},
         {"RQ", std::to_string(std::max(DK, DV) + 1)}};
  return get(o, "gdn_chunk_prep", d, {Bind::ReadOnly, Bind::ReadOnly, Bind::ReadWrite, Bind::Uniform});
}

// The scan's tile for chunk C and its pipeline (gdn_chunk_scan_tiled, or gdn_chunk_scan when the
// tile has no columns).
std::pair<GdnScanTile, const gpu::Pipeline*> chunk_scan_pipe(OpContext& o, uint32_t C, uint32_t DK) {
  const GdnScanTile t = gdn_scan_tile(C, DK, gdn_scan_cols_for(o), o.ctx.info().limits.maxComputeWorkgroupStorageSize,
                                      o.opt.gdn_scan_stage);
  if (!t.cols) return {t, &get(o, "gdn_chunk_scan", {}, kScanBinds)};
  const Defines ds{{"WG", std::to_string(t.threads)},       {"JB", std::to_string(t.cols)},
                   {"SDIM", std::to_string(DK * t.cols)},   {"UDIM", std::to_string(C * t.cols)},
                   {"CDIM", std::to_string(C)},             {"NP", std::to_string(ceil_div(C * t.cols, t.threads))},
                   {"STAGE", t.stage ? "1" : "0"},           {"PF", t.stage && o.opt.gdn_scan_prefetch ? "1" : "0"},
                   {"LQ", std::to_string(ceil_div(C * (DK / 4), t.threads))}};
  return {t, &get(o, "gdn_chunk_scan_tiled", ds, kScanBinds)};
}

}  // namespace

bool gdn_prep_staged(bool asked, uint32_t C, uint32_t DK, uint32_t DV, uint64_t workgroup_bytes) {
  const uint64_t bytes = 4ull * C * (DK + std::max(DK, DV) + 2) + 4ull * C * C + 8ull * C;
  return asked && DK % 4 == 0 && DV % 4 == 0 && bytes <= workgroup_bytes;
}

void gdn_compile_chunked(OpContext& o, uint32_t C, uint32_t DK, uint32_t DV) {
  chunk_prep_pipe(o, C, DK, DV);
  chunk_scan_pipe(o, C, DK);
}

void gdn_chunked(OpContext& o, const GdnOperands& a, const gpu::Buffer& work) {
  const uint32_t C = gdn_chunk_for(o.opt, a.T);
  const GdnParams prm = params(a, C);
  if (work.size() < 4 * gdn_chunk_work_floats(a.T, C, a.NV, a.DK, a.DV)) throw Error("gdn_chunked: work buffer too small");
  if (&work == &a.qkv || &work == &a.gates || &work == &a.state || &work == &a.out)
    throw Error("gdn_chunked: work must be a distinct buffer");
  const uint32_t nch = ceil_div(a.T, C);
  const uint64_t io = 4ull * a.T * (2 * a.NK * a.DK + a.NV * a.DV);
  const uint64_t wk = 4ull * gdn_chunk_work_floats(a.T, C, a.NV, a.DK, a.DV), sb = 4ull * a.NV * a.DK * a.DV;
  // The staged prep keeps A in workgroup memory: its C x C floats per chunk and head are not written.
  const uint64_t a_rows = prep_staged(o, C, a.DK, a.DV) ? 4ull * nch * a.NV * C * C : 0;
  o.rec.declare(TrafficBytes().r(Traffic::Activations, io + 8ull * a.T * a.NV).w(Traffic::Activations, wk - a_rows));
  o.rec.dispatch(chunk_prep_pipe(o, C, a.DK, a.DV), {a.qkv, a.gates, work}, prm, nch, a.NV, 1, "gdn_chunk_prep");
  o.rec.declare(TrafficBytes().r(Traffic::Activations, io + wk).r(Traffic::Recurrent, sb).w(Traffic::Recurrent, sb)
                    .w(Traffic::Activations, 4ull * a.T * a.NV * a.DV));
  const auto [t, scan] = chunk_scan_pipe(o, C, a.DK);
  o.rec.dispatch(*scan, {a.qkv, work, a.state, a.out}, prm, t.cols ? ceil_div(a.DV, t.cols) : ceil_div(a.DV, 64), a.NV, 1,
                 "gdn_chunk_scan");
}

uint32_t gdn_scan_cols_for(const OpContext& o) {
  return o.opt.gdn_scan_cols != kGdnScanColsAuto ? o.opt.gdn_scan_cols : o.ctx.info().is_software() ? 0 : 8;
}

uint64_t gdn_scan_stage_bytes(uint32_t C, uint32_t DK) { return 2ull * C * (DK / 4 + 1) * 16; }

GdnScanTile gdn_scan_tile(uint32_t C, uint32_t DK, uint32_t cols, uint64_t workgroup_bytes, bool stage) {
  if (!cols) return {};
  // S tile (DK x cols), U (C x cols), e^{G_t} and exp(G_last - G_s) (C each), f32.
  auto bytes = [&](uint64_t jb) { return 4 * (uint64_t(DK) * jb + uint64_t(C) * jb + 2ull * C); };
  while (cols > 1 && bytes(cols) > workgroup_bytes) cols /= 2;
  if (bytes(cols) > workgroup_bytes) return {};
  // One thread per (token, column) pair of a chunk, 64..256 threads in multiples of 64.
  const uint32_t threads = std::clamp<uint32_t>(ceil_div(C * cols, 64) * 64, 64, 256);
  return {cols, threads, stage && DK % 4 == 0 && bytes(cols) + gdn_scan_stage_bytes(C, DK) <= workgroup_bytes};
}

std::vector<ParamsLayout> gdn_ops_params_layouts() {
  return {WGLLM_LAYOUT(HeadNormParams, "head_norm"),
          WGLLM_LAYOUT(QkNormRopeKvParams, "qk_norm_rope_kv"),
          WGLLM_LAYOUT(GatedRmsnormParams, "gated_rmsnorm"),
          WGLLM_LAYOUT(SigmoidGateParams, "sigmoid_gate"),
          WGLLM_LAYOUT(GatesParams, "gdn_gates"),
          WGLLM_LAYOUT(GdnParams, "gdn_step", {{"NORM", "0"}}),
          WGLLM_LAYOUT(GdnParams, "gdn_step", {{"NORM", "1"}}),
          WGLLM_LAYOUT(GdnParams, "gdn_chunk_prep"),
          WGLLM_LAYOUT(GdnParams, "gdn_chunk_scan"),
          WGLLM_LAYOUT(GdnParams, "gdn_chunk_scan_tiled"),
          WGLLM_LAYOUT(DecodePrepParams, "gdn_decode_prep"),
          WGLLM_LAYOUT(DecodeParams, "gdn_decode")};
}

}  // namespace wgllm::kernels
