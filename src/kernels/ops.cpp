#include "kernels/ops.h"

#include "core/error.h"

#include <algorithm>
#include <numeric>
#include <span>
#include <string>
#include <vector>
#include "kernels/matmul_tiled.h"
#include "kernels/params_layout.h"
#include "kernels/sparse_attention.h"
#include "kernels/wgsl.h"

namespace wgllm::kernels {
namespace {

using gpu::Bind;

const gpu::Pipeline& get(OpContext& o, const std::string& name, const Defines& defs,
                         std::vector<Bind> binds) {
  return o.pipelines.get(variant_key(name, defs), [&] {
    return gpu::KernelSpec{"", specialize(name, defs), std::move(binds)};
  });
}

// get() behind PipelineCache::memo: `make` builds the defines and calls get() on the first use of
// the signature `sig`, which must hold every input of those defines.
template <class F>
const gpu::Pipeline& memoized(OpContext& o, const gpu::PipelineCache::Signature& sig, F&& make) {
  if (const gpu::Pipeline* p = o.pipelines.memo(sig)) return *p;
  const gpu::Pipeline& p = make();
  o.pipelines.set_memo(sig, p);
  return p;
}

uint32_t ceil_div(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

Defines weight_defines(const OpContext& o, const GpuWeight& W) {
  return {{wformat_define(W.fmt), "1"}, {"BE", std::to_string(W.block)}, {"BE16", W.block == 16 ? "1" : "0"},
          {"BE32", W.block == 32 ? "1" : "0"}, {"MAGIC", o.opt.dequant_magic ? "1" : "0"}};
}

// The uniforms of this file's kernels (each matches its WGSL `struct P`: kernels/params_layout.h,
// ops_params_layouts() at the end). MatmulParams is beside matmul_params().
struct RopeKvParams { uint32_t T, Hq, HD, rot, pos0, q_off, q_stride, k_off, v_off, kv_stride, kv_dim, table_pairs, tab_off; };
WGLLM_PARAMS(RopeKvParams, T, Hq, HD, rot, pos0, q_off, q_stride, k_off, v_off, kv_stride, kv_dim, table_pairs, tab_off);
struct EmbedParams { uint32_t K, N, T, nb, soff, y_off, row0; };
WGLLM_PARAMS(EmbedParams, K, N, T, nb, soff, y_off, row0);
struct RmsnormParams { uint32_t D; float eps; uint32_t x_off, y_off, x_stride, y_stride; };
WGLLM_PARAMS(RmsnormParams, D, eps, x_off, y_off, x_stride, y_stride);
struct RopeParams { uint32_t T, H, HD, rot, pos0, off, stride, table_pairs; };
WGLLM_PARAMS(RopeParams, T, H, HD, rot, pos0, off, stride, table_pairs);
struct KvStoreParams { uint32_t T, kv_dim, pos0, k_off, v_off, stride; };
WGLLM_PARAMS(KvStoreParams, T, kv_dim, pos0, k_off, v_off, stride);
struct CombineParams { uint32_t T, Hq, HD, n_split, o_off, o_stride, tab_off; };
WGLLM_PARAMS(CombineParams, T, Hq, HD, n_split, o_off, o_stride, tab_off);
// attention, attention_tiled.
struct AttentionParams {
  uint32_t T, pos0, Hq, Hkv, HD, q_off, q_stride, o_off, o_stride, kv_dim;
  float scale;
  uint32_t split_len, n_split, window, pad0, pad1;
};
WGLLM_PARAMS(AttentionParams, T, pos0, Hq, Hkv, HD, q_off, q_stride, o_off, o_stride, kv_dim, scale, split_len, n_split,
             window, pad0, pad1);
// attention_decode (tab_off: MULTI's table entries).
struct DecodeParams {
  uint32_t T, pos0, Hq, Hkv, HD, q_off, q_stride, o_off, o_stride, kv_dim;
  float scale;
  uint32_t split_len, n_split, window, tab_off, pad0;
  uint32_t k_off = 0, v_off = 0, rot = 0, table_pairs = 0;  // QKN only
  float eps = 0;
  uint32_t pad1 = 0, pad2 = 0, pad3 = 0;
};
WGLLM_PARAMS(DecodeParams, T, pos0, Hq, Hkv, HD, q_off, q_stride, o_off, o_stride, kv_dim, scale, split_len, n_split,
             window, tab_off, pad0, k_off, v_off, rot, table_pairs, eps, pad1, pad2, pad3);
struct FlashParams {
  uint32_t T, pos0, Hq, Hkv, HD, q_off, q_stride, o_off, o_stride, kv_dim;
  float scale;
  uint32_t split_len, n_split, window, pad0, pad1;
};
WGLLM_PARAMS(FlashParams, T, pos0, Hq, Hkv, HD, q_off, q_stride, o_off, o_stride, kv_dim, scale, split_len, n_split, window,
             pad0, pad1);
// silu_mul, gelu_mul.
struct GluParams { uint32_t T, F, g_off, u_off, in_stride, y_off; };
WGLLM_PARAMS(GluParams, T, F, g_off, u_off, in_stride, y_off);
struct AddBiasParams { uint32_t T, N, y_off, stride; };
WGLLM_PARAMS(AddBiasParams, T, N, y_off, stride);
struct ScaleParams { uint32_t n, off; float s; };
WGLLM_PARAMS(ScaleParams, n, off, s);
struct ArgmaxParams { uint32_t n, off, chunk, groups; };
WGLLM_PARAMS(ArgmaxParams, n, off, chunk, groups);
struct CausalConvParams { uint32_t T, C, L, x_off, x_stride, gi_off, gi_stride, go_off, go_stride, s_off, y_off, y_stride; };
WGLLM_PARAMS(CausalConvParams, T, C, L, x_off, x_stride, gi_off, gi_stride, go_off, go_stride, s_off, y_off, y_stride);

}  // namespace

namespace {
enum class Prologue { None, Norm, Silu, Gate, Combine };  // the activation load of matmul_impl

constexpr uint32_t kSplitMax = 32;  // at most this many key splits per attention row (combine: matmul_io.wgsl CS)

// What matmul.wgsl and matvec.wgsl share: the fused variants' defines (NORM / SILU prologue, ROPE
// epilogue) and bindings after each kernel's own first bindings, then the parameter block, whose
// layout (struct P in both WGSL files) is MatmulParams.
void add_fused_variant(Defines& d, std::vector<Bind>& binds, Prologue pro, const QkvRopeKv* rope,
                       const ConvIn* conv = nullptr) {
  d["NORM"] = pro == Prologue::Norm ? "1" : "0";
  d["SILU"] = pro == Prologue::Silu ? "1" : "0";
  d["ROPE"] = rope ? "1" : "0";
  d["NEOX"] = rope && rope->neox ? "1" : "0";
  d["GATE"] = pro == Prologue::Gate ? "1" : "0";
  d["BIAS"] = rope && rope->bias ? "1" : "0";
  d["COMBINE"] = pro == Prologue::Combine ? "1" : "0";
  d["CONV"] = conv ? "1" : "0";
  if (pro == Prologue::Norm) {
    d["B_NW"] = std::to_string(binds.size());
    binds.push_back(Bind::ReadOnly);
  }
  if (pro == Prologue::Gate) {  // matmul_gate: the gate rows (passed in matmul_impl's norm_w slot)
    d["B_G"] = std::to_string(binds.size());
    binds.push_back(Bind::ReadOnly);
  }
  if (rope) {
    d["B_CS"] = std::to_string(binds.size());
    d["B_KC"] = std::to_string(binds.size() + 1);
    d["B_VC"] = std::to_string(binds.size() + 2);
    binds.insert(binds.end(), {Bind::ReadOnly, Bind::ReadWrite, Bind::ReadWrite});
    if (rope->bias) {
      d["B_B"] = std::to_string(binds.size());
      binds.push_back(Bind::ReadOnly);
    }
  }
  if (conv) {
    d["B_CW"] = std::to_string(binds.size());
    d["B_ST"] = std::to_string(binds.size() + 1);
    binds.insert(binds.end(), {Bind::ReadOnly, Bind::ReadWrite});
  }
  d["B_P"] = std::to_string(binds.size());
  binds.push_back(Bind::Uniform);
}

// The storage bindings of a matmul / matvec dispatch: the kernel's own, then those
// add_fused_variant() numbered (the norm weights or the gate, the RoPE table, the caches, the bias).
std::vector<gpu::Binding> fused_bindings(std::vector<gpu::Binding> own, Prologue pro, const gpu::Buffer* norm_w,
                                         const QkvRopeKv* rope, const ConvIn* conv = nullptr) {
  std::vector<gpu::Binding> b = std::move(own);
  if (pro == Prologue::Norm || pro == Prologue::Gate) b.emplace_back(*norm_w);
  if (rope) {
    b.insert(b.end(), {gpu::Binding(*rope->table), rope->kc, rope->vc});
    if (rope->bias) b.emplace_back(*rope->bias);
  }
  if (conv) b.insert(b.end(), {gpu::Binding(*conv->weight), conv->state});
  return b;
}

struct MatmulParams {
  uint32_t K, N, T, nb, soff, x_off, x_stride, y_off, y_stride;
  float eps;
  uint32_t u_off, pos0, q_rows, kv_rows, hd, rot, table_pairs, row0, n_split;
  uint32_t conv_c = 0, conv_l = 0, conv_s_off = 0, n2 = 0, soff2 = 0;  // n2, soff2: matvec.wgsl P2's second part
};
WGLLM_PARAMS(MatmulParams, K, N, T, nb, soff, x_off, x_stride, y_off, y_stride, eps, u_off, pos0, q_rows, kv_rows, hd,
             rot, table_pairs, row0, n_split, conv_c, conv_l, conv_s_off, n2, soff2);
MatmulParams matmul_params(const GpuWeight& W, F32Ref x, uint32_t x_stride, F32Ref y, uint32_t y_stride, uint32_t T,
                           float eps, uint32_t u_off, const QkvRopeKv* rope) {
  return {W.K, W.N, T, W.K / W.block, W.soff, x.off, x_stride, y.off, y_stride, eps, u_off,
          rope ? rope->pos0 : 0, rope ? rope->q_rows : 0, rope ? rope->kv_rows : 0, rope ? rope->HD : 0,
          rope ? rope->rot : 0, rope ? rope->rot / 2 : 0, rope ? rope->row0 : 0, 0};
}

// The traffic of one matmul/matvec dispatch (same bytes for both kernels).
gpu::TrafficBytes matmul_traffic(const GpuWeight& W, uint32_t T, bool accumulate, gpu::Traffic y_kind, Prologue pro,
                                 const QkvRopeKv* rope, const ConvIn* conv = nullptr) {
  gpu::TrafficBytes tb;
  tb.r(gpu::Traffic::Weights, W.bytes());
  if (pro != Prologue::Combine)  // (combine: matmul_combine declares the partials it reads)
    tb.r(gpu::Traffic::Activations, uint64_t(T) * W.K * 4 * (pro == Prologue::Silu || pro == Prologue::Gate ? 2 : 1));
  if (pro == Prologue::Norm) tb.r(gpu::Traffic::Weights, uint64_t(W.K) * 4);
  // (conv: y holds C channels, not N rows; the conv weights and the state read, the state written)
  tb.w(y_kind, uint64_t(T) * (conv ? conv->C : W.N) * 4);
  if (accumulate) tb.r(y_kind, uint64_t(T) * W.N * 4);
  if (conv) {
    const uint64_t state = 4ull * conv->C * (conv->L - 1);
    tb.r(gpu::Traffic::Weights, 4ull * conv->C * conv->L).r(gpu::Traffic::Recurrent, state).w(gpu::Traffic::Recurrent, state);
  }
  if (rope) {  // the table rows of its rotated pairs, its bias rows, its cache rows (k and v rows of W)
    const uint32_t r0 = rope->row0, r1 = r0 + W.N;
    if (r0 < rope->q_rows + rope->kv_rows) tb.r(gpu::Traffic::Weights, 4ull * T * rope->rot);
    if (r1 > rope->q_rows) tb.w(gpu::Traffic::KvCache, 4ull * T * (r1 - std::max(r0, rope->q_rows)));
    if (rope->bias) tb.r(gpu::Traffic::Weights, 4ull * W.N);
  }
  return tb;
}

// I8: int8 activation blocks in workgroup memory (16 B per 16 elements + 8 B per block), sized
// to whole multiples of 64 blocks so that few variants exist.
uint32_t matvec_int8_blocks(const GpuWeight& W) { return (W.K / W.block + 63) / 64 * 64; }

// Workgroup bytes of an int8 matvec launch, an upper bound taken before the launch shape is chosen:
// the activation blocks (with P2, a second part of 16-element blocks: twice the block scales), the
// row sums `red` (ROWS x LANES floats = RPT per invocation, RPT <= 4) and rms_sum's slots.
uint64_t matvec_int8_bytes(const OpContext& o, const GpuWeight& W, bool p2) {
  const uint64_t blocks = matvec_int8_blocks(W);
  return blocks * W.block + blocks * 8 * (p2 ? 2 : 1) +
         uint64_t(o.ctx.info().limits.maxComputeInvocationsPerWorkgroup) * 4 * 4 + 1024;
}

// One matvec.wgsl dispatch (T <= kFusedMaxTokens; see matmul_impl for the arguments): one token
// per grid row, matvec_shape's rows per workgroup.
void matvec_impl(OpContext& o, const GpuWeight& W, F32Ref x, uint32_t x_stride, F32Ref y, uint32_t y_stride,
                 uint32_t T, bool accumulate, const char* label, gpu::Traffic y_kind, Prologue pro,
                 const gpu::Buffer* norm_w, float eps, uint32_t u_off, const QkvRopeKv* rope,
                 const AttentionPartials* parts = nullptr, const ConvIn* conv = nullptr, const GpuWeight* W2 = nullptr) {
  const bool vec4 = o.opt.vec4_activations && x.off % 4 == 0 && x_stride % 4 == 0 && W.block % 4 == 0 &&
                    u_off % 4 == 0 && pro != Prologue::Combine;
  const MatvecShape sh = matvec_shape(o, W, conv ? 3 : rope ? 2 : 1);
  const uint32_t rows = sh.rows, lanes = sh.lanes;
  const bool subgroup = sh.subgroup;
  const bool i8 = matvec_uses_int8(o, W);
  // Everything the defines and bindings below depend on (PipelineCache::memo).
  const gpu::PipelineCache::Signature sig{1,  // matvec
                                          uint32_t(W.fmt), W.block, o.opt.dequant_magic, rows, sh.rows_per_thread,
                                          lanes, subgroup, vec4, accumulate, i8, i8 ? matvec_int8_blocks(W) : 1u,
                                          i8 && o.opt.matvec_prefetch, uint32_t(pro), rope != nullptr,
                                          rope && rope->neox, rope && rope->bias,
                                          pro == Prologue::Combine ? W.K / parts->HD : 0u,
                                          pro == Prologue::Combine ? W.K : 0u, conv != nullptr, W2 != nullptr};
  const gpu::Pipeline& p = memoized(o, sig, [&]() -> const gpu::Pipeline& {
    Defines d = weight_defines(o, W);
    d["ROWS"] = std::to_string(rows);
    d["RPT"] = std::to_string(sh.rows_per_thread);
    d["R2"] = sh.rows_per_thread >= 2 ? "1" : "0";
    d["R4"] = sh.rows_per_thread == 4 ? "1" : "0";
    d["LANES"] = std::to_string(lanes);
    d["SUBGROUP"] = subgroup ? "1" : "0";
    d["VEC4"] = vec4 ? "1" : "0";
    d["ADD"] = accumulate ? "1" : "0";
    d["I8"] = i8 ? "1" : "0";
    d["XBLK"] = i8 ? std::to_string(matvec_int8_blocks(W)) : "1";
    d["PF"] = i8 && o.opt.matvec_prefetch ? "1" : "0";  // --matvec-prefetch: the I8 path only
    std::vector<Bind> binds{Bind::ReadOnly, Bind::ReadOnly, Bind::ReadWrite, Bind::ReadOnly};
    d["B_W4"] = "3";
    d["P2"] = W2 ? "1" : "0";
    if (W2) {
      d["B_W2"] = "4";
      binds.push_back(Bind::ReadOnly);
    }
    add_fused_variant(d, binds, pro, rope, conv);
    if (pro == Prologue::Combine) {
      d["CH"] = std::to_string(W.K / parts->HD);
      d["CS"] = std::to_string(kSplitMax);
      d["CK"] = std::to_string(W.K);
    }
    return get(o, "matvec", d, binds);
  });
  MatmulParams prm = matmul_params(W, x, x_stride, y, y_stride, T, eps, u_off, rope);
  gpu::TrafficBytes tb = matmul_traffic(W, T, accumulate, y_kind, pro, rope, conv);
  if (conv) prm.conv_c = conv->C, prm.conv_l = conv->L, prm.conv_s_off = conv->state_off;
  if (pro == Prologue::Combine) {  // every (token, head, split) record of the partials
    prm.hd = parts->HD, prm.n_split = parts->n_split;
    tb.r(gpu::Traffic::Activations, 4ull * T * x_stride);
  }
  uint32_t gx = ceil_div(W.N, rows);
  if (W2) {  // its weights, its rows written and their cache rows; the activations are read once
    QkvRopeKv r2 = *rope;
    r2.row0 += W.N;
    gpu::TrafficBytes t2 = matmul_traffic(*W2, T, accumulate, y_kind, Prologue::None, &r2);
    t2.read[size_t(gpu::Traffic::Activations)] = 0;
    tb += t2;
    prm.n2 = W2->N, prm.soff2 = W2->soff;
    gx += ceil_div(W2->N, rows);
  }
  o.rec.declare(tb);
  std::vector<gpu::Binding> own{W.buf, x.buf, y.buf, W.buf};
  if (W2) own.emplace_back(W2->buf);
  o.rec.dispatch(p, fused_bindings(own, pro, norm_w, rope, conv), prm, gx, T, 1, label);
}

// One matmul dispatch; `norm_w`/`eps` for Prologue::Norm, `u_off` (elements after x's row start)
// for Prologue::Silu.
void matmul_impl(OpContext& o, const GpuWeight& W, F32Ref x, uint32_t x_stride, F32Ref y, uint32_t y_stride,
                 uint32_t T, bool accumulate, const char* label, gpu::Traffic y_kind, Prologue pro,
                 const gpu::Buffer* norm_w, float eps, uint32_t u_off, const QkvRopeKv* rope = nullptr) {
  if (T <= matvec_max_tokens(o) && (pro == Prologue::None || T <= kFusedMaxTokens))
    return matvec_impl(o, W, x, x_stride, y, y_stride, T, accumulate, label, y_kind, pro, norm_w, eps, u_off, rope);
  const uint32_t tt = T > 1 ? std::max<uint32_t>(1, o.opt.prefill_tokens_per_workgroup) : 1;
  const bool vec4 = o.opt.vec4_activations && x.off % 4 == 0 && x_stride % 4 == 0 && W.block % 4 == 0 &&
                    u_off % 4 == 0;
  const bool sw = o.ctx.info().is_software();
  uint32_t rows = o.opt.matmul_rows_per_workgroup ? o.opt.matmul_rows_per_workgroup : (sw ? 64 : 4);
  const uint32_t lanes = o.opt.matmul_lanes_per_row ? o.opt.matmul_lanes_per_row : (sw ? 1 : 32);
  if (rope) rows += rows & 1;  // both rows of a rotation pair in one workgroup (per-row sums unchanged)
  if (lanes & (lanes - 1)) throw Error("matmul lanes per row must be a power of two");
  if (rows * lanes > o.ctx.info().limits.maxComputeInvocationsPerWorkgroup)
    throw Error("matmul rows x lanes exceeds maxComputeInvocationsPerWorkgroup");
  Defines d = weight_defines(o, W);
  d["ROWS"] = std::to_string(rows);
  d["LANES"] = std::to_string(lanes);
  d["REDUCE"] = lanes > 1 ? "1" : "0";
  d["TT"] = std::to_string(tt);
  d["VEC4"] = vec4 ? "1" : "0";
  d["ADD"] = accumulate ? "1" : "0";
  std::vector<Bind> binds{Bind::ReadOnly, Bind::ReadOnly, Bind::ReadWrite};
  add_fused_variant(d, binds, pro, rope);
  const auto& p = get(o, "matmul", d, binds);
  const MatmulParams prm = matmul_params(W, x, x_stride, y, y_stride, T, eps, u_off, rope);
  o.rec.declare(matmul_traffic(W, T, accumulate, y_kind, pro, rope));
  const uint32_t gx = ceil_div(W.N, rows), gy = ceil_div(T, tt);
  o.rec.dispatch(p, fused_bindings({W.buf, x.buf, y.buf}, pro, norm_w, rope), prm, gx, gy, 1, label);
}
}  // namespace

bool matvec_uses_int8(const OpContext& o, const GpuWeight& W) {
  return on_for_gpus(o, o.opt.matvec_int8) && W.fmt != WFormat::F32 &&
         matvec_int8_bytes(o, W, false) <= o.ctx.info().limits.maxComputeWorkgroupStorageSize;
}

namespace {
// matvec_shape() without its two launch-fit errors: `why` gets the first one that applies (empty when
// the launch fits). Invalid settings still throw.
MatvecShape matvec_shape_fit(const OpContext& o, const GpuWeight& W, uint32_t tuple, std::string& why) {
  const bool sw = o.ctx.info().is_software();
  const uint32_t N = W.N, nb = W.K / W.block;
  // By shape on hardware adapters (H200 sweep and decode A/B, bench/results/2026-12-02-h200-matvec/):
  // rows of many blocks get more lanes (128 from 192 blocks, 64 from 48: K = 8192 / 1536 at 32 per
  // block), 128 threads per workgroup (256 with 128 lanes); tall matrices 4 rows per thread (2 from
  // 1024 rows, 1 below), so that one activation block load serves 4 weight rows; output heads
  // (>= 32768 rows) 16 rows of 4 on 32 lanes. Software adapters: 8 rows of 1 on 8 lanes.
  // With int8 activations (matvec_uses_int8) the workgroup quantizes the whole activation vector
  // before its rows, so more rows share it (H200 `bench matvec` with long bursts,
  // bench/results/2026-12-02-h200-int8/: K = 2048 x 16384 rows 1456 -> 1892 GB/s at 32 rows
  // of 4 on 32 lanes; 6144 rows 949 -> 1013 at 32 of 4 on 64 lanes; K = 8192 1072 -> 1117 at 16 of
  // 4 on 128 lanes).
  const bool head = N >= 32768, i8 = !sw && matvec_uses_int8(o, W);
  // The lanes of three matrix classes (not output heads), each its own switch: --matvec-lanes-wide (rows
  // of >= 192 blocks: the down projections; as --matvec-rows-wide's class), --matvec-lanes-tall (>= 8192
  // rows of fewer blocks: the fused gate+up; as --matvec-rows-tall's), --matvec-lanes-short (the rest:
  // attention projections, small models' FFNs). Only the tall class has a default of its own: 16 lanes
  // where 32 would get a row's blocks unevenly and 16 evenly (48 blocks of Qwen2.5-1.5B's K = 1536: half
  // of 32 lanes would do two blocks, half one); H100, bench/results/2026-12-06-h100-matvec-lanes-peers/:
  // `bench matvec` 17920 x 1536 Q4_K 12.6 -> 11.2 us, the model's decode step -6.5%.
  // The matrix class, shared by the lanes here and the rows per workgroup below.
  enum class Class { Head, Wide, Tall, Short };
  const Class cls = head ? Class::Head : nb >= 192 ? Class::Wide : N >= 8192 ? Class::Tall : Class::Short;
  const uint32_t class_lanes = cls == Class::Wide    ? o.opt.matvec_lanes_wide
                               : cls == Class::Short ? o.opt.matvec_lanes_short
                               : cls == Class::Head  ? 0u
                               : o.opt.matvec_lanes_tall                       ? o.opt.matvec_lanes_tall
                               : !sw && i8 && nb % 16 == 0 && (nb / 16) % 2 == 1 ? 16u
                                                                               : 0u;
  MatvecShape sh;
  sh.lanes = o.opt.matvec_lanes ? o.opt.matvec_lanes
             : class_lanes       ? class_lanes
             : sw                ? 8
             : head              ? 32
             : nb >= 192         ? 128
             : i8                ? (N >= 8192 ? 32 : 64)
             : nb >= 48          ? 64
                                 : 32;
  if (sh.lanes & (sh.lanes - 1)) throw Error("matvec: lanes (" + std::to_string(sh.lanes) + ") must be a power of two");
  // (In the browser the sizes are the adapter's reported ones: gpu/web/context_web.cpp.)
  if (o.opt.matvec_subgroup_ops && o.ctx.has_subgroups()) {
    const auto [lo, hi] = o.ctx.measured_subgroup_sizes();
    // subgroupAdd must never span two row groups: every subgroup size must divide LANES.
    // (A class's own lanes stay below the subgroup size, reduced by the tree.)
    const bool keep = !o.opt.matvec_lanes && class_lanes && class_lanes < hi;
    if (lo > 0 && (lo & (lo - 1)) == 0 && (hi & (hi - 1)) == 0 && hi <= 256 && !keep) {
      sh.lanes = std::max(sh.lanes, hi);
      sh.subgroup = true;
    }
  }
  uint32_t rpt = o.opt.matvec_rows_per_thread;
  if (!rpt) rpt = sw ? 1 : (N >= 2048 ? 4 : N >= 1024 ? 2 : 1);
  if (rpt != 1 && rpt != 2 && rpt != 4)
    throw Error("matvec: rows per thread must be 1, 2 or 4 (got " + std::to_string(rpt) + ")");
  // The first RPT lanes of a row group store its RPT sums (matvec.wgsl): never more rows than lanes (a
  // class's 1 or 2 lanes bring a set or default 4 down; each row keeps its sums, so this changes no bits).
  rpt = std::min(rpt, sh.lanes);
  const uint32_t threads = i8 && !head ? (sh.lanes >= 128 ? 512 : sh.lanes * 8) : (sh.lanes >= 128 ? 256 : 128);
  const uint32_t groups = std::max<uint32_t>(1, threads / sh.lanes);
  // By matrix class (--matvec-rows-wide: rows of >= 192 blocks, the down projections, 16 on hardware
  // adapters by default: H100 `bench ab`, bench/results/2026-12-06-h100-q6k-rows-peers/, Qwen2.5-1.5B
  // step -1.5%, LFM2-1.2B / Qwen3.5-0.8B / SmolLM2 no detectable difference; --matvec-rows-tall:
  // 8192 .. 32767 rows, the fused gate+up, when set; not output heads), below --matvec-rows.
  const uint32_t wide = o.opt.matvec_rows_wide ? o.opt.matvec_rows_wide : sw ? 0u : 16u;
  // Tall matrices of short rows (K < 2048 elements, < 64 blocks of 32) with int8 activations: 16 rows
  // by default (H100 `bench ab`, switch record matvec_rows_class: Qwen2.5-1.5B's gate+up (K = 1536)
  // step -1.3%, Qwen3.5-0.8B's Gated DeltaNet in-projection (K = 1024) no detectable difference;
  // LFM2-1.2B's gate+up (K = 2048) was 3.5% slower at 16 and keeps the rule's 32).
  const uint32_t tall = o.opt.matvec_rows_tall ? o.opt.matvec_rows_tall : !sw && i8 && W.K < 2048 ? 16u : 0u;
  const uint32_t by_class = cls == Class::Wide ? wide : cls == Class::Tall ? tall : 0;
  uint32_t rows = o.opt.matvec_rows_per_workgroup ? o.opt.matvec_rows_per_workgroup
                  : by_class                      ? by_class
                  : sw                            ? 8
                                                  : groups * rpt;
  if (tuple != 1 && tuple != 2 && tuple != 3) throw Error("matvec: rows are kept together in 1, 2 or 3");
  // Whole row groups and whole tuples (rotation pairs, conv triples): a multiple of lcm(tuple, rpt)
  // (every setting combination is valid).
  const uint32_t step = std::lcm(tuple, rpt);
  rows = ceil_div(rows, step) * step;
  // Shrink to the adapter's workgroup size (wide subgroups or lanes), keeping whole row groups and
  // tuples.
  const uint32_t max_threads = o.ctx.info().limits.maxComputeInvocationsPerWorkgroup;
  while (rows > step && rows / rpt * sh.lanes > max_threads) rows -= step;
  if (rows / rpt * sh.lanes > max_threads)
    why = "matvec: " + std::to_string(rows / rpt) + " row groups x " + std::to_string(sh.lanes) +
          " lanes exceeds maxComputeInvocationsPerWorkgroup";
  else if (ceil_div(N, rows) > o.ctx.info().limits.maxComputeWorkgroupsPerDimension)
    why = "matvec: " + std::to_string(N) + " rows in workgroups of " + std::to_string(rows) +
          " exceed maxComputeWorkgroupsPerDimension";
  sh.rows = rows;
  sh.rows_per_thread = rpt;
  return sh;
}
}  // namespace

MatvecShape matvec_shape(const OpContext& o, const GpuWeight& W, uint32_t tuple) {
  std::string why;
  const MatvecShape sh = matvec_shape_fit(o, W, tuple, why);
  if (!why.empty()) throw Error(why);
  return sh;
}

bool matvec_enabled(const OpContext& o) {
  return on_for_gpus(o, o.opt.matvec_subgroup);
}

// The largest forward that takes matvec.wgsl (--matvec-max-tokens; the decode fusions stay at
// kFusedMaxTokens).
uint32_t matvec_max_tokens(const OpContext& o) {
  return matvec_enabled(o) ? std::max(kFusedMaxTokens, o.opt.matvec_max_tokens) : 0;
}

void matmul(OpContext& o, const GpuWeight& W, F32Ref x, uint32_t x_stride, F32Ref y,
            uint32_t y_stride, uint32_t T, bool accumulate, const char* label, gpu::Traffic y_kind) {
  if (matmul_tiled_enabled(o) && T > std::max(kMatmulTiledMinTokens, matvec_max_tokens(o)) && matmul_tiled_supported(W, x, x_stride))
    return matmul_tiled(o, W, x, x_stride, y, y_stride, T, accumulate, label, y_kind);
  matmul_impl(o, W, x, x_stride, y, y_stride, T, accumulate, label, y_kind, Prologue::None, nullptr, 0.0f, 0);
}

void matmul_norm(OpContext& o, const GpuWeight& W, F32Ref x, uint32_t x_stride, const gpu::Buffer& norm_w, float eps,
                 F32Ref y, uint32_t y_stride, uint32_t T, bool accumulate, const char* label, gpu::Traffic y_kind) {
  if (T > kFusedMaxTokens) throw Error("matmul_norm: at most " + std::to_string(kFusedMaxTokens) + " tokens");
  matmul_impl(o, W, x, x_stride, y, y_stride, T, accumulate, label, y_kind, Prologue::Norm, &norm_w, eps, 0);
}

void matmul_gate(OpContext& o, const GpuWeight& W, F32Ref x, uint32_t x_stride, const gpu::Buffer& g, uint32_t g_off,
                 F32Ref y, uint32_t y_stride, uint32_t T, bool accumulate, const char* label) {
  if (T > kFusedMaxTokens) throw Error("matmul_gate: at most " + std::to_string(kFusedMaxTokens) + " tokens");
  if (&g == &x.buf || &g == &y.buf) throw Error("matmul_gate: the gate buffer must not alias x or y");
  matmul_impl(o, W, x, x_stride, y, y_stride, T, accumulate, label, gpu::Traffic::Activations, Prologue::Gate, &g, 0.0f,
              g_off);
}

void matmul_silu(OpContext& o, const GpuWeight& W, const gpu::Buffer& src, uint32_t g_off, uint32_t u_off,
                 uint32_t in_stride, F32Ref y, uint32_t y_stride, uint32_t T, bool accumulate, const char* label) {
  if (T > kFusedMaxTokens) throw Error("matmul_silu: at most " + std::to_string(kFusedMaxTokens) + " tokens");
  if (u_off < g_off) throw Error("matmul_silu: the up rows must follow the gate rows (u_off >= g_off)");
  matmul_impl(o, W, {src, g_off}, in_stride, y, y_stride, T, accumulate, label, gpu::Traffic::Activations,
              Prologue::Silu, nullptr, 0.0f, u_off - g_off);
}

namespace {
void check_qkv_rope_kv(const char* who, uint32_t T, uint32_t rows, const QkvRopeKv& r) {
  if (T > kFusedMaxTokens) throw Error(std::string(who) + ": at most " + std::to_string(kFusedMaxTokens) + " tokens");
  if (r.rot % 2 || r.rot > r.HD || r.HD % 2 || r.q_rows % r.HD || r.kv_rows % r.HD || r.row0 % r.HD || rows % r.HD ||
      uint64_t(r.row0) + rows > uint64_t(r.q_rows) + 2ull * r.kv_rows)
    throw Error(std::string(who) +
                ": rows must be whole heads of [q | k | v] of an even head_dim, rotary dims even and <= head_dim");
  if (!r.table || !r.kc.buf || !r.vc.buf) throw Error(std::string(who) + ": table and caches are required");
}
}  // namespace

void matmul_qkv_rope_kv(OpContext& o, const GpuWeight& W, F32Ref x, uint32_t x_stride, const gpu::Buffer* norm_w, float eps,
                        F32Ref y, uint32_t y_stride, uint32_t T, const QkvRopeKv& r, const char* label) {
  check_qkv_rope_kv("matmul_qkv_rope_kv", T, W.N, r);
  matmul_impl(o, W, x, x_stride, y, y_stride, T, false, label, gpu::Traffic::Activations,
              norm_w ? Prologue::Norm : Prologue::None, norm_w, eps, 0, &r);
}

bool matmul_qkv_formats_applies(const OpContext& o, const GpuWeight& W1, const GpuWeight& W2, uint32_t T) {
  if (!o.opt.fuse_qkv_formats || T > kFusedMaxTokens || T > matvec_max_tokens(o) || o.opt.matvec_prefetch) return false;
  // Its storage bindings at most: w, x, y, w4, the second part, the norm weights, the RoPE table, both
  // caches, the biases (WebGPU's default limit is 8; the per-part launches need one fewer).
  if (o.ctx.info().limits.maxStorageBuffersPerShaderStage < 10) return false;
  if (W1.block != 32 || W2.fmt != WFormat::Q8_F32 || W1.K != W2.K || W2.soff % 4) return false;
  if (!matvec_uses_int8(o, W1) || !matvec_uses_int8(o, W2) ||
      matvec_int8_bytes(o, W1, true) > o.ctx.info().limits.maxComputeWorkgroupStorageSize)
    return false;
  // Each part's rows keep the order of its own launch: the same lanes and reduction (matvec.wgsl
  // header); both launch shapes must fit.
  std::string why1, why2;
  const MatvecShape a = matvec_shape_fit(o, W1, 2, why1), b = matvec_shape_fit(o, W2, 2, why2);
  return why1.empty() && why2.empty() && a.lanes == b.lanes && a.subgroup == b.subgroup &&
         uint64_t(ceil_div(W1.N, a.rows)) + ceil_div(W2.N, a.rows) <= o.ctx.info().limits.maxComputeWorkgroupsPerDimension;
}

void matmul_qkv_rope_kv(OpContext& o, const GpuWeight& W1, const GpuWeight& W2, F32Ref x, uint32_t x_stride,
                        const gpu::Buffer* norm_w, float eps, F32Ref y, uint32_t y_stride, uint32_t T, const QkvRopeKv& r,
                        const char* label) {
  check_qkv_rope_kv("matmul_qkv_rope_kv (two parts)", T, W1.N + W2.N, r);
  if (W1.N % r.HD) throw Error("matmul_qkv_rope_kv (two parts): the first part must be whole heads");
  if (!matmul_qkv_formats_applies(o, W1, W2, T))
    throw Error("matmul_qkv_rope_kv (two parts): off (--fuse-qkv-formats), or the parts' types, launch shapes or "
                "int8 activations do not allow one launch");
  matvec_impl(o, W1, x, x_stride, y, y_stride, T, false, label, gpu::Traffic::Activations,
              norm_w ? Prologue::Norm : Prologue::None, norm_w, eps, 0, &r, nullptr, nullptr, &W2);
}

bool matmul_conv_in_applies(const OpContext& o, const GpuWeight& W, uint32_t T) {
  if (!o.opt.fuse_conv_in || T != 1 || !matvec_enabled(o) || T > matvec_max_tokens(o) || W.N % 3) return false;
  // The triples' launch must fit the adapter (e.g. not 3 row groups of 128 lanes under a
  // 256-invocation limit): asked without catching matvec_shape's error, since this file has no
  // landing pads in the browser build.
  std::string why;
  matvec_shape_fit(o, W, 3, why);
  return why.empty();
}

void matmul_conv_in(OpContext& o, const GpuWeight& W, F32Ref x, const gpu::Buffer* norm_w, float eps, F32Ref y,
                    const ConvIn& c, const char* label) {
  if (!matmul_conv_in_applies(o, W, 1))
    throw Error("matmul_conv_in: off (--fuse-conv-in), no matrix-vector kernel, or no triple-row shape for this matrix");
  if (W.N != 3 * c.C || c.L < 2 || !c.weight || !c.state.buf)
    throw Error("matmul_conv_in: the projection must have 3 x C rows [B | C | x], a kernel of >= 2 taps, weights and state");
  matvec_impl(o, W, x, W.K, y, c.C, 1, false, label, gpu::Traffic::Activations, norm_w ? Prologue::Norm : Prologue::None,
              norm_w, eps, 0, nullptr, nullptr, &c);
}

namespace {
// rope_kv_store() (rows null: T tokens, src rows 0.., positions and cache rows pos0..) and
// rope_kv_store_rows() (rows: T table entries naming each token's src row, position and cache row).
void rope_kv(OpContext& o, const char* who, const gpu::Buffer& src, uint32_t q_off, uint32_t q_stride, uint32_t k_off,
             uint32_t v_off, uint32_t kv_stride, uint32_t T, uint32_t Hq, uint32_t Hkv, uint32_t HD, uint32_t rot,
             uint32_t pos0, const gpu::Buffer& table, bool neox, gpu::Binding kc, gpu::Binding vc, const gpu::Buffer* rows,
             uint32_t rows_off) {
  if (rot % 2 || rot > HD) throw Error(std::string(who) + ": rotary dims must be even and <= head_dim");
  if (!T) return;
  std::vector<Bind> binds{Bind::ReadWrite, Bind::ReadOnly, Bind::ReadWrite, Bind::ReadWrite};
  if (rows) binds.push_back(Bind::ReadOnly);
  binds.push_back(Bind::Uniform);
  const auto& p = get(o, "rope_kv", {{"NEOX", neox ? "1" : "0"}, {"ROWS", rows ? "1" : "0"}}, binds);
  const uint32_t kv_dim = Hkv * HD;
  RopeKvParams prm{T, Hq, HD, rot, pos0, q_off, q_stride, k_off, v_off, kv_stride, kv_dim, rot / 2, rows_off};
  o.rec.declare(gpu::TrafficBytes()
                    .r(gpu::Traffic::Activations, 4ull * T * (Hq * rot + 2 * kv_dim + (rows ? 4 : 0)))
                    .r(gpu::Traffic::Weights, 4ull * T * rot)
                    .w(gpu::Traffic::Activations, 4ull * T * Hq * rot)
                    .w(gpu::Traffic::KvCache, 8ull * T * kv_dim));
  std::vector<gpu::Binding> bufs{src, table, kc, vc};
  if (rows) bufs.push_back(*rows);
  o.rec.dispatch(p, bufs, prm, ceil_div(Hq * (rot / 2) + 2 * kv_dim, 64), T, 1, "rope_kv_store");
}
}  // namespace

void rope_kv_store(OpContext& o, const gpu::Buffer& src, uint32_t q_off, uint32_t q_stride, uint32_t k_off, uint32_t v_off,
                   uint32_t kv_stride, uint32_t T, uint32_t Hq, uint32_t Hkv, uint32_t HD, uint32_t rot, uint32_t pos0,
                   const gpu::Buffer& table, bool neox, gpu::Binding kc, gpu::Binding vc) {
  rope_kv(o, "rope_kv_store", src, q_off, q_stride, k_off, v_off, kv_stride, T, Hq, Hkv, HD, rot, pos0, table, neox, kc, vc,
          nullptr, 0);
}

void rope_kv_store_rows(OpContext& o, const gpu::Buffer& src, uint32_t q_off, uint32_t q_stride, uint32_t k_off,
                        uint32_t v_off, uint32_t kv_stride, uint32_t Hq, uint32_t Hkv, uint32_t HD, uint32_t rot,
                        const gpu::Buffer& table, bool neox, gpu::Binding kc, gpu::Binding vc, const gpu::Buffer& rows,
                        uint32_t rows_off, uint32_t n) {
  rope_kv(o, "rope_kv_store_rows", src, q_off, q_stride, k_off, v_off, kv_stride, n, Hq, Hkv, HD, rot, 0, table, neox, kc,
          vc, &rows, rows_off);
}

void embed(OpContext& o, const GpuWeight& table, const gpu::Buffer& tokens, uint32_t T, F32Ref y, uint32_t row0) {
  const auto& p = get(o, "embed", weight_defines(o, table),
                      {Bind::ReadOnly, Bind::ReadOnly, Bind::ReadWrite, Bind::Uniform});
  const uint32_t nb = table.K / table.block;
  EmbedParams prm{table.K, table.N, T, nb, table.soff, y.off, row0};
  // Which part of a split table holds a token's row is known on the device only: the T rows (read
  // and written) are declared once, by the part holding row 0.
  const uint64_t rows = row0 == 0 ? T : 0;
  o.rec.declare(gpu::TrafficBytes().r(gpu::Traffic::Weights, table.bytes() / table.N * rows).r(gpu::Traffic::Activations, 4ull * T)
                    .w(gpu::Traffic::Activations, 4ull * rows * table.K));
  o.rec.dispatch(p, {table.buf, tokens, y.buf}, prm, ceil_div(nb, 64), T, 1, "embed");
}

void rmsnorm(OpContext& o, F32Ref x, uint32_t x_stride, const gpu::Buffer& w, F32Ref y,
             uint32_t y_stride, uint32_t T, uint32_t D, float eps, const char* label) {
  const auto& p = get(o, "rmsnorm", {}, {Bind::ReadOnly, Bind::ReadOnly, Bind::ReadWrite, Bind::Uniform});
  RmsnormParams prm{D, eps, x.off, y.off, x_stride, y_stride};
  o.rec.declare(gpu::TrafficBytes().r(gpu::Traffic::Activations, 4ull * T * D).r(gpu::Traffic::Weights, 4ull * D)
                    .w(gpu::Traffic::Activations, 4ull * T * D));
  o.rec.dispatch(p, {x.buf, w, y.buf}, prm, T, 1, 1, label);
}

void rope(OpContext& o, F32Ref x, uint32_t stride, uint32_t T, uint32_t H, uint32_t HD, uint32_t rot,
          uint32_t pos0, const gpu::Buffer& table, bool neox, const char* label) {
  const auto& p = get(o, "rope", {{"NEOX", neox ? "1" : "0"}}, {Bind::ReadWrite, Bind::ReadOnly, Bind::Uniform});
  RopeParams prm{T, H, HD, rot, pos0, x.off, stride, rot / 2};
  o.rec.declare(gpu::TrafficBytes().r(gpu::Traffic::Activations, 4ull * T * H * rot).r(gpu::Traffic::Weights, 4ull * T * rot)
                    .w(gpu::Traffic::Activations, 4ull * T * H * rot));
  o.rec.dispatch(p, {x.buf, table}, prm, ceil_div(H * (rot / 2), 64), T, 1, label);
}

void kv_store(OpContext& o, const gpu::Buffer& src, uint32_t k_off, uint32_t v_off, uint32_t stride,
              uint32_t T, uint32_t kv_dim, uint32_t pos0, gpu::Binding kc, gpu::Binding vc) {
  const auto& p = get(o, "kv_store", {}, {Bind::ReadOnly, Bind::ReadWrite, Bind::ReadWrite, Bind::Uniform});
  KvStoreParams prm{T, kv_dim, pos0, k_off, v_off, stride};
  o.rec.declare(gpu::TrafficBytes().r(gpu::Traffic::Activations, 8ull * T * kv_dim).w(gpu::Traffic::KvCache, 8ull * T * kv_dim));
  o.rec.dispatch(p, {src, kc, vc}, prm, ceil_div(kv_dim, 64), T, 1, "kv_store");
}

namespace {
constexpr uint32_t kSplitMaxRows = 1024;   // split only when heads x tokens <= this many rows
constexpr uint32_t kSplitTarget = 2048;    // aim for about this many workgroups in total
static_assert(kSplitMax <= 64, "attention_combine.wgsl holds at most 64 splits in workgroup memory");
constexpr uint32_t kTiledThreads = 128;    // attention_tiled: threads per workgroup
constexpr uint32_t kTiledSplitTargetMax = 4096;  // attention_tiled: largest split target honoured

// attention_tiled tile sizes for head dim HD: with H = HD rounded up to a power of two >= 64,
// RW = 1024 / H rows and BK = 2048 / H keys per tile (16 x 32 for HD <= 64, 8 x 16 for <= 128,
// 4 x 8 for <= 256), so that the Q tile, the K/V tile (rows padded by one vec4) and the score tile
// and the per-thread partials take at most 16192 bytes of workgroup memory (WebGPU default: 16384).
struct TiledShape {
  uint32_t rows, keys;
};
TiledShape tiled_shape(uint32_t HD) {
  uint32_t h = 64;
  while (h < HD) h *= 2;
  return {1024 / h, 2048 / h};
}
}  // namespace

uint64_t attention_split_floats(uint32_t max_T, uint32_t Hq, uint32_t HD, uint32_t tiled_split_target) {
  // Per-row kernel: rows * n_split <= rows * ceil(kSplitTarget / rows) < kSplitTarget + rows.
  const uint64_t rows = std::min<uint64_t>(uint64_t(max_T) * Hq, kSplitMaxRows);
  const uint64_t per_row = std::min<uint64_t>(rows * kSplitMax, kSplitTarget + rows);
  // Tiled kernel: splits only while row_tiles < target (KernelOptions::attention_tiled_split_target),
  // i.e. rows < target * RW, and
  // rows * ceil(target / row_tiles) < target * RW + rows < 2 * target * RW.
  const uint64_t all_rows = uint64_t(max_T) * Hq;
  const uint64_t tiled = std::min<uint64_t>(all_rows * kSplitMax, 2ull * std::min(tiled_split_target, kTiledSplitTargetMax) * tiled_shape(HD).rows);
  return std::max(per_row, tiled) * (HD + 2);
}

namespace {
// Merges the split-K partials (m, l, acc) of every (token, head) row into out.
void attention_combine(OpContext& o, const AttentionShape& s, const gpu::Buffer& scratch, uint32_t n_split,
                       F32Ref out, uint32_t o_stride) {
  const auto& c = get(o, "attention_combine", {{"ROWS", "0"}}, {Bind::ReadOnly, Bind::ReadWrite, Bind::Uniform});
  CombineParams cp{s.T, s.Hq, s.HD, n_split, out.off, o_stride, 0};
  const uint64_t rows = uint64_t(s.Hq) * s.T, part_bytes = 4ull * rows * n_split * (s.HD + 2);
  o.rec.declare(gpu::TrafficBytes().r(gpu::Traffic::Activations, part_bytes).w(gpu::Traffic::Activations, 4ull * rows * s.HD));
  o.rec.dispatch(c, {scratch, out.buf}, cp, s.Hq, s.T, 1, "attention_combine");
}

// The end of a split attention: the partials merged into out, or (defer given: the caller records
// matmul_combine next) left in the scratch for the projection.
void finish_split(OpContext& o, const AttentionShape& s, const gpu::Buffer& scratch, uint32_t n_split, F32Ref out,
                  uint32_t o_stride, AttentionPartials* defer) {
  if (defer) {
    *defer = {&scratch, s.T, s.Hq, s.HD, n_split};
    return;
  }
  attention_combine(o, s, scratch, n_split, out, o_stride);
}

// attention_tiled.wgsl's pipeline for head dim HD, with or without the key split.
const gpu::Pipeline& tiled_pipe(OpContext& o, uint32_t HD, bool split) {
  const TiledShape ts = tiled_shape(HD);
  const Defines d{{"HD4", std::to_string(HD / 4)}, {"RW", std::to_string(ts.rows)}, {"BK", std::to_string(ts.keys)},
                  {"NT", std::to_string(kTiledThreads)}, {"SPLIT", split ? "1" : "0"}};
  return get(o, "attention_tiled", d, {Bind::ReadOnly, Bind::ReadOnly, Bind::ReadOnly, Bind::ReadWrite, Bind::Uniform});
}

// The flash kernel's pipeline for tile ft (attention_flash.wgsl dense, GATHER 0; or attention_flash_sg.wgsl
// for a lanes tile) and head dim HD, with or without the key split and the sliding window.
const gpu::Pipeline& flash_pipe(OpContext& o, const FlashTile& ft, uint32_t HD, bool split, bool window = false) {
  const Defines d = attention_flash_defines(o, ft, HD, split, false, window);
  const char* name = ft.lanes ? "attention_flash_sg" : "attention_flash";
  return o.pipelines.get(variant_key(name, d), [&] {
    return gpu::KernelSpec{"", ft.lanes ? attention_flash_sg_wgsl(ft, HD, d) : attention_flash_wgsl(ft, HD, d),
                           {Bind::ReadOnly, Bind::ReadOnly, Bind::ReadOnly, Bind::ReadWrite, Bind::Uniform}};
  });
}

// The key split of a prefill attention launch of row_tiles row tiles per KV head over at most
// max_keys keys in tiles of `keys` keys: {number of splits, keys per split}. The written condition:
// scratch given, --attn-prefill-split on, fewer than the split target's workgroups without it and
// more than min_tiles key tiles in the longest row; then about that many workgroups (at most
// kSplitMax splits), each split >= min_tiles key tiles (2 for attention_tiled, --attn-flash-split-tiles
// for the flash kernel), and no more splits than the scratch holds.
std::pair<uint32_t, uint32_t> prefill_key_split(const OpContext& o, const AttentionShape& s, uint32_t row_tiles,
                                                uint32_t max_keys, uint32_t keys, const gpu::Buffer* split_scratch,
                                                uint32_t min_tiles = 2) {
  const uint32_t target = std::min(o.opt.attention_tiled_split_target, kTiledSplitTargetMax);
  const uint32_t tiles = row_tiles * s.Hkv;
  if (!split_scratch || !o.opt.attention_prefill_split || tiles >= target || max_keys <= min_tiles * keys) return {1, max_keys};
  const uint32_t want = std::min(kSplitMax, ceil_div(target, tiles));
  uint32_t split_len = std::max(min_tiles * keys, ceil_div(ceil_div(max_keys, want), keys) * keys);
  uint32_t n_split = ceil_div(max_keys, split_len);
  const uint64_t fit = split_scratch->size() / (4ull * s.T * s.Hq * (s.HD + 2));
  if (n_split > fit) {
    n_split = uint32_t(std::max<uint64_t>(fit, 1));
    split_len = ceil_div(ceil_div(max_keys, n_split), keys) * keys;
    n_split = ceil_div(max_keys, split_len);
  }
  return {n_split, split_len};
}

// The K and V cache rows (per KV head) a prefill kernel of `rows`-row blocks reads: each block reads
// rows [its first row's window start (0 without a window), its last token's position] (attention_tiled,
// attention_flash).
uint64_t block_kv_rows(const AttentionShape& s, uint32_t rows) {
  const uint32_t G = s.Hq / s.Hkv, blocks = ceil_div(s.T * G, rows);
  uint64_t kv_rows = 0;
  for (uint32_t i = 0; i < blocks; ++i) {
    const uint32_t last = s.pos0 + (std::min(s.T * G, (i + 1) * rows) - 1) / G + 1, first = s.pos0 + i * rows / G + 1;
    kv_rows += last - (s.window && first > s.window ? first - s.window : 0);
  }
  return kv_rows;
}

// Multi-query tiled attention for T > 1 (attention_tiled.wgsl): one workgroup per (tile of RW
// (token, head) rows of one KV head, KV head, key split).
void attention_tiled(OpContext& o, const AttentionShape& s, F32Ref q, uint32_t q_stride, gpu::Binding kc,
                     gpu::Binding vc, F32Ref out, uint32_t o_stride, const gpu::Buffer* split_scratch,
                     AttentionPartials* defer) {
  const TiledShape ts = tiled_shape(s.HD);
  // max_keys: the longest key range of a row tile (with a window: at most the window plus the tile's
  // other tokens, since the tile starts at its first row's window).
  const uint32_t G = s.Hq / s.Hkv, row_tiles = ceil_div(s.T * G, ts.rows),
                 max_keys = s.window ? std::min(s.pos0 + s.T, s.window + ts.rows) : s.pos0 + s.T;
  const auto [n_split, split_len] = prefill_key_split(o, s, row_tiles, max_keys, ts.keys, split_scratch);
  const bool split = n_split > 1;
  const auto& p = tiled_pipe(o, s.HD, split);
  AttentionParams prm{
      s.T, s.pos0, s.Hq, s.Hkv, s.HD, q.off, q_stride, out.off, o_stride, s.Hkv * s.HD, s.scale, split_len, n_split, s.window, 0, 0};
  const uint64_t kv_rows = block_kv_rows(s, ts.rows);
  o.rec.declare(gpu::TrafficBytes().r(gpu::Traffic::Activations, 4ull * s.T * s.Hq * s.HD)
                    .r(gpu::Traffic::KvCache, kv_rows * 8ull * s.Hkv * s.HD).w(gpu::Traffic::Activations, 4ull * s.T * s.Hq * s.HD));
  if (!split) {
    o.rec.dispatch(p, {q.buf, kc, vc, out.buf}, prm, row_tiles, s.Hkv, 1, "attention_tiled");
    return;
  }
  o.rec.dispatch(p, {q.buf, kc, vc, *split_scratch}, prm, row_tiles, s.Hkv, n_split, "attention_tiled");
  finish_split(o, s, *split_scratch, n_split, out, o_stride, defer);
}

// The flash kernel's minimum key tiles per split (--attn-flash-split-tiles N, or 0: adaptive): the
// largest of 8, 4, 2, 1 tiles that still gives the launch kFlashSplitMinWorkgroups workgroups (blocks x
// splits of that length), else 1. H200, 2026-12-03 (bench/results/2026-12-03-h200-flash-prefetch/,
// `bench attention` with --attn-flash-prefetch, split target 2048): longer splits cut the combine's
// partials and give the prefetch more tiles to overlap, until the launch runs out of workgroups: 76 new
// tokens over 2732 keys, SmolLM2 shape (12 blocks) 58.1 / 50.9 / 46.2 us at >= 2 / 4 / 8 tiles; over
// 185 keys 23.7 / 26.1 / 32.9 / 44.0 us at >= 1 / 2 / 4 / 8 (108 / 60 / 36 / 24 workgroups); Qwen2.5-1.5B
// shape (30 blocks) over 185 keys best at >= 2 (150 workgroups, 31.4 us vs 36.6 at 1 and 37.7 at 4).
constexpr uint32_t kFlashSplitMinWorkgroups = 128;
uint32_t flash_split_min_tiles(const OpContext& o, uint32_t blocks, uint32_t max_keys, uint32_t bc) {
  if (o.opt.attention_flash_split_tiles) return o.opt.attention_flash_split_tiles;
  for (uint32_t t : {8u, 4u, 2u})
    if (uint64_t(blocks) * ceil_div(max_keys, t * bc) >= kFlashSplitMinWorkgroups) return t;
  return 1;
}

// Flash attention for T > 1 (attention_flash.wgsl, or attention_flash_sg.wgsl for a lanes tile): one workgroup per (block of BR
// (token, head) rows of one KV head, KV head, key split); the split rule is attention_tiled's with
// BR-row blocks and BC-key tiles.
void attention_flash(OpContext& o, const AttentionShape& s, const FlashTile& ft, F32Ref q, uint32_t q_stride,
                     gpu::Binding kc, gpu::Binding vc, F32Ref out, uint32_t o_stride,
                     const gpu::Buffer* split_scratch, AttentionPartials* defer) {
  // max_keys: the longest key range of a row block (with a window: at most the window plus the block's
  // other tokens, since the block starts at its first row's window, as attention_tiled).
  const uint32_t G = s.Hq / s.Hkv, row_tiles = ceil_div(s.T * G, ft.br),
                 max_keys = s.window ? std::min(s.pos0 + s.T, s.window + ft.br) : s.pos0 + s.T;
  const auto [n_split, split_len] =
      prefill_key_split(o, s, row_tiles, max_keys, ft.bc, split_scratch, flash_split_min_tiles(o, s.Hkv * row_tiles, max_keys, ft.bc));
  const bool split = n_split > 1;
  const auto& p = flash_pipe(o, ft, s.HD, split, s.window != 0);
  FlashParams prm{
      s.T, s.pos0, s.Hq, s.Hkv, s.HD, q.off, q_stride, out.off, o_stride, s.Hkv * s.HD, s.scale, split_len, n_split, s.window, 0, 0};
  const uint64_t kv_rows = block_kv_rows(s, ft.br);
  o.rec.declare(gpu::TrafficBytes().r(gpu::Traffic::Activations, 4ull * s.T * s.Hq * s.HD)
                    .r(gpu::Traffic::KvCache, kv_rows * 8ull * s.Hkv * s.HD).w(gpu::Traffic::Activations, 4ull * s.T * s.Hq * s.HD));
  if (!split) {
    o.rec.dispatch(p, {q.buf, kc, vc, out.buf}, prm, row_tiles, s.Hkv, 1, ft.lanes ? "attention_flash_sg" : "attention_flash");
    return;
  }
  o.rec.dispatch(p, {q.buf, kc, vc, *split_scratch}, prm, row_tiles, s.Hkv, n_split,
                 ft.lanes ? "attention_flash_sg" : "attention_flash");
  finish_split(o, s, *split_scratch, n_split, out, o_stride, defer);
}
}  // namespace

namespace {
// Whether the decode kernel may use subgroup operations on this adapter.
bool decode_subgroups(const OpContext& o) { return o.opt.attention_decode_subgroups && o.ctx.has_subgroups(); }

// attention_decode.wgsl NT (--attn-decode-threads): threads per workgroup; 0 = adapter default: 256 on
// hardware adapters with subgroups (where KL defaults to 2: tiles of 128 keys, one per default split),
// else 128 (switch record attn_decode_threads).
uint32_t decode_threads(const OpContext& o) {
  if (const uint32_t nt = o.opt.attention_decode_threads) {
    const uint32_t max = o.ctx.info().limits.maxComputeInvocationsPerWorkgroup;
    if (nt > max)
      throw Error("--attn-decode-threads " + std::to_string(nt) + " exceeds this adapter's " + std::to_string(max) +
                  " invocations per workgroup");
    return nt;
  }
  return !o.ctx.info().is_software() && decode_subgroups(o) ? 256 : 128;
}

// attention_decode.wgsl KL (--attn-decode-key-lanes; 0 = adapter default: 2 on hardware adapters, 1 on
// software ones; switch record attn_decode_key_lanes): threads per key of the
// score phase. The partial dot products are summed with subgroup shuffles, so 1 without subgroups;
// halved until it divides HD / 4.
uint32_t decode_key_lanes(const OpContext& o, uint32_t HD) {
  if (!decode_subgroups(o)) return 1;
  uint32_t kl = o.opt.attention_decode_key_lanes ? o.opt.attention_decode_key_lanes
                                                 : (o.ctx.info().is_software() ? 1 : 2);
  // A key's KL threads must share a subgroup: KL <= the smallest subgroup size (a power of two).
  const uint32_t lo = o.ctx.measured_subgroup_sizes().first;
  while (kl > 1 && ((HD / 4) % kl || lo < kl || (lo & (lo - 1)))) kl /= 2;
  return kl;
}

// Workgroup memory of attention_decode.wgsl for G query heads of head dim HD, NT threads and KL
// threads per key (qs, ps, pmax, red, lred).
uint32_t decode_wg_bytes(uint32_t G, uint32_t HD, bool sg, uint32_t NT, uint32_t KL) {
  return 4 * G * HD + 4 * G * (NT / KL) + (sg ? G * NT : 0) + 20 * NT;
}
}  // namespace

bool attention_decode_applies(const OpContext& o, const AttentionShape& s) {
  const bool on = o.opt.attention_decode_gqa == 1 || o.opt.attention_decode_gqa == 2;
  if (!on || s.T != 1 || s.Hkv == 0 || s.Hq % s.Hkv || s.HD % 4 || s.HD > 256) return false;
  // The workgroup memory the kernel declares must fit the device's limit (else: the per-row kernel).
  const uint32_t nt = decode_threads(o);
  return nt >= s.HD / 4 && decode_wg_bytes(s.Hq / s.Hkv, s.HD, decode_subgroups(o), nt, decode_key_lanes(o, s.HD)) <=
                               o.ctx.info().limits.maxComputeWorkgroupStorageSize;
}

DecodeSplit attention_decode_split(const OpContext& o, const AttentionShape& s, const gpu::Buffer* split_scratch) {
  // n_keys: the keys the query sees (with a window: its last `window` keys).
  const uint32_t n_keys = s.window ? std::min(s.pos0 + 1, s.window) : s.pos0 + 1;
  DecodeSplit d{1, n_keys};
  const bool sw = o.ctx.info().is_software();
  const uint32_t split_min = o.opt.attention_decode_split_min == kDecodeSplitMinAuto ? (sw ? 1024u : 0u)
                                                                                    : o.opt.attention_decode_split_min;
  // Hardware default 128 = one full tile of the kernel's 128 threads per split (H200 2026-12-03,
  // switch record attn_decode_split: +1.9% decode after 512 and +4.2% after 2048 on the Qwen2.5-1.5B
  // shape against 64; 32 and 256 slower).
  const uint32_t split_len_opt = o.opt.attention_decode_split_len ? o.opt.attention_decode_split_len : (sw ? 256u : 128u);
  if (split_scratch && o.opt.attention_decode_split && n_keys > split_min) {
    d.split_len = std::max<uint32_t>({split_len_opt, 1, ceil_div(n_keys, kSplitMax)});
    const uint64_t fit = split_scratch->size() / (4ull * s.Hq * (s.HD + 2));
    if (ceil_div(n_keys, d.split_len) > fit) d.split_len = ceil_div(n_keys, uint32_t(std::max<uint64_t>(fit, 1)));
    d.n_split = ceil_div(n_keys, d.split_len);
  }
  return d;
}

namespace {
// attention_decode.wgsl's pipeline for the shape's head dim and group size, with or without the key
// split, for one sequence or several (MULTI), with the QK-norm + RoPE + KV-store prologue (QKN, its
// RoPE pairing `neox`) or without.
const gpu::Pipeline& decode_pipe(OpContext& o, const AttentionShape& s, bool split, bool multi, bool qkn = false,
                                 bool neox = false) {
  const uint32_t G = s.Hq / s.Hkv;
  const bool sw = o.ctx.info().is_software();
  const bool sg = decode_subgroups(o);
  // K-row loads in flight per thread (--attn-decode-k-batch): the option, else 8 on hardware
  // adapters (H200: +6.4% decode on the Qwen2.5-1.5B shape, switch record attn_decode_k_batch) and 1
  // on software ones (lavapipe compiles KB = 8 about twice as long); halved until it divides HD / 4.
  uint32_t kb = o.opt.attention_decode_k_batch ? o.opt.attention_decode_k_batch : (sw ? 1 : 8);
  while ((s.HD / 4) % kb) kb /= 2;
  const bool lv = o.opt.attention_decode_late_v;
  const uint32_t kl = decode_key_lanes(o, s.HD);
  while ((s.HD / 4 / kl) % kb) kb /= 2;  // KB divides the thread's HD / 4 / KL vec4 of the K row
  neox = qkn && neox;
  const uint32_t nt = decode_threads(o);
  // --attn-decode-prefetch: not with LV (V loaded in the PV phase) or QKN (the new key row is stored
  // before any key is read).
  // Adapter default (2): on for hardware adapters with subgroups where the key lanes are >= 2 (with
  // KL 1 a thread's share of a 128-key tile at head dim 128 is 64 vec4: measured 7.8% slower on an
  // H100, switch record attn_decode_prefetch).
  const bool pf = (o.opt.attention_decode_prefetch == 1 || (o.opt.attention_decode_prefetch == 2 && sg && !sw && kl > 1)) &&
                  !lv && !qkn;
  if (pf) kb = s.HD / 4 / kl;  // the whole share is loaded at once (KB unused)
  const gpu::PipelineCache::Signature sig{2, s.HD, G, sg, split, kb, lv, kl, multi, qkn, neox, nt, pf};  // 2: attention_decode (every define)
  return memoized(o, sig, [&]() -> const gpu::Pipeline& {
    const Defines d{{"HD4", std::to_string(s.HD / 4)}, {"G", std::to_string(G)}, {"NT", std::to_string(nt)},
                    {"PF", pf ? "1" : "0"},
                    {"SG", sg ? "1" : "0"}, {"SPLIT", split ? "1" : "0"}, {"KB", std::to_string(kb)}, {"LV", lv ? "1" : "0"},
                    {"KL", std::to_string(kl)}, {"MULTI", multi ? "1" : "0"}, {"QKN", qkn ? "1" : "0"},
                    {"NEOX", neox ? "1" : "0"}};
    const Bind kv = qkn ? Bind::ReadWrite : Bind::ReadOnly;
    std::vector<Bind> binds{Bind::ReadOnly, kv, kv, Bind::ReadWrite};
    if (multi) binds.push_back(Bind::ReadOnly);
    if (qkn) binds.insert(binds.end(), {Bind::ReadOnly, Bind::ReadOnly, Bind::ReadOnly});
    binds.push_back(Bind::Uniform);
    return get(o, "attention_decode", d, binds);
  });
}

// Decode attention (T = 1), attention_decode.wgsl: one workgroup per (KV head, key split) for the
// G query heads of the group; split over keys (then attention_combine) only past
// attention_decode_split_min keys (attention_decode_split()).
void attention_decode(OpContext& o, const AttentionShape& s, F32Ref q, gpu::Binding kc, gpu::Binding vc,
                      F32Ref out, uint32_t o_stride, const gpu::Buffer* split_scratch, AttentionPartials* defer) {
  const auto [n_split, split_len] = attention_decode_split(o, s, split_scratch);
  const uint32_t n_keys = s.window ? std::min(s.pos0 + 1, s.window) : s.pos0 + 1;
  const bool split = n_split > 1;
  const gpu::Pipeline& p = decode_pipe(o, s, split, false);
  DecodeParams prm{
      s.T, s.pos0, s.Hq, s.Hkv, s.HD, q.off, 0, out.off, o_stride, s.Hkv * s.HD, s.scale, split_len, n_split, s.window, 0, 0};
  // Each K and V row of every KV head is read once.
  o.rec.declare(gpu::TrafficBytes().r(gpu::Traffic::Activations, 4ull * s.Hq * s.HD)
                    .r(gpu::Traffic::KvCache, uint64_t(n_keys) * 8ull * s.Hkv * s.HD).w(gpu::Traffic::Activations, 4ull * s.Hq * s.HD));
  if (!split) {
    o.rec.dispatch(p, {q.buf, kc, vc, out.buf}, prm, s.Hkv, 1, 1, "attention");
    return;
  }
  o.rec.dispatch(p, {q.buf, kc, vc, *split_scratch}, prm, s.Hkv, 1, n_split, "attention");
  finish_split(o, s, *split_scratch, n_split, out, o_stride, defer);
}
}  // namespace

void attention_decode_qk_norm(OpContext& o, const AttentionShape& s, const DecodeQkNorm& n, gpu::Binding kc,
                              gpu::Binding vc, F32Ref out, uint32_t o_stride, const gpu::Buffer* split_scratch,
                              SparseMeansCache* means_cache, AttentionPartials* defer) {
  if (defer) *defer = {};
  if (!attention_decode_applies(o, s)) throw Error("attention_decode_qk_norm: the decode kernel does not apply to this shape");
  if (!n.src || !n.q_norm || !n.k_norm || !n.table) throw Error("attention_decode_qk_norm: missing operand");
  if (n.rot % 2 || n.rot > s.HD) throw Error("attention_decode_qk_norm: rotary dims must be even and <= head_dim");
  if (means_cache) means_cache->invalidate_from(s.pos0);  // this step writes key row pos0
  const auto [n_split, split_len] = attention_decode_split(o, s, split_scratch);
  const uint32_t n_keys = s.window ? std::min(s.pos0 + 1, s.window) : s.pos0 + 1;
  const bool split = n_split > 1;
  const gpu::Pipeline& p = decode_pipe(o, s, split, false, true, n.neox);
  DecodeParams prm{
      1, s.pos0, s.Hq, s.Hkv, s.HD, n.q_off, 0, out.off, o_stride, s.Hkv * s.HD, s.scale, split_len, n_split, s.window, 0, 0};
  prm.k_off = n.k_off, prm.v_off = n.v_off, prm.rot = n.rot, prm.table_pairs = n.rot / 2, prm.eps = n.eps;
  // Each K and V row of every KV head is read once; the raw q, k and v heads, the norm weights and
  // one RoPE row read; the new K and V rows written.
  const uint64_t kv_dim = uint64_t(s.Hkv) * s.HD;
  o.rec.declare(gpu::TrafficBytes().r(gpu::Traffic::Activations, 4ull * (s.Hq * s.HD + 2 * kv_dim))
                    .r(gpu::Traffic::Weights, 4ull * (2 * s.HD + n.rot))
                    .r(gpu::Traffic::KvCache, uint64_t(n_keys) * 8ull * kv_dim).w(gpu::Traffic::KvCache, 8ull * kv_dim)
                    .w(gpu::Traffic::Activations, 4ull * s.Hq * s.HD));
  const gpu::Binding dst = split ? gpu::Binding(*split_scratch) : gpu::Binding(out.buf);
  o.rec.dispatch(p, {*n.src, kc, vc, dst, *n.q_norm, *n.k_norm, *n.table}, prm, s.Hkv, 1, n_split, "attention");
  if (split) finish_split(o, s, *split_scratch, n_split, out, o_stride, defer);
}

uint32_t attention_decode_batch(OpContext& o, const AttentionShape& s, F32Ref q, uint32_t q_stride, gpu::Binding kc,
                                gpu::Binding vc, F32Ref out, uint32_t o_stride, const gpu::Buffer& tab, uint32_t tab_off,
                                uint32_t n, uint32_t max_split, uint64_t keys, gpu::Buffer* split_scratch) {
  if (!n) return 0;
  if (!attention_decode_applies(o, s)) throw Error("attention_decode_batch: the decode kernel does not apply to this shape");
  if (s.window) throw Error("attention_decode_batch: no sliding window");
  if (max_split == 0 || max_split > kSplitMax) throw Error("attention_decode_batch: 1 to " + std::to_string(kSplitMax) + " splits");
  const bool split = max_split > 1;
  const uint64_t part_bytes = 4ull * n * s.Hq * max_split * (s.HD + 2);
  if (split && (!split_scratch || split_scratch->size() < part_bytes))
    throw Error("attention_decode_batch: the split scratch holds less than " + std::to_string(part_bytes) + " bytes");
  const gpu::Pipeline& p = decode_pipe(o, s, split, true);
  DecodeParams prm{1, 0, s.Hq, s.Hkv, s.HD, q.off, q_stride, out.off, o_stride, s.Hkv * s.HD, s.scale, 0, max_split, 0, tab_off, 0};
  o.rec.declare(gpu::TrafficBytes().r(gpu::Traffic::Activations, 4ull * n * (s.Hq * s.HD + 4))
                    .r(gpu::Traffic::KvCache, keys * 8ull * s.Hkv * s.HD).w(gpu::Traffic::Activations, 4ull * n * s.Hq * s.HD));
  if (!split) {
    o.rec.dispatch(p, {q.buf, kc, vc, out.buf, tab}, prm, s.Hkv, n, 1, "attention");
    return 1;
  }
  o.rec.dispatch(p, {q.buf, kc, vc, *split_scratch, tab}, prm, s.Hkv, n, max_split, "attention");
  const auto& c = get(o, "attention_combine", {{"ROWS", "1"}}, {Bind::ReadOnly, Bind::ReadWrite, Bind::ReadOnly, Bind::Uniform});
  CombineParams cp{n, s.Hq, s.HD, max_split, out.off, o_stride, tab_off};
  o.rec.declare(gpu::TrafficBytes().r(gpu::Traffic::Activations, part_bytes).w(gpu::Traffic::Activations, 4ull * n * s.Hq * s.HD));
  o.rec.dispatch(c, {*split_scratch, out.buf, tab}, cp, s.Hq, n, 1, "attention_combine");
  return 2;
}

uint64_t FlashTile::workgroup_bytes(uint32_t HD) const {
  // lanes (attention_flash_sg.wgsl): ks and vs rows padded by one vec4. attention_flash.wgsl: qs, ks
  // (and vs) rows padded by one vec4; pt padded by one row group per key; pm.
  if (lanes) return 4ull * 2 * bc * (HD + 4);
  return 4ull * ((br + bc * (kv_shared ? 1 : 2)) * (HD + 4) + bc * (br / rm + 1) * rm + br * tx);
}

bool attention_flash_unrolled(const OpContext& o) {
  if (o.opt.attention_flash_unroll != 2) return o.opt.attention_flash_unroll == 1;
  const auto& info = o.ctx.info();
  return !info.is_software() || info.name.find("llvmpipe") != std::string::npos;
}

bool attention_flash_prefetch(const OpContext& o, const FlashTile& ft, uint32_t HD) {
  // attention_flash.wgsl's KVR holds 16 vec4 (a0 .. a15); attention_flash_sg.wgsl's 8, K's and V's
  // live together.
  const uint32_t max_per_thread = ft.lanes ? 8 : 16;
  const uint32_t elems = ft.bc * (HD / 4), nt = ft.threads();  // vec4 of one K (or V) tile, threads
  return o.opt.attention_flash_prefetch && nt && elems % nt == 0 && elems / nt <= max_per_thread;
}

Defines attention_flash_defines(const OpContext& o, const FlashTile& ft, uint32_t HD, bool split, bool gather, bool window) {
  if (gather && window) throw Error("attention_flash: the gathered sparse form has no sliding window");
  if (ft.lanes) {
    if (gather) throw Error("attention_flash: the gathered sparse form has no lanes tile");
    return {{"HD4", std::to_string(HD / 4)}, {"BC", std::to_string(ft.bc)}, {"JK", std::to_string(ft.jk)},
            {"RM", std::to_string(ft.rm)}, {"TX", std::to_string(ft.tx)}, {"TY", std::to_string(ft.br / ft.rm)},
            {"PF", attention_flash_prefetch(o, ft, HD) ? "1" : "0"}, {"SPLIT", split ? "1" : "0"},
            {"WINDOW", window ? "1" : "0"}};
  }
  return {{"HD4", std::to_string(HD / 4)}, {"BR", std::to_string(ft.br)}, {"BC", std::to_string(ft.bc)},
          {"RM", std::to_string(ft.rm)}, {"TX", std::to_string(ft.tx)}, {"KV_SHARED", ft.kv_shared ? "1" : "0"},
          {"PF", attention_flash_prefetch(o, ft, HD) ? "1" : "0"}, {"SPLIT", split ? "1" : "0"},
          {"GATHER", gather ? "1" : "0"}, {"UNROLL", attention_flash_unrolled(o) ? "1" : "0"},
          {"WINDOW", window ? "1" : "0"}};
}

FlashTile attention_flash_tile(const OpContext& o, uint32_t HD) {
  if (HD % 32 || HD > 256 || (HD > 128 && !o.opt.attention_flash_wide)) return {};
  // The first tile that fits the adapter, largest first (48 KiB, e.g. NVIDIA: 64 x 32 for HD <= 64,
  // 32 x 32 with V sharing K's array for HD <= 128, 16 x 16 sharing for HD <= 256 with
  // --attn-flash-wide-heads (Qwen3.5's and Gemma 3's 256: a 32-row block does not fit 48 KiB beside a
  // 16-key tile); lavapipe's 32 KiB: 32 x 32 and 16 x 32, 16 x 16 up to HD 224, 8 x 16 at 256).
  static const FlashTile small_hd[] = {{64, 32, 4, 8, false}, {32, 32, 4, 8, false}, {32, 32, 2, 8, true}, {16, 32, 2, 8, true}};
  static const FlashTile large_hd[] = {{32, 32, 2, 8, false}, {32, 32, 2, 8, true}, {16, 32, 2, 8, true}};
  static const FlashTile xl_hd[] = {{16, 16, 2, 8, true}, {8, 16, 2, 8, true}};
  const auto& lim = o.ctx.info().limits;
  for (const FlashTile& t : HD <= 64    ? std::span<const FlashTile>(small_hd)
                            : HD <= 128 ? std::span<const FlashTile>(large_hd)
                                        : std::span<const FlashTile>(xl_hd))
    if (t.workgroup_bytes(HD) <= lim.maxComputeWorkgroupStorageSize && t.threads() <= lim.maxComputeInvocationsPerWorkgroup)
      return t;
  return {};
}

FlashTile attention_flash_lanes_tile(const OpContext& o, uint32_t HD) {
  // kFlashLanesAuto: 8 lanes at head dims >= 128 on hardware adapters (H100, 2026-12-07, switch record
  // attn_flash_lanes: the Qwen3.5 / Qwen2.5 shapes' prefill attention 2.7x / 1.3x faster at 2048 over
  // 2048 tokens with 256 threads; SmolLM2's 64 not faster); off on software adapters (unmeasured).
  const uint32_t n = o.opt.attention_flash_lanes != kFlashLanesAuto ? o.opt.attention_flash_lanes
                     : !o.ctx.info().is_software() && HD >= 128 ? 8 : 0;
  if (n == 0 || HD % 4 || HD > 256 || (HD / 4) % n || !o.ctx.has_subgroups()) return {};
  // A row's lanes must share a subgroup: N <= the smallest subgroup size (a power of two).
  const uint32_t lo = o.ctx.measured_subgroup_sizes().first;
  if (lo < n || (lo & (lo - 1))) return {};
  const auto& lim = o.ctx.info().limits;
  const uint32_t nt = o.opt.attention_flash_lanes_threads ? o.opt.attention_flash_lanes_threads : 256;
  if (nt < n || nt % n || nt > lim.maxComputeInvocationsPerWorkgroup || nt > lim.maxComputeWorkgroupSizeX) return {};
  uint32_t rm = o.opt.attention_flash_lanes_rows;  // (--attn-flash-lanes-rows)
  if (rm == 0) {
    rm = 4;
    while (rm > 1 && rm * HD / n > 64) rm /= 2;  // query floats per thread (and accumulators) <= 64
  }
  // Keys per softmax group (--attn-flash-lanes-keys): 32 / RM scores in registers; 4 on software adapters
  // (llvmpipe's compiler takes over a minute for a 16-key group at head dim 128, 2026-12-07: the
  // generated code grows with it).
  const uint32_t jk = o.opt.attention_flash_lanes_keys ? o.opt.attention_flash_lanes_keys
                      : o.ctx.info().is_software()      ? 4
                                                        : 32 / rm;
  for (uint32_t bc : {32u, 16u, 8u}) {
    FlashTile t{rm * (nt / n), bc, rm, n, false, true, std::min(bc, jk)};
    if (t.workgroup_bytes(HD) <= lim.maxComputeWorkgroupStorageSize) return t;
  }
  return {};
}

FlashTile attention_flash_pick(const OpContext& o, uint32_t HD) {
  const FlashTile t = attention_flash_lanes_tile(o, HD);
  return t.bc ? t : attention_flash_tile(o, HD);
}

bool attention_chunk_used(const OpContext& o, const AttentionShape& s) {
  // 2 (the default) = off on every adapter since the H200 A/B of 2026-12-02 (switch record attn_chunk).
  const bool on = o.opt.attention_chunk == 1;
  return on && s.T > 1 && s.T <= kAttnChunkMaxTokens && s.pos0 >= s.T && s.window == 0 &&
         attention_flash_tile(o, s.HD).bc != 0;
}

bool attention_flash_used(const OpContext& o, const AttentionShape& s) {
  // 2 (the default): on for every adapter since 2026-12-03 (H200 with --attn-flash-prefetch and the
  // adaptive split: faster than attention_tiled at every chat-turn and prefill shape measured,
  // bench/results/2026-12-03-h200-flash-prefetch/; before: on for software adapters only, the H200's
  // flash kernel 3x slower before its register tile was generated code).
  // A sliding window (Gemma 3's local layers) only with --attn-flash-window.
  const bool on = o.opt.attention_flash != 0 && (s.window == 0 || o.opt.attention_flash_window);
  return (s.T > 1 && on && attention_flash_tile(o, s.HD).bc != 0) || attention_chunk_used(o, s);
}

void attention_compile_prefill_split(OpContext& o, uint32_t HD) {
  const AttentionShape s{kAttnChunkMaxTokens + 1, 0, 1, 1, HD, 1.0f};  // a long prefill from an empty cache
  if (HD % 4 || HD > 256 || !o.opt.attention_prefill_split) return;
  if (attention_flash_used(o, s)) flash_pipe(o, attention_flash_pick(o, HD), HD, true);
  else if (o.opt.attention_tiled_prefill) tiled_pipe(o, HD, true);
}

void attention(OpContext& o, const AttentionShape& s, F32Ref q, uint32_t q_stride,
               gpu::Binding kc, gpu::Binding vc, F32Ref out, uint32_t o_stride,
               const gpu::Buffer* split_scratch, SparseScratch* sparse, SparseMeansCache* means_cache,
               AttentionPartials* defer) {
  if (defer) *defer = {};
  if (s.HD % 4 || s.HD > 256) throw Error("attention: head_dim must be a multiple of 4 and <= 256");
  if (s.Hq % s.Hkv) throw Error("attention: query heads must be a multiple of KV heads");
  if (means_cache) means_cache->invalidate_from(s.pos0);  // this forward wrote key rows from pos0 on
  if (sparse && sparse_attention_used(o.opt, s))
    return attention_sparse(o, s, q, q_stride, kc, vc, out, o_stride, *sparse, means_cache);
  if (attention_decode_applies(o, s)) return attention_decode(o, s, q, kc, vc, out, o_stride, split_scratch, defer);
  if (attention_flash_used(o, s))
    return attention_flash(o, s, attention_flash_pick(o, s.HD), q, q_stride, kc, vc, out, o_stride, split_scratch, defer);
  if (s.T > 1 && o.opt.attention_tiled_prefill)
    return attention_tiled(o, s, q, q_stride, kc, vc, out, o_stride, split_scratch, defer);
  // Split-K decision (the written condition): scratch given, switch on, at most kSplitMaxRows
  // (head, token) rows, and more than two 64-key tiles in the longest row; then about
  // kSplitTarget workgroups in total, each split a multiple of 64 keys.
  const uint32_t rows = s.Hq * s.T, max_keys = s.window ? std::min(s.pos0 + s.T, s.window) : s.pos0 + s.T;
  uint32_t n_split = 1, split_len = max_keys;
  if (split_scratch && o.opt.attention_decode_split && rows <= kSplitMaxRows && max_keys > 128) {
    const uint32_t want = std::min(kSplitMax, (kSplitTarget + rows - 1) / rows);
    split_len = ((max_keys + want - 1) / want + 63) / 64 * 64;
    n_split = (max_keys + split_len - 1) / split_len;
    if (uint64_t(rows) * n_split * (s.HD + 2) * 4 > split_scratch->size()) n_split = 1;
  }
  const bool split = n_split > 1;
  const auto& p = get(o, "attention", {{"SPLIT", split ? "1" : "0"}, {"ILP", o.opt.attention_ilp ? "1" : "0"}},
                      {Bind::ReadOnly, Bind::ReadOnly, Bind::ReadOnly, Bind::ReadWrite, Bind::Uniform});
  AttentionParams prm{
      s.T, s.pos0, s.Hq, s.Hkv, s.HD, q.off, q_stride, out.off, o_stride, s.Hkv * s.HD, s.scale, split_len, n_split, s.window, 0, 0};
  // KV rows read: each query token t sees pos0 + t + 1 rows of K and V (all KV heads; with a window
  // at most `window`).
  uint64_t kv_rows = uint64_t(s.T) * s.pos0 + uint64_t(s.T) * (s.T + 1) / 2;
  if (s.window) {
    kv_rows = 0;
    for (uint32_t t = 0; t < s.T; ++t) kv_rows += std::min(s.pos0 + t + 1, s.window);
  }
  o.rec.declare(gpu::TrafficBytes().r(gpu::Traffic::Activations, 4ull * s.T * s.Hq * s.HD)
                    .r(gpu::Traffic::KvCache, kv_rows * 8ull * s.Hkv * s.HD).w(gpu::Traffic::Activations, 4ull * s.T * s.Hq * s.HD));
  if (!split) {
    o.rec.dispatch(p, {q.buf, kc, vc, out.buf}, prm, s.Hq, s.T, 1, "attention");
    return;
  }
  o.rec.dispatch(p, {q.buf, kc, vc, *split_scratch}, prm, s.Hq, s.T, n_split, "attention");
  finish_split(o, s, *split_scratch, n_split, out, o_stride, defer);
}

bool attention_combine_fusable(const OpContext& o, const GpuWeight& W, uint32_t T, uint32_t HD) {
  if (!o.opt.fuse_attn_combine || T > kFusedMaxTokens || !matvec_enabled(o) || HD == 0 || W.K % HD) return false;
  // matvec.wgsl's workgroup memory: the row partials (red), the int8 activation blocks when the
  // projection uses them anyway, the split weights and denominators per head and the merged row.
  const MatvecShape sh = matvec_shape(o, W);
  uint64_t bytes = 4ull * sh.rows * sh.lanes + 4ull * (W.K / HD) * (kSplitMax + 1) + 4ull * W.K;
  if (matvec_uses_int8(o, W)) bytes += uint64_t(matvec_int8_blocks(W)) * (W.block + 8);
  return bytes <= o.ctx.info().limits.maxComputeWorkgroupStorageSize;
}

void matmul_combine(OpContext& o, const GpuWeight& W, const AttentionPartials& a, F32Ref y, uint32_t y_stride,
                    bool accumulate, const char* label) {
  if (!a.scratch) throw Error("matmul_combine: no deferred attention partials");
  if (W.K != a.Hq * a.HD) throw Error("matmul_combine: the projection's K must be heads x head_dim");
  if (a.n_split == 0 || a.n_split > kSplitMax) throw Error("matmul_combine: 1 to " + std::to_string(kSplitMax) + " splits");
  if (!attention_combine_fusable(o, W, a.T, a.HD)) throw Error("matmul_combine: not fusable here (attention_combine_fusable)");
  const uint32_t x_stride = a.Hq * a.n_split * (a.HD + 2);
  matvec_impl(o, W, {*a.scratch, 0}, x_stride, y, y_stride, a.T, accumulate, label, gpu::Traffic::Activations,
              Prologue::Combine, nullptr, 0.0f, 0, nullptr, &a);
}

void silu_mul(OpContext& o, const gpu::Buffer& src, uint32_t g_off, uint32_t u_off, uint32_t in_stride,
              uint32_t T, uint32_t F, F32Ref y) {
  const auto& p = get(o, "silu_mul", {}, {Bind::ReadOnly, Bind::ReadWrite, Bind::Uniform});
  GluParams prm{T, F, g_off, u_off, in_stride, y.off};
  o.rec.declare(gpu::TrafficBytes().r(gpu::Traffic::Activations, 8ull * T * F).w(gpu::Traffic::Activations, 4ull * T * F));
  o.rec.dispatch(p, {src, y.buf}, prm, ceil_div(F, 64), T, 1, "silu_mul");
}

void add_bias(OpContext& o, const gpu::Buffer& b, uint32_t N, F32Ref y, uint32_t stride, uint32_t T, const char* label) {
  if (&b == &y.buf) throw Error("add_bias: b and y must be different buffers");
  if (ceil_div(N, 64) > 65535) throw Error("add_bias: N = " + std::to_string(N) + " exceeds 65535 x 64 (one dispatch dimension)");
  const auto& p = get(o, "add_bias", {}, {Bind::ReadOnly, Bind::ReadWrite, Bind::Uniform});
  AddBiasParams prm{T, N, y.off, stride};
  o.rec.declare(gpu::TrafficBytes().r(gpu::Traffic::Activations, 4ull * T * N + 4ull * N).w(gpu::Traffic::Activations, 4ull * T * N));
  o.rec.dispatch(p, {b, y.buf}, prm, ceil_div(N, 64), T, 1, label);
}

void gelu_mul(OpContext& o, const gpu::Buffer& src, uint32_t g_off, uint32_t u_off, uint32_t in_stride,
              uint32_t T, uint32_t F, F32Ref y) {
  const auto& p = get(o, "gelu_mul", {}, {Bind::ReadOnly, Bind::ReadWrite, Bind::Uniform});
  GluParams prm{T, F, g_off, u_off, in_stride, y.off};
  o.rec.declare(gpu::TrafficBytes().r(gpu::Traffic::Activations, 8ull * T * F).w(gpu::Traffic::Activations, 4ull * T * F));
  o.rec.dispatch(p, {src, y.buf}, prm, ceil_div(F, 64), T, 1, "gelu_mul");
}

void scale(OpContext& o, F32Ref x, uint32_t n, float s, const char* label) {
  const auto& p = get(o, "scale", {}, {Bind::ReadWrite, Bind::Uniform});
  ScaleParams prm{n, x.off, s};
  o.rec.declare(gpu::TrafficBytes().r(gpu::Traffic::Activations, 4ull * n).w(gpu::Traffic::Activations, 4ull * n));
  const uint32_t groups = ceil_div(n, 64);
  o.rec.dispatch(p, {x.buf}, prm, std::min(groups, 65535u), ceil_div(groups, 65535u), 1, label);
}

uint32_t argmax_workgroups(const OpContext& o, uint32_t n) {
  // --argmax-workgroups: the option, else on hardware adapters one workgroup per 2048 logits (8 per
  // thread: every load of a thread's chunk in flight at once with the default AL) and one on software
  // adapters (a CPU gains nothing from a second dispatch).
  const uint32_t g = o.opt.argmax_workgroups ? o.opt.argmax_workgroups
                     : o.ctx.info().is_software() ? 1
                                                  : ceil_div(n, 2048);
  return std::clamp<uint32_t>(g, 1, std::min(kArgmaxMaxGroups, std::max<uint32_t>(1, ceil_div(n, 256))));
}

void argmax(OpContext& o, F32Ref x, uint32_t n, const gpu::Buffer& out) {
  // Loads in flight per thread (--argmax-loads): the option, else 16 on hardware adapters (the scan
  // of 600 KB of logits by one workgroup is bound by load latency) and 1 on software ones.
  const uint32_t al = o.opt.argmax_loads ? o.opt.argmax_loads : (o.ctx.info().is_software() ? 1 : 16);
  const uint32_t want = argmax_workgroups(o, n);
  // Chunks of whole 256-index rows of the workgroup (coalesced), so G may come out smaller than asked.
  const uint32_t chunk = std::max(256u, ceil_div(ceil_div(n, want), 256u) * 256u);
  const uint32_t groups = std::max(1u, ceil_div(n, chunk));  // n = 0: one workgroup writes id 0
  if (out.size() < 4ull * (groups > 1 ? 1 + 2 * groups : 1))
    throw Error("argmax: the output buffer holds " + std::to_string(out.size()) + " bytes, " +
                std::to_string(groups) + " workgroups need " + std::to_string(4 * (1 + 2 * groups)) +
                " (allocate argmax_buffer_bytes())");
  const std::vector<Bind> binds{Bind::ReadOnly, Bind::ReadWrite, Bind::Uniform};
  auto stage = [&](const char* which) {
    Defines d{{"AL", std::to_string(al)}, {"STAGE_WHOLE", "0"}, {"STAGE_PART", "0"}, {"STAGE_FINAL", "0"}};
    d[which] = "1";
    return &get(o, "argmax", d, binds);
  };
  const ArgmaxParams prm{n, x.off, chunk, groups};
  if (groups == 1) {
    o.rec.declare(gpu::TrafficBytes().r(gpu::Traffic::Logits, 4ull * n).w(gpu::Traffic::Logits, 4));
    o.rec.dispatch(*stage("STAGE_WHOLE"), {x.buf, out}, prm, 1, 1, 1, "argmax");
    return;
  }
  o.rec.declare(gpu::TrafficBytes().r(gpu::Traffic::Logits, 4ull * n).w(gpu::Traffic::Logits, 8ull * groups));
  o.rec.dispatch(*stage("STAGE_PART"), {x.buf, out}, prm, groups, 1, 1, "argmax");
  o.rec.declare(gpu::TrafficBytes().r(gpu::Traffic::Logits, 8ull * groups).w(gpu::Traffic::Logits, 4));
  o.rec.dispatch(*stage("STAGE_FINAL"), {x.buf, out}, prm, 1, 1, 1, "argmax");
}

void causal_conv(OpContext& o, const CausalConvShape& s, F32Ref x, uint32_t x_stride, F32Rows gate_in,
                 F32Rows gate_out, const gpu::Buffer& w, const gpu::Buffer* bias, F32Ref state, F32Ref y,
                 uint32_t y_stride, const char* label) {
  if (s.L < 2 || s.L > 64) throw Error("causal_conv: kernel width L must be in [2, 64]");
  if (s.T == 0 || s.C == 0) throw Error("causal_conv: empty input");
  for (const gpu::Buffer* b : {&x.buf, gate_in.buf, gate_out.buf, &w, bias})
    if (b == &y.buf || b == &state.buf) throw Error("causal_conv: y and state must not alias another operand");
  if (&y.buf == &state.buf) throw Error("causal_conv: y and state must be different buffers");
  const bool fused = o.opt.fuse_conv_state && s.T <= kFusedConvMaxTokens;
  Defines d{{"GATE_IN", gate_in.buf ? "1" : "0"}, {"GATE_OUT", gate_out.buf ? "1" : "0"},
            {"BIAS", bias ? "1" : "0"}, {"SILU", s.silu ? "1" : "0"}, {"UPDATE", "0"}, {"FUSED", fused ? "1" : "0"}};
  const std::vector<Bind> binds{Bind::ReadOnly, Bind::ReadOnly, Bind::ReadOnly, Bind::ReadOnly, Bind::ReadOnly,
                                Bind::ReadWrite, Bind::ReadWrite, Bind::Uniform};
  CausalConvParams prm{
      s.T, s.C, s.L, x.off, x_stride, gate_in.off, gate_in.stride, gate_out.off, gate_out.stride, state.off, y.off, y_stride};
  const gpu::Buffer& gi = gate_in.buf ? *gate_in.buf : x.buf;  // unused placeholders: read-only, may alias
  const gpu::Buffer& go = gate_out.buf ? *gate_out.buf : x.buf;
  const gpu::Buffer& b = bias ? *bias : w;
  const uint64_t io = 4ull * s.T * s.C, sb = 4ull * (s.L - 1) * s.C;
  if (fused) {  // one invocation per channel: conv of its T rows, then its state shift
    o.rec.declare(gpu::TrafficBytes()
                      .r(gpu::Traffic::Activations, io * (1 + (gate_in.buf ? 1 : 0) + (gate_out.buf ? 1 : 0)))
                      .r(gpu::Traffic::Weights, 4ull * s.C * (s.L + (bias ? 1 : 0)))
                      .r(gpu::Traffic::Recurrent, sb).w(gpu::Traffic::Activations, io).w(gpu::Traffic::Recurrent, sb));
    o.rec.dispatch(get(o, "causal_conv", d, binds), {x.buf, gi, go, w, b, state.buf, y.buf}, prm, ceil_div(s.C, 64), 1,
                   1, label);
    return;
  }
  o.rec.declare(gpu::TrafficBytes()
                    .r(gpu::Traffic::Activations, io * (1 + (gate_in.buf ? 1 : 0) + (gate_out.buf ? 1 : 0)))
                    .r(gpu::Traffic::Weights, 4ull * s.C * (s.L + (bias ? 1 : 0)))
                    .r(gpu::Traffic::Recurrent, sb).w(gpu::Traffic::Activations, io));
  o.rec.dispatch(get(o, "causal_conv", d, binds), {x.buf, gi, go, w, b, state.buf, y.buf}, prm, ceil_div(s.C, 64), s.T, 1,
                 label);
  d = {{"GATE_IN", gate_in.buf ? "1" : "0"}, {"GATE_OUT", "0"}, {"BIAS", "0"}, {"SILU", "0"}, {"UPDATE", "1"}, {"FUSED", "0"}};
  o.rec.declare(gpu::TrafficBytes().r(gpu::Traffic::Activations, sb * (gate_in.buf ? 2 : 1)).w(gpu::Traffic::Recurrent, sb));
  o.rec.dispatch(get(o, "causal_conv", d, binds), {x.buf, gi, go, w, b, state.buf, y.buf}, prm, ceil_div(s.C, 64), 1, 1,
                 "causal_conv_state");
}

std::vector<ParamsLayout> ops_params_layouts() {
  return {WGLLM_LAYOUT(MatmulParams, "matmul"),
          WGLLM_LAYOUT(MatmulParams, "matvec"),
          WGLLM_LAYOUT(RopeKvParams, "rope_kv"),
          WGLLM_LAYOUT(EmbedParams, "embed"),
          WGLLM_LAYOUT(RmsnormParams, "rmsnorm"),
          WGLLM_LAYOUT(RopeParams, "rope"),
          WGLLM_LAYOUT(KvStoreParams, "kv_store"),
          WGLLM_LAYOUT(CombineParams, "attention_combine"),
          WGLLM_LAYOUT(AttentionParams, "attention"),
          WGLLM_LAYOUT(AttentionParams, "attention_tiled"),
          WGLLM_LAYOUT(DecodeParams, "attention_decode"),
          WGLLM_LAYOUT(FlashParams, "attention_flash", {{"GATHER", "0"}}),
          WGLLM_LAYOUT(FlashParams, "attention_flash_sg"),
          WGLLM_LAYOUT(GluParams, "silu_mul"),
          WGLLM_LAYOUT(GluParams, "gelu_mul"),
          WGLLM_LAYOUT(AddBiasParams, "add_bias"),
          WGLLM_LAYOUT(ScaleParams, "scale"),
          WGLLM_LAYOUT(ArgmaxParams, "argmax"),
          WGLLM_LAYOUT(CausalConvParams, "causal_conv")};
}

}  // namespace wgllm::kernels
