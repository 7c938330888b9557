// Op recording for Gated DeltaNet and Qwen3.5 gated attention (one WGSL dispatch per call unless
// stated). Same conventions as kernels/ops.h: shapes in elements, offsets/strides in f32 elements,
// activations f32 row-major. CPU twins: kernels/gdn_ref.h. Formulas: transformers
// models/qwen3_5/modeling_qwen3_5.py (cited per op).
#pragma once
#include <cstdint>

#include "kernels/ops.h"

namespace wgllm::kernels {

/// In place per head: x <- x / sqrt(sum(x^2) + eps) for heads h < H of D values at
/// x.off + t*stride + h*head_stride, t < T (wgsl/head_norm.wgsl, L2=1; twin ref::l2norm_heads).
void l2norm_heads(OpContext& o, F32Ref x, uint32_t stride, uint32_t head_stride, uint32_t T, uint32_t H, uint32_t D,
                  float eps, const char* label = "l2norm");
/// In place per head: x <- (x / sqrt(mean(x^2) + eps)) * w, w: [D] f32 (QK-norm; twin
/// ref::rmsnorm_heads). Same layout as l2norm_heads.
void rmsnorm_heads(OpContext& o, F32Ref x, uint32_t stride, uint32_t head_stride, uint32_t T, uint32_t H, uint32_t D,
                   const gpu::Buffer& w, float eps, const char* label = "qk_norm");
/// The QK-norm of an attention layer (LFM2, Qwen3.5), RoPE and the KV-cache store in one dispatch
/// (wgsl/qk_norm_rope_kv.wgsl; decode fusion, KernelOptions::fuse_qk_norm): bit-identical to
/// rmsnorm_heads (q heads, weight qw) + rmsnorm_heads (k heads, kw) + rope_kv_store for the
/// queries and both caches. q rows at src[q_off + t*q_stride] (Hq heads of HD, normed and rotated
/// in place); k and v rows at src[k_off / v_off + t*kv_stride] (Hkv heads): k normed and rotated
/// into the key cache (src's k rows are not written), v copied into the value cache; cache rows
/// pos0 .. pos0+T-1 of Hkv*HD floats; first rot dims rotated with `table` (kernels::rope_table),
/// neox selects the pair layout. qw, kw: [HD] f32. Throws wgllm::Error for an odd rot or rot > HD.
void qk_norm_rope_kv_store(OpContext& o, const gpu::Buffer& src, uint32_t q_off, uint32_t q_stride, uint32_t k_off,
                           uint32_t v_off, uint32_t kv_stride, uint32_t T, uint32_t Hq, uint32_t Hkv, uint32_t HD,
                           uint32_t rot, uint32_t pos0, const gpu::Buffer& table, bool neox, const gpu::Buffer& qw,
                           const gpu::Buffer& kw, float eps, gpu::Binding kc, gpu::Binding vc);
/// Qwen3_5RMSNormGated in place: rows x.off + t*x_stride hold H heads of D contiguous values;
/// x <- rmsnorm(x) * w * silu(z), z rows z.off + t*z_stride (same head layout), w: [D] f32.
/// x and z must be different buffers (twin ref::gated_rmsnorm).
void gated_rmsnorm(OpContext& o, F32Ref x, uint32_t x_stride, F32Ref z, uint32_t z_stride, const gpu::Buffer& w,
                   uint32_t T, uint32_t H, uint32_t D, float eps);
/// x[t, i] *= sigmoid(g[t, i]), i < N, t < T (gated attention output; twin ref::sigmoid_gate).
/// x and g must be different buffers.
void sigmoid_gate(OpContext& o, F32Ref x, uint32_t x_stride, F32Ref g, uint32_t g_stride, uint32_t T, uint32_t N);
/// Gated DeltaNet gates for T tokens, NV heads: a, b at src[a_off|b_off + t*src_stride + h];
/// out rows out.off + t*out_stride get [g (NV) | beta (NV)] (twin ref::gdn_gates).
void gdn_gates(OpContext& o, const gpu::Buffer& src, uint32_t a_off, uint32_t b_off, uint32_t src_stride,
               const gpu::Buffer& a_log, const gpu::Buffer& dt_bias, F32Ref out, uint32_t out_stride, uint32_t T,
               uint32_t NV);

/// Operands of the gated delta rule on the GPU (layout in wgsl/gdn_params.wgsl):
///   qkv: the conv output; row t holds q (NK*DK) at q_off, k at k_off, v (NV*DV) at v_off, stride
///        qkv_stride; q and k already L2-normalised.
///   gates: rows g_off + t*gb_stride of [g (NV) | beta (NV)] (gdn_gates).
///   state: [NV][DK][DV] f32 at offset 0, updated in place.
///   out: rows o_off + t*o_stride of NV*DV.
struct GdnOperands {
  const gpu::Buffer& qkv;
  uint32_t q_off, k_off, v_off, qkv_stride;
  const gpu::Buffer& gates;
  uint32_t g_off, gb_stride;
  const gpu::Buffer& state;
  const gpu::Buffer& out;
  uint32_t o_off, o_stride;
  uint32_t T, NK, NV, DK, DV;
  float scale;  // DK^-1/2
  /// Value head h reads key head h % NK ("tiled" order of llama.cpp's qwen35 GGUF files) instead
  /// of h / (NV / NK) (transformers' repeat_interleave order). A property of the weights, no switch.
  bool tiled_v_heads = false;
};

/// One decode token (T must be 1): the per-token recurrence (wgsl/gdn_step.wgsl; twin
/// ref::gated_delta_rule with T = 1). Throws wgllm::Error for T != 1.
void gdn_step(OpContext& o, const GdnOperands& a);

/// gdn_step followed by gated_rmsnorm of its output, in one dispatch (KernelOptions::gdn_fuse_norm;
/// wgsl/gdn_step.wgsl NORM=1: one workgroup per value head, the head's DV outputs kept in workgroup
/// memory, then the norm in gated_rmsnorm's summation order): the same bits as
///   gdn_step(a); gated_rmsnorm({a.out, a.o_off}, NV*DV, z, NV*DV, norm_w, 1, NV, DV, eps).
/// z: the gate row (NV heads of DV) at z.off; norm_w: [DV] f32. T must be 1; z and norm_w must not
/// alias a.out or a.state. Throws wgllm::Error otherwise.
void gdn_step_norm(OpContext& o, const GdnOperands& a, F32Ref z, const gpu::Buffer& norm_w, float eps);

/// Shapes of gdn_decode_prep.
struct GdnPrepShape {
  uint32_t NK = 0, NV = 0, DK = 0, DV = 0;  // key heads, value heads, key and value head dims
  uint32_t L = 0;                           // conv kernel width, 2..64
  float eps = 1e-6f;                        // L2 norm epsilon of q and k
};

/// One decode token (T = 1) of a Gated DeltaNet layer up to the delta rule, in one dispatch
/// (KernelOptions::gdn_fuse_prep; wgsl/gdn_decode_prep.wgsl): with C = 2*NK*DK + NV*DV channels of
/// the projection row src[x_off ..] ([q | k | v]),
///   y = silu(causal conv of each channel with its state) (state shifted in place),
///   q and k heads of y L2-normalised, gates[g (NV) | beta (NV)] from a = src[a_off + h],
///   b = src[b_off + h].
/// The same bits as causal_conv({1, C, L, true}, ..., state, y) + l2norm_heads(y, 2*NK heads of DK)
/// + gdn_gates(src, a_off, b_off, ...). conv_w: [C][L] f32; state: [L-1][C] f32 at offset 0;
/// a_log, dt_bias: [NV] f32. y, state and gates must be distinct from every other operand; throws
/// wgllm::Error for aliasing or a bad shape.
void gdn_decode_prep(OpContext& o, const GdnPrepShape& s, const gpu::Buffer& src, uint32_t x_off, uint32_t a_off,
                     uint32_t b_off, const gpu::Buffer& conv_w, const gpu::Buffer& state, const gpu::Buffer& a_log,
                     const gpu::Buffer& dt_bias, F32Ref y, F32Ref gates);

/// Operands of gdn_decode (one decode token of a Gated DeltaNet layer's recurrent core).
struct GdnDecodeOperands {
  const gpu::Buffer& proj;                  // the layer's input-projection row (read only)
  uint32_t x_off, z_off, a_off, b_off;      // [q | k | v] (conv channels), z (NV*DV), a (NV), b (NV)
  const gpu::Buffer& conv_w;                // [C][L] f32, C = 2*NK*DK + NV*DV
  const gpu::Buffer& conv_state;            // [L-1][C] f32 at offset 0, shifted in place
  const gpu::Buffer& a_log;                 // [NV] f32
  const gpu::Buffer& dt_bias;               // [NV] f32
  const gpu::Buffer& norm_w;                // [DV] f32 (gated RMSNorm weight)
  const gpu::Buffer& state;                 // [NV][DK][DV] f32 at offset 0, updated in place
  F32Ref out;                               // NV*DV f32
  GdnPrepShape shape;                       // NK, NV, DK, DV, L, L2-norm eps
  float scale;                              // DK^-1/2
  float norm_eps;                           // gated RMSNorm eps
  bool tiled_v_heads = false;               // as GdnOperands::tiled_v_heads
};

/// One decode token (T = 1) of a Gated DeltaNet layer from its input projection to the gated
/// RMSNorm output, in one dispatch (KernelOptions::gdn_fuse_decode; wgsl/gdn_decode.wgsl: one
/// workgroup per key head, min(256, RS*R*DV rounded up to 64) threads, R = NV/NK, RS =
/// gdn_decode_row_split). With RS 1 the same bits in out, conv_state and state as gdn_decode_prep +
/// gdn_step_norm (and so as the six unfused dispatches); RS > 1 sums each state column's products in
/// RS row blocks (another order; conv_state still the same bits). proj, conv_w, a_log, dt_bias and
/// norm_w are read only; conv_state, state and out must be distinct from them and from each other.
/// Throws wgllm::Error for aliasing or a bad shape.
void gdn_decode(OpContext& o, const GdnDecodeOperands& a);
/// gdn_decode's threads per state column (wgsl/gdn_decode.wgsl RS): KernelOptions::gdn_decode_row_split,
/// 0 = adapter default (kGdnDecodeRowSplitGpu on hardware adapters, 1 on software ones), halved until it
/// divides DK and its partial sums fit the workgroup memory. 1: the bit-exact one-thread-per-column form.
/// Throws wgllm::Error for a set value other than 0, 1, 2 or 4.
uint32_t gdn_decode_row_split(const OpContext& o, const GdnPrepShape& s);
/// The hardware adapters' default of gdn_decode_row_split (switch record gdn_decode_row_split).
inline constexpr uint32_t kGdnDecodeRowSplitGpu = 2;
/// Whether gdn_decode's workgroup memory with one thread per column (q, k, v/o of one key head, gates,
/// two 64-wide reductions: 2*DK, (NV/NK)*DV, 2*NV/NK, 64 and 64 f32, each variable rounded up to 16
/// bytes as WebGPU counts it) fits WebGPU's default 16 KiB limit and NV/NK <= 64; models fall back to
/// the two-dispatch form otherwise.
bool gdn_decode_fits(const GdnPrepShape& s);

/// Floats of the work buffer gdn_chunked needs for T tokens with chunk size C.
uint64_t gdn_chunk_work_floats(uint32_t T, uint32_t C, uint32_t NV, uint32_t DK, uint32_t DV);
/// The chunk gdn_chunked uses for a forward of T tokens: KernelOptions::gdn_chunk_long when it is set
/// (non-zero) and T >= gdn_chunk_long_from, else gdn_chunk (a length-dependent chunk: the prep phase
/// grows with the chunk, the scan's sequential loop over chunks shrinks with it; H200 figures in the
/// switch records). Throws wgllm::Error for a chunk outside 1..256 (gdn_chunk_long: 0..256).
uint32_t gdn_chunk_for(const KernelOptions& k, uint32_t T);
/// The largest gdn_chunk_work_floats() over the chunks gdn_chunk_for() picks for forwards of up to
/// T tokens (the work buffer's size for a model's prefill chunk of T tokens).
uint64_t gdn_chunk_work_floats_max(const KernelOptions& k, uint32_t T, uint32_t NV, uint32_t DK, uint32_t DV);
/// Compiles gdn_chunked's pipelines for chunk C and key / value head dims DK, DV (prep and scan)
/// without dispatching: for variants the warm-up's short forwards never reach (gdn_chunk_long).
void gdn_compile_chunked(OpContext& o, uint32_t C, uint32_t DK, uint32_t DV);
/// Whether the prep phase's staged form (gdn_chunk_prep.wgsl STAGE, KernelOptions::gdn_prep_stage)
/// runs for chunk C and head dims DK, DV: asked for, DK and DV multiples of 4, and its workgroup
/// memory, 4 C (DK + max(DK, DV) + 2) + 4 C^2 + 8 C bytes, within `workgroup_bytes`.
bool gdn_prep_staged(bool asked, uint32_t C, uint32_t DK, uint32_t DV, uint64_t workgroup_bytes);
/// KernelOptions::gdn_scan_cols's default: 8 columns on hardware adapters, 0 (the one-column
/// scan) on software ones.
constexpr uint32_t kGdnScanColsAuto = 0xFFFFFFFFu;
/// The scan kernel's tile: `cols` state columns per workgroup (0: gdn_chunk_scan.wgsl, one column
/// per invocation), its threads, and whether the chunk's W / q / k rows are staged in workgroup
/// memory (gdn_chunk_scan_tiled.wgsl STAGE, KernelOptions::gdn_scan_stage).
struct GdnScanTile { uint32_t cols = 0, threads = 0; bool stage = false; };
/// The scan's requested columns on this adapter: KernelOptions::gdn_scan_cols, kGdnScanColsAuto
/// resolved (8 on hardware adapters, 0 on software ones).
uint32_t gdn_scan_cols_for(const OpContext& o);
/// Workgroup memory in bytes of the scan's W / q / k staging for chunk C and key head dim DK:
/// two arrays of C rows of DK / 4 + 1 vec4 (rows padded by one vec4).
uint64_t gdn_scan_stage_bytes(uint32_t C, uint32_t DK);
/// The tile gdn_chunked's scan uses for chunk C, key head dim DK and the requested columns
/// (0..64): halved until its workgroup memory,
/// 4 * ((DK + C) * cols + 2C) bytes, fits `workgroup_bytes` (maxComputeWorkgroupStorageSize);
/// {0, 0} when even one column does not fit (then the one-column-per-invocation kernel runs).
/// `stage` (KernelOptions::gdn_scan_stage) is kept when the tile exists, DK is a multiple of 4 and
/// the tile plus gdn_scan_stage_bytes(C, DK) fits too (the tile is never halved for it).
GdnScanTile gdn_scan_tile(uint32_t C, uint32_t DK, uint32_t cols, uint64_t workgroup_bytes, bool stage = false);
/// Chunkwise parallel prefill of T >= 1 tokens, chunk size gdn_chunk_for(o.opt, T) (1..256): two
/// dispatches, gdn_chunk_prep (all chunks and heads in parallel) then the scan (sequential over
/// chunks inside the kernel, parallel over heads and state columns): gdn_chunk_scan_tiled.wgsl,
/// a tile of o.opt.gdn_scan_cols columns of each head's state in workgroup memory per workgroup
/// (gdn_scan_tile; kGdnScanColsAuto: 8 on hardware adapters, 0 on software ones), or
/// gdn_chunk_scan.wgsl (one column per invocation, the state read from memory) when that is 0;
/// the tile's chunk rows staged in workgroup memory (gdn_scan_stage, loaded ahead of the barriers
/// with gdn_scan_prefetch) and the prep's too (gdn_prep_stage) where they fit;
/// both the same arithmetic in the same order, so the same bits in out and state (the tiled kernel
/// keeps the corrected values U in workgroup memory; the work buffer's U rows stay as the prep
/// wrote them). A partial last chunk uses only its real tokens. work: >= gdn_chunk_work_floats()
/// floats of scratch.
/// Twin: ref::gated_delta_rule_chunked (same order); equal to ref::gated_delta_rule up to rounding.
void gdn_chunked(OpContext& o, const GdnOperands& a, const gpu::Buffer& work);

}  // namespace wgllm::kernels
