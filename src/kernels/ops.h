// Op recording: each function records one kernel dispatch into a gpu::Recorder. Shapes are in
// elements; offsets and strides are in f32 elements (not bytes). Activations are f32 row-major
// [T, features]. CPU twins with the same semantics are in kernels/ref.h.
#pragma once
#include <cstdint>
#include <string>

#include "gpu/context.h"
#include "gpu/pipeline.h"
#include "gpu/recorder.h"
#include "kernels/weights.h"
#include "kernels/wgsl.h"

namespace wgllm::kernels {

/// KernelOptions::attention_decode_split_min's adapter default (see there).
constexpr uint32_t kDecodeSplitMinAuto = 0xFFFFFFFFu;
/// KernelOptions::attention_flash_lanes's adapter default (kernels::attention_flash_lanes_tile).
constexpr uint32_t kFlashLanesAuto = 0xFFFFFFFFu;

/// Performance switches of the kernels. Each field governs exactly one behaviour; none changes
/// results beyond floating-point summation order or the attended keys (documented in docs/FLAGS.md).
struct KernelOptions {
  // Generated from the switch table (kernels/switches.def: field, default, help, bit-exact; the
  // decision records in docs/FLAGS.md, `wgllm flags`).
#define WGLLM_SWITCH(scope, field, type, kind, def, ...) WGLLM_SWITCH_FIELD_##scope(field, type, def)
#define WGLLM_SWITCH_FIELD_KERNEL(field, type, def) type field = def;
#define WGLLM_SWITCH_FIELD_MODEL(field, type, def)
#define WGLLM_SWITCH_FIELD_APP(field, type, def)
#define WGLLM_SWITCH_FIELD_SESSION(field, type, def)
#define WGLLM_SWITCH_FIELD_WEB(field, type, def)
#include "kernels/switches.def"
#undef WGLLM_SWITCH_FIELD_KERNEL
#undef WGLLM_SWITCH_FIELD_MODEL
#undef WGLLM_SWITCH_FIELD_APP
#undef WGLLM_SWITCH_FIELD_SESSION
#undef WGLLM_SWITCH_FIELD_WEB
#undef WGLLM_SWITCH
};


/// Forwards of at most this many tokens (decode, speculative verification) take the fused
/// matrix-vector paths (KernelOptions::fuse_norm / fuse_silu); longer ones (prefill) the unfused
/// kernels. Equals the matmul's default tokens per workgroup, so such a forward is one token group.
constexpr uint32_t kFusedMaxTokens = 8;

/// Everything an op needs to record a dispatch.
struct OpContext {
  gpu::Context& ctx;
  gpu::PipelineCache& pipelines;
  gpu::Recorder& rec;
  KernelOptions opt;
};

/// A three-state switch whose adapter default is "on for GPUs" (0 off, 1 on, 2: on for hardware
/// adapters, off on software ones): matmul_tiled, matmul_int8, matvec_subgroup, matvec_int8.
inline bool on_for_gpus(const OpContext& o, uint8_t v) { return v == 1 || (v == 2 && !o.ctx.info().is_software()); }

/// Whether matvec.wgsl takes its int8-activation path (KernelOptions::matvec_int8) for weight W:
/// the switch is on, W is quantized (not F32) and its int8 activation blocks fit the adapter's
/// workgroup memory.
bool matvec_uses_int8(const OpContext& o, const GpuWeight& W);

/// The launch shape of matvec.wgsl for weight W (N rows of W.K / W.block blocks): `rows` output rows per workgroup, of
/// which each thread sums `rows_per_thread` (1, 2 or 4), `lanes` threads per row group (a power of
/// two), `subgroup` = the row reduction uses subgroupAdd. KernelOptions::matvec_rows_per_workgroup /
/// matvec_rows_per_thread / matvec_lanes override the by-shape defaults; `tuple`: rows an
/// epilogue needs in one workgroup (2: the fused QKV's rotation pairs, 3: matmul_conv_in's triples;
/// rows made a multiple). Rows per workgroup are rounded up to whole row groups and reduced to
/// the adapter's workgroup size. Throws wgllm::Error for an invalid setting (lanes not a power of
/// two, rows per thread not 1, 2 or 4, a grid over the adapter's limit).
struct MatvecShape {
  uint32_t rows = 4, rows_per_thread = 1, lanes = 32;
  bool subgroup = false;
};
MatvecShape matvec_shape(const OpContext& o, const GpuWeight& W, uint32_t tuple = 1);

/// True when forwards of T <= kFusedMaxTokens tokens take matvec.wgsl (KernelOptions::matvec_subgroup
/// resolved for the adapter: 2 = on for hardware GPUs, off on software adapters).
bool matvec_enabled(const OpContext& o);
/// The largest forward (tokens) kernels::matmul runs on matvec.wgsl: KernelOptions::
/// matvec_max_tokens (at least kFusedMaxTokens) where matvec_enabled(), else 0; larger forwards take
/// the tiled kernel (where enabled) or matmul.wgsl.
uint32_t matvec_max_tokens(const OpContext& o);

/// A buffer range holding f32 values: buf + element offset.
struct F32Ref {
  const gpu::Buffer& buf;
  uint32_t off = 0;
};

/// Every op declares its traffic (bytes read/written by category, see gpu::TrafficBytes) to the
/// recorder right before its dispatch, for `wgllm bench --traffic`.
/// y[t, n] (+)= sum_k W[n, k] x[t, k], t < T. x rows start at x.off + t * x_stride (x_stride,
/// x.off multiples of 4), y rows at y.off + t * y_stride. accumulate: fused residual add.
void matmul(OpContext& o, const GpuWeight& W, F32Ref x, uint32_t x_stride, F32Ref y,
            uint32_t y_stride, uint32_t T, bool accumulate, const char* label = "matmul",
            gpu::Traffic y_kind = gpu::Traffic::Activations);

/// As matmul() on the RMS-normalised rows of x: y[t, n] (+)= sum_k W[n, k] * h[t, k] with
/// h[t, k] = (x[t, k] * inv[t]) * norm_w[k], inv[t] = 1 / sqrt(sum_k x[t, k]^2 / K + eps), i.e.
/// rmsnorm() (same summation order, shared WGSL) followed by matmul() in one dispatch:
/// bit-identical to that pair. norm_w: [W.K] f32. Each workgroup recomputes inv[t] (K reads per
/// token): meant for T <= kFusedMaxTokens. Throws wgllm::Error for T > kFusedMaxTokens.
void matmul_norm(OpContext& o, const GpuWeight& W, F32Ref x, uint32_t x_stride, const gpu::Buffer& norm_w, float eps,
                 F32Ref y, uint32_t y_stride, uint32_t T, bool accumulate, const char* label = "matmul",
                 gpu::Traffic y_kind = gpu::Traffic::Activations);

/// As matmul() on SwiGLU activations: y[t, n] (+)= sum_k W[n, k] * silu(g[t, k]) * u[t, k] with
/// g rows at src[g_off + t * in_stride], u rows at src[u_off + t * in_stride] (W.K elements each),
/// silu(a) = a / (1 + exp(-a)): silu_mul() followed by matmul() in one dispatch, bit-identical to
/// that pair. Throws wgllm::Error for T > kFusedMaxTokens or u_off < g_off.
void matmul_silu(OpContext& o, const GpuWeight& W, const gpu::Buffer& src, uint32_t g_off, uint32_t u_off,
                 uint32_t in_stride, F32Ref y, uint32_t y_stride, uint32_t T, bool accumulate,
                 const char* label = "matmul");

/// As matmul() on gated activations (Qwen3.5's gated attention output, decode fusion
/// KernelOptions::fuse_attn_gate): y[t, n] (+)= sum_k W[n, k] * (x[t, k] * sigmoid(gate[t, k])), the gate
/// of x's element i (i = x.off + t * x_stride + k) at g[i + g_off]: sigmoid_gate() followed by
/// matmul() in one dispatch, bit-identical to that pair. g must be a buffer other than x's and y's.
/// Throws wgllm::Error for T > kFusedMaxTokens.
void matmul_gate(OpContext& o, const GpuWeight& W, F32Ref x, uint32_t x_stride, const gpu::Buffer& g, uint32_t g_off,
                 F32Ref y, uint32_t y_stride, uint32_t T, bool accumulate, const char* label = "matmul");

/// The RoPE + KV-cache store epilogue of matmul_qkv_rope_kv: the projection's rows are
/// [q_rows query | kv_rows key | kv_rows value] (whole heads of HD); first rot dims of each q and k
/// head rotated (neox pair layout) at positions pos0 + t with `table` (kernels::rope_table).
/// A projection whose q / k / v matrices differ in weight type is recorded as one dispatch per part
/// (a run of matrices of one type, stacked): W's row 0 is row `row0` of [q | k | v] (a multiple of
/// HD) and y the output at that row. `bias` (Qwen2's Q/K/V biases, [q_rows + 2 kv_rows] f32,
/// indexed by the row of [q | k | v]) is added to each row before the rotation, as add_bias() does.
struct QkvRopeKv {
  uint32_t q_rows = 0, kv_rows = 0, HD = 0, rot = 0, pos0 = 0;
  bool neox = false;
  const gpu::Buffer* table = nullptr;
  gpu::Binding kc;  // key cache rows of kv_rows floats
  gpu::Binding vc;  // value cache rows of kv_rows floats
  uint32_t row0 = 0;
  const gpu::Buffer* bias = nullptr;
};

/// The fused QKV projection with RoPE and the KV-cache store in its epilogue (decode fusion,
/// KernelOptions::fuse_qkv_rope_kv): matmul() (or matmul_norm() when norm_w is given) into y,
/// then the q and k rows of y rotated in place and the k and v rows written to the cache rows
/// pos0 .. pos0+T-1, in one dispatch; bit-identical to matmul, add_bias (with r.bias), rope (q),
/// rope (k), kv_store. Output rows are mapped to workgroups so that each rotation pair is in one
/// workgroup (an odd rows-per-workgroup setting is rounded up to even). Throws wgllm::Error for T >
/// kFusedMaxTokens or rows [r.row0, r.row0 + W.N) that are not whole heads of an even HD within
/// [q | k | v].
void matmul_qkv_rope_kv(OpContext& o, const GpuWeight& W, F32Ref x, uint32_t x_stride, const gpu::Buffer* norm_w, float eps,
                        F32Ref y, uint32_t y_stride, uint32_t T, const QkvRopeKv& r, const char* label = "attn_qkv");

/// True when the two-part form below may record W1 and W2 (KernelOptions::fuse_qkv_formats,
/// --fuse-qkv-formats): T <= kFusedMaxTokens on the matrix-vector kernel with int8 activations for
/// both parts (matvec_uses_int8) and the larger workgroup memory fitting, W1 of 32-element blocks
/// (Q4_0, Q4_1, Q4_K, Q8_0), W2 in FMT_Q8_F32 (Q6_K widened: --q6k-packed off), the same K, no
/// --matvec-prefetch, and both parts' own launch shapes (matvec_shape, rows in pairs) with the same
/// lanes and reduction, so that every row keeps the summation order of its part's own launch; the
/// adapter allows 10 storage buffers per stage.
bool matmul_qkv_formats_applies(const OpContext& o, const GpuWeight& W1, const GpuWeight& W2, uint32_t T);
/// matmul_qkv_rope_kv of a projection in two parts of different weight types in ONE dispatch
/// (matvec.wgsl P2; Q4_K_M files keep V in Q6_K in half the layers): W1's rows start at r.row0 of
/// [q | k | v] and y, W2's follow them (r.row0 + W1.N). Bit-identical to matmul_qkv_rope_kv of W1
/// (row0) then of W2 (row0 + W1.N) (kernels/fused_ops_test.cpp). Throws wgllm::Error when
/// !matmul_qkv_formats_applies(o, W1, W2, T) or for the shapes matmul_qkv_rope_kv rejects.
void matmul_qkv_rope_kv(OpContext& o, const GpuWeight& W1, const GpuWeight& W2, F32Ref x, uint32_t x_stride,
                        const gpu::Buffer* norm_w, float eps, F32Ref y, uint32_t y_stride, uint32_t T, const QkvRopeKv& r,
                        const char* label = "attn_qkv");

/// The causal conv of matmul_conv_in's epilogue (LFM2 ShortConv; transformers
/// models/lfm2/modeling_lfm2.py Lfm2ShortConv.slow_forward): C channels, kernel of L taps, the
/// depthwise weights [C][L] f32 (`weight`) and the rolling state [L - 1][C] f32 (channel index
/// contiguous) of the previous gated inputs, oldest row first (`state`, at float offset state_off of its binding).
struct ConvIn {
  uint32_t C = 0, L = 0;
  const gpu::Buffer* weight = nullptr;
  gpu::Binding state;
  uint32_t state_off = 0;
};
/// True when matmul_conv_in may be recorded for W and a forward of T tokens: KernelOptions::
/// fuse_conv_in, T == 1 (the next token's conv needs this one's), the matrix-vector kernel
/// (matvec_enabled) and a launch shape with rows in triples that fits the adapter (three row
/// groups of matvec_shape's lanes in one workgroup).
bool matmul_conv_in_applies(const OpContext& o, const GpuWeight& W, uint32_t T);
/// The ShortConv in-projection of ONE token with its conv in the epilogue (--fuse-conv-in):
/// matmul() (or matmul_norm() when norm_w is given) of W ([B | C | x] rows, 3 x c.C) and x, then per
/// channel u = x_c * B_c, a = sum_j weight[c][j] * [state rows, u][j], y[c] = a * C_c (y: C floats
/// at y.off) and the state shifted by one row (u the newest), as causal_conv() with gates in and out
/// (fused state update) does: bit-identical to matmul + causal_conv (kernels/fused_ops_test.cpp).
/// The rows are computed in triples (B_c, C_c, x_c) of one workgroup (matvec_shape tuple 3).
/// Throws Error when !matmul_conv_in_applies(o, W, 1) or the shapes disagree.
void matmul_conv_in(OpContext& o, const GpuWeight& W, F32Ref x, const gpu::Buffer* norm_w, float eps, F32Ref y,
                    const ConvIn& c, const char* label = "shortconv_in_proj");

/// rope() of the Hq query heads, rope() of the Hkv key heads and kv_store() in one dispatch
/// (rope_kv.wgsl), bit-identical to those three for the cache and the queries. q rows at
/// src[q_off + t * q_stride] (rotated in place); k and v rows at src[k_off / v_off + t * kv_stride],
/// kv_dim = Hkv * HD elements each: k rotated into the key cache (src's k rows are left
/// unrotated), v copied into the value cache, cache rows pos0 .. pos0+T-1.
void rope_kv_store(OpContext& o, const gpu::Buffer& src, uint32_t q_off, uint32_t q_stride, uint32_t k_off, uint32_t v_off,
                   uint32_t kv_stride, uint32_t T, uint32_t Hq, uint32_t Hkv, uint32_t HD, uint32_t rot, uint32_t pos0,
                   const gpu::Buffer& table, bool neox, gpu::Binding kc, gpu::Binding vc);

/// rope_kv_store() for n tokens named by a table (continuous batching, KernelOptions::batch_rope_kv):
/// token t is the entry rows[rows_off + t] (vec4<u32>, rows_off in entries) = (src row r, position,
/// cache row, -): q at src[q_off + r * q_stride] rotated in place, k and v at src[k_off / v_off + r *
/// kv_stride] rotated / copied into that cache row of kc / vc. The rows of several sequences whose
/// caches lie in one buffer (a KV pool) in one dispatch; every value bit-identical to rope_kv_store().
void rope_kv_store_rows(OpContext& o, const gpu::Buffer& src, uint32_t q_off, uint32_t q_stride, uint32_t k_off,
                        uint32_t v_off, uint32_t kv_stride, uint32_t Hq, uint32_t Hkv, uint32_t HD, uint32_t rot,
                        const gpu::Buffer& table, bool neox, gpu::Binding kc, gpu::Binding vc, const gpu::Buffer& rows,
                        uint32_t rows_off, uint32_t n);

/// y[t, :] = dequant(table row tokens[t] - row0) for the ids in [row0, row0 + table.N); tokens: u32
/// buffer of T ids; y: [T, K]. A row whose id lies outside the table's range is left as it is: a
/// table split into row blocks (one storage binding each, models/gpu_common.h GpuModel::embedding)
/// is one call per block, each writing the rows of its ids. Ids are checked against the vocabulary
/// before they reach the device (the device's own argmax gives ids < vocab).
void embed(OpContext& o, const GpuWeight& table, const gpu::Buffer& tokens, uint32_t T, F32Ref y, uint32_t row0 = 0);

/// RMSNorm over rows of D: y[t] = x[t] / sqrt(mean(x[t]^2) + eps) * w.
void rmsnorm(OpContext& o, F32Ref x, uint32_t x_stride, const gpu::Buffer& w, F32Ref y,
             uint32_t y_stride, uint32_t T, uint32_t D, float eps, const char* label = "rmsnorm");

/// In-place RoPE on H heads of head_dim HD (first rot dims rotated) for T tokens from pos0.
/// table: [max_pos][rot/2] (cos, sin) pairs from rope_table(); neox selects the pair layout.
void rope(OpContext& o, F32Ref x, uint32_t stride, uint32_t T, uint32_t H, uint32_t HD,
          uint32_t rot, uint32_t pos0, const gpu::Buffer& table, bool neox, const char* label = "rope");

/// Writes T rows of K and V (kv_dim each, at src offsets k_off/v_off with row stride) into the
/// cache rows pos0 .. pos0+T-1.
void kv_store(OpContext& o, const gpu::Buffer& src, uint32_t k_off, uint32_t v_off, uint32_t stride,
              uint32_t T, uint32_t kv_dim, uint32_t pos0, gpu::Binding kc, gpu::Binding vc);

struct SparseScratch;      // kernels/sparse_attention.h
struct SparseMeansCache;  // kernels/sparse_attention.h

struct AttentionShape {
  uint32_t T, pos0, Hq, Hkv, HD;
  float scale;
  /// Sliding-window attention (Gemma 3's local layers; Beltagy et al. 2020): token t at position
  /// p = pos0 + t sees keys [p - window + 1, p] only (pos_q - pos_k < window); 0 = every key <= p.
  uint32_t window = 0;
};
/// Causal GQA attention of T queries (rows q.off + t*q_stride, heads contiguous) over cache rows
/// [0, pos0 + t] (with s.window: [max(0, pos0 + t + 1 - window), pos0 + t]; the kernels start at
/// the window's first key, they do not mask a dense pass); output rows o.off + t*o_stride.
/// A windowed shape never takes the sparse kernel (the window bounds its cost), and the flash kernel
/// only with KernelOptions::attention_flash_window.
/// With `split_scratch` (see attention_split_floats), a forward whose heads x tokens would leave the
/// GPU idle splits each row's keys over workgroups and merges the partials with a second dispatch
/// (flash-decoding): KernelOptions::attention_decode_split for the one-row kernels (decode, or
/// any T when the multi-query kernels are off), attention_prefill_split for the tiled and flash
/// kernels (T > 1).
/// With `sparse` and sparse_attention_used(o.opt, s) (KernelOptions::sparse_attn, context at least
/// sparse_threshold keys) records the gathered block-sparse path instead (kernels/sparse_attention.h);
/// otherwise `sparse` is ignored and the dense kernels below run unchanged.
/// `means_cache` (the sequence's SparseMeansCache of this layer, or null) is invalidated from
/// pos0 on every call, sparse or dense, and used by the sparse path (kernels/sparse_attention.h).
/// `defer` (the decode fusion KernelOptions::fuse_attn_combine; the caller checked
/// attention_combine_fusable() for its output projection): when the keys were split, the merge is
/// not recorded; *defer names the partials, and the caller must record matmul_combine() next
/// instead of reading `out`. Without a split (or on the sparse path) *defer is cleared and `out`
/// holds the output as usual.
struct AttentionPartials;
void attention(OpContext& o, const AttentionShape& s, F32Ref q, uint32_t q_stride,
               gpu::Binding kc, gpu::Binding vc, F32Ref out, uint32_t o_stride,
               const gpu::Buffer* split_scratch = nullptr, SparseScratch* sparse = nullptr,
               SparseMeansCache* means_cache = nullptr, AttentionPartials* defer = nullptr);

/// The operands of attention_decode_qk_norm: the raw QKV projection of one token in `src` (f32; the
/// Hq query heads at q_off, the Hkv key heads at k_off and value heads at v_off, HD floats each,
/// heads contiguous), the per-head RMSNorm weights of q and k ([HD] f32), the RoPE table
/// (rope_table.h: [position][rot/2] (cos, sin)), the rotated dims `rot` (even, <= HD), the pairing
/// (neox: (i, i + rot/2), else (2i, 2i+1)) and the norm's epsilon.
struct DecodeQkNorm {
  const gpu::Buffer* src = nullptr;
  uint32_t q_off = 0, k_off = 0, v_off = 0;
  const gpu::Buffer *q_norm = nullptr, *k_norm = nullptr, *table = nullptr;
  uint32_t rot = 0;
  bool neox = false;
  float eps = 1e-6f;
};
/// --fused-decode (KernelOptions::fused_decode): one-token decode attention (s.T == 1, one sequence)
/// whose launch also does qk_norm_rope_kv_store's work: each workgroup normalizes and rotates its
/// query heads in workgroup memory, and the one whose keys include s.pos0 writes the normalized,
/// rotated key row and the value row at cache row s.pos0 before reading it (attention_decode.wgsl
/// QKN). One dispatch instead of two (plus the split merge, as attention()). `src` is not modified.
/// Not bit-identical to qk_norm_rope_kv_store + attention (the sums of squares are reduced in
/// another order; kernels/fused_ops_test.cpp bounds the difference). Requires
/// attention_decode_applies(o, s); throws Error otherwise. `means_cache` as attention()'s; the
/// sparse path is the caller's to rule out (sparse_attention_used).
void attention_decode_qk_norm(OpContext& o, const AttentionShape& s, const DecodeQkNorm& n, gpu::Binding kc,
                              gpu::Binding vc, F32Ref out, uint32_t o_stride, const gpu::Buffer* split_scratch = nullptr,
                              SparseMeansCache* means_cache = nullptr, AttentionPartials* defer = nullptr);

/// The split-K partials of an attention forward left unmerged (attention()'s `defer`): in `scratch`,
/// for token t < T, query head h < Hq and split s < n_split, the record of HD + 2 floats at
/// ((t * Hq + h) * n_split + s) * (HD + 2): the split's score maximum m_s, its softmax denominator
/// l_s and its unnormalised output acc_s[HD] (attention_combine.wgsl). scratch == nullptr: nothing
/// deferred.
struct AttentionPartials {
  const gpu::Buffer* scratch = nullptr;
  uint32_t T = 0, Hq = 0, HD = 0, n_split = 0;
};

/// True when the output projection W (K = heads x HD columns) of a forward of T tokens can merge
/// the attention partials in its activation load (matmul_combine): KernelOptions::fuse_attn_combine,
/// T <= kFusedMaxTokens, the matrix-vector kernel matvec.wgsl in use (matvec_enabled()), and its
/// workgroup memory with the per-head split weights (heads x (kSplitMax + 1) floats) and the merged
/// row (K floats) within the
/// adapter's limit, at the int8 setting the unfused projection would use (so results match).
bool attention_combine_fusable(const OpContext& o, const GpuWeight& W, uint32_t T, uint32_t HD);

/// As attention_combine (the merge of the split-K partials, see AttentionPartials) followed by
/// matmul() of the merged T x (Hq * HD) attention output, in one matvec.wgsl dispatch (COMBINE
/// prologue, every workgroup merging the heads itself with the merge's expressions and order):
/// bit-identical to the two dispatches. Throws wgllm::Error when !attention_combine_fusable(o, W,
/// a.T, a.HD), a.scratch is null, W.K != a.Hq * a.HD or a.n_split exceeds the split limit.
void matmul_combine(OpContext& o, const GpuWeight& W, const AttentionPartials& a, F32Ref y, uint32_t y_stride,
                    bool accumulate, const char* label = "attn_output");
/// With KernelOptions::attention_tiled_prefill and T > 1, records attention_tiled.wgsl instead: one
/// workgroup per (tile of (token, query head) rows of one KV head, KV head), each K/V tile loaded
/// once into workgroup memory for all the tile's rows (and split over keys as above when there are
/// few tiles). Same results up to summation order. T = 1 (decode) always takes the per-row kernel.
/// With KernelOptions::attention_flash (attention_flash_used()), T > 1 records attention_flash.wgsl
/// (register-tiled flash attention, same results up to summation order) before either of the above;
/// so does a short chunk over a long cache with KernelOptions::attention_chunk (attention_chunk_used()).
/// Throws wgllm::Error unless HD % 4 == 0, HD <= 256 and Hkv divides Hq.
/// f32 elements the split-K scratch needs for up to max_T query tokens of Hq heads of HD, for both
/// kernels (the tiled one at KernelOptions::attention_tiled_split_target = tiled_split_target; with
/// a smaller scratch it splits into fewer parts).
uint64_t attention_split_floats(uint32_t max_T, uint32_t Hq, uint32_t HD, uint32_t tiled_split_target = 2048);
/// True when a forward of T tokens with this shape records attention_decode.wgsl (KernelOptions::
/// attention_decode_gqa on for this adapter, T = 1, and the group's workgroup memory fits 16 KiB).
bool attention_decode_applies(const OpContext& o, const AttentionShape& s);
/// The key split of a decode attention (T = 1) of shape s (attention_decode.wgsl): n_split parts
/// of split_len keys ({1, keys seen} without a split: no scratch, KernelOptions::attention_decode_split
/// off, or at most attention_decode_split_min keys).
struct DecodeSplit {
  uint32_t n_split = 1, split_len = 0;
};
DecodeSplit attention_decode_split(const OpContext& o, const AttentionShape& s, const gpu::Buffer* split_scratch);
/// Continuous batching (KernelOptions::batch_decode_attn): the one-token decode attentions of n
/// sequences whose caches are rows of kc / vc [rows, Hkv * HD] f32 (a KV pool) in one launch of
/// attention_decode.wgsl MULTI. Sequence j is the entry tab[tab_off + j] (vec4<u32>, tab_off in
/// entries): (row, position, cache base row, split length), its query at q[q.off + row * q_stride]
/// (Hq * HD f32), its keys at cache rows base + [0, position], its output at out[out.off + row *
/// o_stride]. The split length must be attention_decode_split()'s for that sequence alone (then each
/// output is bit-identical to attention() of that sequence alone); max_split = the largest n_split:
/// with max_split > 1 the partials go to split_scratch (4 * n * Hq * max_split * (HD + 2) bytes) and
/// one attention_combine.wgsl ROWS launch merges them. s: Hq, Hkv, HD, scale (T, pos0 unused;
/// window 0); keys: the cache rows read in all (traffic). Returns the dispatches recorded (1 or 2).
/// Throws wgllm::Error if the decode kernel does not apply to s, for a window, max_split outside
/// 1..32 or a scratch too small.
uint32_t attention_decode_batch(OpContext& o, const AttentionShape& s, F32Ref q, uint32_t q_stride, gpu::Binding kc,
                                gpu::Binding vc, F32Ref out, uint32_t o_stride, const gpu::Buffer& tab, uint32_t tab_off,
                                uint32_t n, uint32_t max_split, uint64_t keys, gpu::Buffer* split_scratch);

/// Tile of attention_flash.wgsl for head dim HD: BR (token, head) rows x BC keys per workgroup,
/// RM rows per thread, TX threads per row group; kv_shared: V shares K's workgroup array.
/// lanes: the tile of attention_flash_sg.wgsl instead (KernelOptions::attention_flash_lanes): the
/// rows' queries in registers, each row's head dim split over TX lanes of a subgroup, JK keys per
/// softmax group, K and V in separate arrays (kv_shared false).
struct FlashTile {
  uint32_t br = 0, bc = 0, rm = 0, tx = 0;
  bool kv_shared = false;
  bool lanes = false;
  uint32_t jk = 0;
  uint32_t threads() const { return tx * (br / rm); }
  uint64_t workgroup_bytes(uint32_t HD) const;
};
/// The flash tile for HD on this adapter: the first of a list that fits its workgroup memory (48 KiB:
/// HD <= 64: 64 rows x 32 keys, 4 rows x 4 keys per thread, 128 threads; HD <= 128: 32 x 32, 2 x 4,
/// V sharing K's array; HD <= 256 with KernelOptions::attention_flash_wide: 16 x 16, 2 x 2, 64 threads,
/// V sharing K's array; 32 KiB (lavapipe): 32 x 32 / 4 x 4 and 16 x 32 / 2 x 4, 16 x 16 up to HD 224 and
/// 8 x 16 at 256),
/// or bc = 0 when the kernel does not cover HD (HD % 32 != 0, HD > 256, or HD > 128 without
/// attention_flash_wide) or the adapter's
/// maxComputeWorkgroupStorageSize / maxComputeInvocationsPerWorkgroup are too small.
FlashTile attention_flash_tile(const OpContext& o, uint32_t HD);
/// The lanes tile (attention_flash_sg.wgsl) for HD on this adapter, or bc = 0 where it does not apply:
/// KernelOptions::attention_flash_lanes N (kFlashLanesAuto: 8 for HD >= 128 on hardware adapters, else 0)
/// = 0 (off), an adapter without subgroups or whose smallest
/// subgroup is below N, HD / 4 not a multiple of N, or no tile fitting the adapter's limits. Rows per
/// thread RM (KernelOptions::attention_flash_lanes_rows, 0:) the largest of 4, 2, 1 with RM * HD / N <= 64
/// (query floats per thread; as many in the accumulators); NT = KernelOptions::attention_flash_lanes_threads threads (0: 256), BR = RM * NT / N rows;
/// BC: the largest of 32, 16, 8 keys whose K and V tiles (2 * BC * (HD + 4) * 4 bytes) fit the
/// workgroup memory; JK = min(BC, KernelOptions::attention_flash_lanes_keys, or 0: 32 / RM) keys per
/// softmax group (4 on software adapters, whose compilers slow down on the longer generated code).
FlashTile attention_flash_lanes_tile(const OpContext& o, uint32_t HD);
/// The tile a flash forward at head dim HD takes: attention_flash_lanes_tile() where it applies,
/// else attention_flash_tile().
FlashTile attention_flash_pick(const OpContext& o, uint32_t HD);
/// attention_flash_sg.wgsl (lanes tile t, head dim HD) with its generated register code
/// (kernels/attention_flash.cpp), specialised with d (attention_flash_defines()).
std::string attention_flash_sg_wgsl(const FlashTile& t, uint32_t HD, const Defines& d);
/// attention_flash.wgsl specialised with d (from attention_flash_defines() for tile t and head dim
/// HD): with UNROLL 1 its register tile is first written out as straight-line code
/// (kernels/attention_flash.cpp); with UNROLL 0 the loop form is specialised as stored.
std::string attention_flash_wgsl(const FlashTile& t, uint32_t HD, const Defines& d);
/// Whether attention_flash.wgsl takes its generated register tile (UNROLL 1) rather than the loop
/// form (same bits): KernelOptions::attention_flash_unroll 1, or 2 (default) on every adapter but a
/// software one other than llvmpipe (lavapipe): SwiftShader's Subzero compiler exhausts memory on the
/// generated form (> 8 GB after 120 s, 2026-12-02), and an unknown CPU adapter may well too.
bool attention_flash_unrolled(const OpContext& o);
/// Whether the flash kernel of tile ft loads the next key tile during the current one (PF 1):
/// KernelOptions::attention_flash_prefetch, for tiles whose K (V) tile is a whole number of vec4
/// per thread, at most 16 (attention_flash.wgsl) or 8 (attention_flash_sg.wgsl, whose K and V
/// registers are live together).
bool attention_flash_prefetch(const OpContext& o, const FlashTile& ft, uint32_t HD);
/// attention_flash.wgsl's defines for tile ft, head dim HD, the key split (SPLIT), the gathered
/// sparse form (GATHER) and the sliding window (WINDOW), with UNROLL from attention_flash_unrolled()
/// and PF from attention_flash_prefetch(); for a lanes tile attention_flash_sg.wgsl's (HD4 BC JK RM
/// TX TY PF SPLIT WINDOW). Throws Error for gather with window, or gather with a lanes tile.
Defines attention_flash_defines(const OpContext& o, const FlashTile& ft, uint32_t HD, bool split, bool gather,
                                bool window = false);
/// Longest forward (tokens) that KernelOptions::attention_chunk treats as a short chunk.
inline constexpr uint32_t kAttnChunkMaxTokens = 128;
/// Whether a forward is a short chunk over a long cache that KernelOptions::attention_chunk sends to
/// the flash kernel (attention_flash.wgsl, or attention_flash_sg.wgsl where attention_flash_pick() takes
/// it): switch on (1 only: 2, the adapter default, is off everywhere),
/// 2 <= T <= kAttnChunkMaxTokens, pos0 >= T (at least as many cached keys as new ones), no sliding
/// window, attention_flash_tile(HD) valid. Prefills from an empty cache (pos0 = 0) never qualify.
bool attention_chunk_used(const OpContext& o, const AttentionShape& s);
/// Creates the key-split pipeline of the multi-query kernel that a long prefill from an empty cache
/// records (attention_tiled or the flash kernel attention_flash_pick() takes, SPLIT 1) for head dim HD, if any: the warm-up's
/// forwards past 64 keys are short chunks, which KernelOptions::attention_chunk sends to the flash
/// kernel, so without this the first long prompt would compile it (runtime/warmup.cpp).
void attention_compile_prefill_split(OpContext& o, uint32_t HD);
/// Whether kernels::attention records a flash kernel for this forward (attention_flash.wgsl, or
/// attention_flash_sg.wgsl where attention_flash_pick() takes the lanes tile): T > 1, no window (or
/// KernelOptions::attention_flash_window), attention_flash_tile(HD) valid (so the lanes kernel too runs
/// only where the Q-block tile would: head dims multiples of 32, > 128 with --attn-flash-wide-heads) and
/// KernelOptions::attention_flash on (1, or 2: every adapter); or attention_chunk_used().
bool attention_flash_used(const OpContext& o, const AttentionShape& s);

/// y[t, i] = silu(src[g_off + t*in_stride + i]) * src[u_off + t*in_stride + i], y: [T, F].
void silu_mul(OpContext& o, const gpu::Buffer& src, uint32_t g_off, uint32_t u_off, uint32_t in_stride,
              uint32_t T, uint32_t F, F32Ref y);

/// y[y.off + t*stride + i] += b[i] for t < T, i < N (a Linear bias broadcast over T rows; b: [N] f32;
/// with T = 1 and N = rows x width, a residual add). N <= 65535 * 64, T <= 65535.
void add_bias(OpContext& o, const gpu::Buffer& b, uint32_t N, F32Ref y, uint32_t stride, uint32_t T, const char* label);

/// y[t, i] = gelu_tanh(src[g_off + t*in_stride + i]) * src[u_off + t*in_stride + i], y: [T, F]
/// (GeGLU, Gemma 3; twin ref::gelu_tanh).
void gelu_mul(OpContext& o, const gpu::Buffer& src, uint32_t g_off, uint32_t u_off, uint32_t in_stride,
              uint32_t T, uint32_t F, F32Ref y);
/// x[x.off + i] *= s for i < n, in place.
void scale(OpContext& o, F32Ref x, uint32_t n, float s, const char* label);

/// The most workgroups argmax() splits the logits over (--argmax-workgroups).
inline constexpr uint32_t kArgmaxMaxGroups = 256;
/// Bytes an argmax() output buffer needs for every setting: the id (u32) and, when the scan is split
/// over G workgroups, G (value, index) candidates after it.
inline constexpr uint64_t argmax_buffer_bytes() { return 4ull * (1 + 2 * kArgmaxMaxGroups); }
/// The workgroups argmax() scans n logits with: KernelOptions::argmax_workgroups, else (0) one per
/// 2048 logits on hardware adapters and 1 on software ones; at most kArgmaxMaxGroups and n / 256.
uint32_t argmax_workgroups(const OpContext& o, uint32_t n);
/// out[0] = argmax(x[off .. off+n)) as u32 (lowest index on ties, NaN never wins; 0 when every value
/// is NaN), the same id for every argmax_workgroups(): one dispatch when it is 1, else G workgroups
/// write per-chunk candidates to out[1 ..] and a second dispatch reduces them (argmax.wgsl). Throws
/// wgllm::Error when `out` is smaller than those candidates need (argmax_buffer_bytes() always suffices).
void argmax(OpContext& o, F32Ref x, uint32_t n, const gpu::Buffer& out);

/// Optional f32 row operand: rows at buf[off + t * stride]; absent when buf is null.
struct F32Rows {
  const gpu::Buffer* buf = nullptr;
  uint32_t off = 0, stride = 0;
};

/// Forwards of at most this many tokens take causal_conv's one-dispatch form (fuse_conv_state):
/// one invocation per channel loops over the tokens (decode steps, speculative/short turns).
inline constexpr uint32_t kFusedConvMaxTokens = 8;

/// Shape and variant of causal_conv.
struct CausalConvShape {
  uint32_t T = 1;     // new rows (tokens); 1 = decode step, > 1 = prefill chunk
  uint32_t C = 0;     // channels (depthwise: one filter per channel)
  uint32_t L = 0;     // kernel width, 2 <= L <= 64; the state keeps the last L-1 input rows
  bool silu = false;  // SiLU after conv (+ bias), before the output gate (Gated DeltaNet conv1d)
};

/// Causal depthwise conv1d with a rolling per-sequence state, for prefill (T > 1) and decode
/// (T = 1) alike: LFM2 ShortConv (transformers models/lfm2/modeling_lfm2.py, Lfm2ShortConv:
/// y = C * conv(B * x), gate_in = B, gate_out = C, no SiLU) and the Mamba-style conv1d over q,k,v
/// of Gated DeltaNet (models/qwen3_next/modeling_qwen3_next.py: silu(conv(qkv)), no gates).
/// For t < T, c < C, with u[t,c] = x[t,c] * gate_in[t,c] (1 without gate_in) and the extended
/// sequence E = [state rows 0..L-2 (oldest first); u rows 0..T-1]:
///   a       = sum_{j=0..L-1} w[c*L + j] * E[t + j, c]  (+ bias[c])
///   y[t,c]  = (silu ? a / (1 + exp(-a)) : a) * gate_out[t,c] (1 without gate_out)
/// and afterwards state rows i = 0..L-2 hold E[T + i] (the last L-1 gated inputs), so that a later
/// call continues the sequence exactly (prefill(T) == prefill(T-k) + prefill(k)).
///   x:     rows x.off + t * x_stride, C channels, f32.
///   w:     [C][L] f32 (transformers Conv1d weight [C, 1, L] / GGUF {L, C}: same memory order).
///   bias:  [C] f32, or nullptr.
///   state: [L-1][C] f32 at state.off; all zeros for an empty sequence (read, then overwritten).
///   y:     rows y.off + t * y_stride, f32.
/// x, gate_in and gate_out may share one buffer (all bound read-only, e.g. LFM2's in_proj output
/// [B | C | x]); y and state must be buffers distinct from every other operand (WebGPU forbids a
/// read_write binding aliasing another binding). Records two dispatches: the conv (one invocation
/// per channel and row) then the state update (one per channel); with o.opt.fuse_conv_state and
/// T <= kFusedConvMaxTokens one dispatch (one invocation per channel does both; same bits).
/// Throws wgllm::Error for L out of range, T == 0 or an aliased y/state. CPU twin: ref::causal_conv.
void causal_conv(OpContext& o, const CausalConvShape& s, F32Ref x, uint32_t x_stride, F32Rows gate_in,
                 F32Rows gate_out, const gpu::Buffer& w, const gpu::Buffer* bias, F32Ref state, F32Ref y,
                 uint32_t y_stride, const char* label = "causal_conv");

}  // namespace wgllm::kernels
