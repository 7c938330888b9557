// defines: ROWS RPT R2 R4 LANES SUBGROUP ADD BE BE16 BE32 NORM ROPE I8 XBLK PF B_W4 P2 B_W2?
// matvec: the matrix-vector kernel for forwards of T <= 8 tokens (decode; KernelOptions::
// matvec_subgroup, --matvec-subgroup): y[t, n] (+)= sum_k W[n, k] * x[t, k] for a quantized/float
// weight W (N x K, layouts in quant.wgsl) and f32 activations x (T x K). One token per workgroup
// row of the grid (wid.y = t; the weights of a few tokens are re-read from L2), ROWS output rows
// per workgroup, LANES threads per row group, RPT rows per thread: a workgroup is ROWS / RPT row
// groups of LANES threads, and the thread at `lane` of group g sums blocks lane, lane + LANES, ...
// of rows g * RPT .. g * RPT + RPT - 1. A block of activations (with its NORM / SILU prologue) is
// loaded once per thread and used for all RPT rows: activation reads and prologue arithmetic per
// weight byte fall by RPT (with RPT = 1 every row re-read the whole activation vector from L1/L2,
// 5x the weight bytes of a 6-bit matrix). Each row keeps two register sums (even / odd steps of its
// lane: two block loads in flight); the quant words of a block are read with vec4<u32> loads
// (binding B_W4 is the weight buffer again, seen as array<vec4<u32>>: every layout's quant region is
// a whole number of vec4 per block, except FMT_Q6_K's 3 words, read as scalars). Then the LANES partial sums of a row are reduced:
//   SUBGROUP 1: subgroupAdd over each subgroup (the host enables this only when every subgroup
//            size the adapter uses divides LANES, so a subgroup never spans two rows; invocations
//            are assumed numbered subgroup-major, as every Vulkan/Metal/D3D driver does), then the
//            LANES / subgroup_size subgroup sums of the row in increasing order (one barrier).
//   SUBGROUP 0: a workgroup-memory tree (red[i] += red[i + off], off = LANES/2 .. 1).
// A row's summation order depends on LANES and SUBGROUP (and the adapter's subgroup size) only, not
// on ROWS or RPT: those two are bit-exact speed knobs (kernels/ops_test.cpp). The order is fixed
// for a given adapter, so results are run-to-run deterministic, and the prologues/epilogues below
// do not change it: fused and unfused forms with this kernel are bit-identical
// (kernels/fused_ops_test.cpp).
// Variant defines (all required): FMT_* (one of quant.wgsl's), BE, BE16, BE32, ROWS, RPT (1, 2 or
// 4; ROWS a multiple of it), R2 (RPT >= 2), R4 (RPT == 4), LANES (power of two), SUBGROUP, VEC4,
// ADD, NORM, SILU, ROPE, NEOX, CONV and the binding numbers B_W4, B_NW (NORM), B_CS, B_KC, B_VC
// (ROPE), B_CW, B_ST (CONV), B_P. NORM / SILU / ROPE / ADD have matmul.wgsl's meaning:
//   NORM  RMSNorm prologue: x[t, k] * inv[t] * nw[k], inv from rms_sum.wgsl (as rmsnorm.wgsl).
//   SILU  activations silu(x[t, k]) * x[t, u_off + k] (silu_mul.wgsl's expression).
//   ROPE  RoPE + KV-cache store epilogue of the fused QKV projection over row pairs (ROWS even;
//         the two rows of a pair are slots 2i, 2i + 1 of one workgroup).
//   CONV  the LFM2 ShortConv's causal conv and state update as the epilogue of its in-projection
//         (one token; matmul_io.wgsl conv_store) over row triples (ROWS a multiple of 3).
//   COMBINE  the merged split-K attention output from its partials (matmul_io.wgsl; this kernel
//         only): the workgroup first merges its token's attention output into workgroup memory.
//   ADD   y += instead of y =.
//   I8    int8 activations (KernelOptions::matvec_int8, --matvec-int8; not bit-exact): the workgroup
//         first quantizes its token's activations (prologue applied) per weight block into workgroup
//         memory, as llama.cpp's q8_1 does (ggml quantize_row_q8_1: d = max|x| / 127, q = round(x / d),
//         with the block's sum of q), once for all its rows; each weight block is then one i32 sum of
//         packed 4 x 8-bit dot products (dot4I8Packed: the nibbles or bytes against the int8
//         activations) scaled in f32: block = d_w * d_x * sum(q_w q_x) (+ m_w * d_x * sum(q_x) for the
//         formats with a min; ggml vec_dot_q4_K_q8_K / vec_dot_q4_1_q8_1). No int->float conversion
//         per weight. XBLK: activation blocks the workgroup memory holds (>= K / BE); F32 weights
//         never take this path.
//   PF    (numeric, 0 or 1; I8 only, else ignored) the words of each thread's first two weight blocks
//         per row are loaded before the prologue (--matvec-prefetch): a scheduling knob, bit-identical.
//   P2    a second weight part of another type in the same launch (--fuse-qkv-formats: the QKV
//         projection of a Q4_K_M layer whose V is Q6_K; with I8 and ROPE, PF 0, the first part of
//         32-element blocks): the first ceil(N / ROWS) workgroups compute the first part (binding 0 /
//         B_W4, p.N rows from row p.row0 of [q | k | v]), the others the second part (binding B_W2:
//         FMT_Q8_F32 words, p.n2 rows following the first part's, its scales at word p.soff2), with
//         16-element int8 activation blocks (quantize16 / qact16 / qdot16 and its own copy of the
//         block loop: the expressions the BE16 kernel uses for FMT_Q8_F32). A row's order still
//         depends on LANES and SUBGROUP only: each part's rows are bit-identical to that part's own
//         launch with the same LANES (the host checks it).
#include matmul_io
@group(0) @binding({{B_W4}}) var<storage, read> w4: array<vec4<u32>>;

const BE: u32 = {{BE}}u;
const ROWS: u32 = {{ROWS}}u;
const RPT: u32 = {{RPT}}u;
const LANES: u32 = {{LANES}}u;
const THREADS: u32 = ROWS / RPT * LANES;
var<workgroup> red: array<f32, ROWS * LANES>;  // [row slot][lane] partial sums
const PF: u32 = {{PF}}u;  // 1: the first weight blocks loaded before the prologue (I8 only)
#if I8
const XBLK: u32 = {{XBLK}}u;
const QV: u32 = BE / 16u;  // vec4<u32> of int8 activations per block (2 for 32-element blocks)
var<workgroup> xq: array<vec4<u32>, XBLK * QV>;  // int8 activations, 4 per word, block-major
#if P2
var<workgroup> xsc: array<vec2<f32>, XBLK * 2u>; // per block (16-element blocks in the second part)
@group(0) @binding({{B_W2}}) var<storage, read> wq2: array<vec4<u32>>;  // the second part's words
var<private> second: bool;  // this workgroup computes the second part (workgroup-uniform)
#else
var<workgroup> xsc: array<vec2<f32>, XBLK>;      // per block: (d_x, d_x * sum of its q)
#endif
#endif

#include quant

// Block bi decoded as quant.wgsl's load_block does (same expressions), quant words by vec4 loads.
fn load_wide(bi: u32) -> Blk {
  var b: Blk;
#if FMT_F32
  let base = bi * (BE / 4u);
  b.v0 = bitcast<vec4<f32>>(w4[base]);
#if BE32
  b.v1 = bitcast<vec4<f32>>(w4[base + 1u]); b.v2 = bitcast<vec4<f32>>(w4[base + 2u]);
  b.v3 = bitcast<vec4<f32>>(w4[base + 3u]); b.v4 = bitcast<vec4<f32>>(w4[base + 4u]);
  b.v5 = bitcast<vec4<f32>>(w4[base + 5u]); b.v6 = bitcast<vec4<f32>>(w4[base + 6u]);
  b.v7 = bitcast<vec4<f32>>(w4[base + 7u]);
#endif
#endif
#if FMT_Q4_0
  let d = unpack2x16float(w[p.soff + bi / 2u])[bi & 1u];
  let q = w4[bi];
  b.v0 = (lo4(q.x) - 8.0) * d; b.v1 = (lo4(q.y) - 8.0) * d; b.v2 = (lo4(q.z) - 8.0) * d; b.v3 = (lo4(q.w) - 8.0) * d;
  b.v4 = (hi4(q.x) - 8.0) * d; b.v5 = (hi4(q.y) - 8.0) * d; b.v6 = (hi4(q.z) - 8.0) * d; b.v7 = (hi4(q.w) - 8.0) * d;
#endif
#if FMT_Q4_1
  let dm = unpack2x16float(w[p.soff + bi]);
  let q = w4[bi];
  b.v0 = lo4(q.x) * dm.x + dm.y; b.v1 = lo4(q.y) * dm.x + dm.y; b.v2 = lo4(q.z) * dm.x + dm.y; b.v3 = lo4(q.w) * dm.x + dm.y;
  b.v4 = hi4(q.x) * dm.x + dm.y; b.v5 = hi4(q.y) * dm.x + dm.y; b.v6 = hi4(q.z) * dm.x + dm.y; b.v7 = hi4(q.w) * dm.x + dm.y;
#endif
#if FMT_Q4_K
  let so = q4k_scale_min(w4[p.soff / 4u + (bi >> 3u)], bi & 7u);  // soff: a multiple of 4 words
  let s = so.x;
  let o = so.y;
  let q = w4[bi];
  b.v0 = lo4(q.x) * s + o; b.v1 = lo4(q.y) * s + o; b.v2 = lo4(q.z) * s + o; b.v3 = lo4(q.w) * s + o;
  b.v4 = hi4(q.x) * s + o; b.v5 = hi4(q.y) * s + o; b.v6 = hi4(q.z) * s + o; b.v7 = hi4(q.w) * s + o;
#endif
#if FMT_Q8_0
  let d = unpack2x16float(w[p.soff + bi / 2u])[bi & 1u];
  let q = w4[bi * 2u];
  let r = w4[bi * 2u + 1u];
  b.v0 = i8x4(q.x) * d; b.v1 = i8x4(q.y) * d; b.v2 = i8x4(q.z) * d; b.v3 = i8x4(q.w) * d;
  b.v4 = i8x4(r.x) * d; b.v5 = i8x4(r.y) * d; b.v6 = i8x4(r.z) * d; b.v7 = i8x4(r.w) * d;
#endif
#if FMT_Q8_F32
  let s = bitcast<f32>(w[p.soff + bi]);
  let q = w4[bi];
  b.v0 = i8x4(q.x) * s; b.v1 = i8x4(q.y) * s; b.v2 = i8x4(q.z) * s; b.v3 = i8x4(q.w) * s;
#endif
#if FMT_Q6_K
  b = load_block(bi);  // 3 quant words per block (not a whole vec4): quant.wgsl's scalar loads
#endif
  return b;
}


// Activations k .. k+3 of the token whose row starts at element xb (inv: NORM's 1 / rms).
fn xs(xb: u32, k: u32, inv: f32) -> vec4<f32> { return act4(xb, k, inv); }

// The BE activations of the block starting at element k, prologue applied (a Blk of activations).
fn act_block(xb: u32, k: u32, inv: f32) -> Blk {
  var a: Blk;
  a.v0 = xs(xb, k, inv);
#if BE16
  a.v1 = xs(xb, k + 4u, inv); a.v2 = xs(xb, k + 8u, inv); a.v3 = xs(xb, k + 12u, inv);
#endif
#if BE32
  a.v1 = xs(xb, k + 4u, inv); a.v2 = xs(xb, k + 8u, inv); a.v3 = xs(xb, k + 12u, inv);
  a.v4 = xs(xb, k + 16u, inv); a.v5 = xs(xb, k + 20u, inv); a.v6 = xs(xb, k + 24u, inv); a.v7 = xs(xb, k + 28u, inv);
#endif
  return a;
}

// Dot product of a weight block and an activation block (fixed order: the v0 term, then v1..v3,
// then v4..v7 left to right).
fn block_dot(b: Blk, a: Blk) -> f32 {
  var s = dot(b.v0, a.v0);
#if BE16
  s += dot(b.v1, a.v1) + dot(b.v2, a.v2) + dot(b.v3, a.v3);
#endif
#if BE32
  s += dot(b.v1, a.v1) + dot(b.v2, a.v2) + dot(b.v3, a.v3);
  s += dot(b.v4, a.v4) + dot(b.v5, a.v5) + dot(b.v6, a.v6) + dot(b.v7, a.v7);
#endif
  return s;
}

#if I8
// Four activations to int8 with scale 1 / d (id): round to nearest by adding 1.5 * 2^23 (the
// integer lands in the low mantissa bits; |v * id| <= 127), low bytes packed (two's complement).
fn q8x4(v: vec4<f32>, id: f32) -> u32 {
  let r = bitcast<vec4<u32>>(v * id + vec4<f32>(12582912.0));
  return (r.x & 0xffu) | ((r.y & 0xffu) << 8u) | ((r.z & 0xffu) << 16u) | (r.w << 24u);
}
fn amax4(v: vec4<f32>) -> f32 { let a = abs(v); return max(max(a.x, a.y), max(a.z, a.w)); }
const ONES: u32 = 0x01010101u;
// Quantize activation block i (elements i * BE ..) of the token at xb into xq / xsc.
fn quantize_block(xb: u32, i: u32, inv: f32) {
  let a = act_block(xb, i * BE, inv);
#if BE32
  let m = max(max(max(amax4(a.v0), amax4(a.v1)), max(amax4(a.v2), amax4(a.v3))),
              max(max(amax4(a.v4), amax4(a.v5)), max(amax4(a.v6), amax4(a.v7))));
#else
  let m = max(max(amax4(a.v0), amax4(a.v1)), max(amax4(a.v2), amax4(a.v3)));
#endif
  let id = select(0.0, 127.0 / m, m > 0.0);
  let q0 = vec4<u32>(q8x4(a.v0, id), q8x4(a.v1, id), q8x4(a.v2, id), q8x4(a.v3, id));
  var s = dot4I8Packed(q0.x, ONES) + dot4I8Packed(q0.y, ONES) + dot4I8Packed(q0.z, ONES) + dot4I8Packed(q0.w, ONES);
  xq[i * QV] = q0;
#if BE32
  let q1 = vec4<u32>(q8x4(a.v4, id), q8x4(a.v5, id), q8x4(a.v6, id), q8x4(a.v7, id));
  s += dot4I8Packed(q1.x, ONES) + dot4I8Packed(q1.y, ONES) + dot4I8Packed(q1.z, ONES) + dot4I8Packed(q1.w, ONES);
  xq[i * QV + 1u] = q1;
#endif
  let d = m / 127.0;
  xsc[i] = vec2<f32>(d, d * f32(s));
}
// The four nibble-byte dot products of 4-bit quant words q (low nibbles: elements 0..15 against
// a0, high nibbles: 16..31 against a1; ggml's nibble order, see quant.wgsl).
fn dot_nib(q: vec4<u32>, a0: vec4<u32>, a1: vec4<u32>) -> i32 {
  let m = 0x0F0F0F0Fu;
  return dot4I8Packed(q.x & m, a0.x) + dot4I8Packed(q.y & m, a0.y) + dot4I8Packed(q.z & m, a0.z) +
         dot4I8Packed(q.w & m, a0.w) + dot4I8Packed((q.x >> 4u) & m, a1.x) + dot4I8Packed((q.y >> 4u) & m, a1.y) +
         dot4I8Packed((q.z >> 4u) & m, a1.z) + dot4I8Packed((q.w >> 4u) & m, a1.w);
}
fn dot_b4(q: vec4<u32>, a: vec4<u32>) -> i32 {
  return dot4I8Packed(q.x, a.x) + dot4I8Packed(q.y, a.y) + dot4I8Packed(q.z, a.z) + dot4I8Packed(q.w, a.w);
}
// Activation block ab from workgroup memory (read once per thread and block, used for RPT rows).
struct QA { a0: vec4<u32>, a1: vec4<u32>, s: vec2<f32> }
fn qact(ab: u32) -> QA {
  var a: QA;
  a.a0 = xq[ab * QV];
#if BE32
  a.a1 = xq[ab * QV + 1u];
#endif
  a.s = xsc[ab];
  return a;
}
// The words of weight block bi that qdot reads (quant words q, r; scale words s), loaded apart from
// their arithmetic so that PF can issue the first blocks' loads before the prologue.
struct WP { q: vec4<u32>, r: vec4<u32>, s: vec4<u32> }
fn wload(bi: u32) -> WP {
  var x: WP;
#if FMT_Q4_0
  x.q = w4[bi];
  x.s.x = w[p.soff + bi / 2u];
#endif
#if FMT_Q4_1
  x.q = w4[bi];
  x.s.x = w[p.soff + bi];
#endif
#if FMT_Q4_K
  x.q = w4[bi];
  x.s = w4[p.soff / 4u + (bi >> 3u)];
#endif
#if FMT_Q8_0
  x.q = w4[bi * 2u];
  x.r = w4[bi * 2u + 1u];
  x.s.x = w[p.soff + bi / 2u];
#endif
#if FMT_Q8_F32
  x.q = w4[bi];
  x.s.x = w[p.soff + bi];
#endif
#if FMT_Q6_K
  // The raw words (the 6-bit unpacking is arithmetic: qdot_w, after the loads have landed).
  x.q = vec4<u32>(q6_raw(bi), 0u);
  x.s = vec4<u32>(q6k_scale_raw(bi), 0u, 0u);
#endif
  return x;
}
// Weight block bi (its words x) times the activation block a, in f32.
fn qdot_w(x: WP, bi: u32, a: QA) -> f32 {
  let xs = a.s;
#if FMT_Q4_0
  let d = unpack2x16float(x.s.x)[bi & 1u];
  let si = dot_nib(x.q, a.a0, a.a1);
  return d * (xs.x * f32(si) - 8.0 * xs.y);
#endif
#if FMT_Q4_1
  let dm = unpack2x16float(x.s.x);
  let si = dot_nib(x.q, a.a0, a.a1);
  return dm.x * (xs.x * f32(si)) + dm.y * xs.y;
#endif
#if FMT_Q4_K
  let so = q4k_scale_min(x.s, bi & 7u);
  let si = dot_nib(x.q, a.a0, a.a1);
  return so.x * (xs.x * f32(si)) + so.y * xs.y;
#endif
#if FMT_Q8_0
  let d = unpack2x16float(x.s.x)[bi & 1u];
  let si = dot_b4(x.q, a.a0) + dot_b4(x.r, a.a1);
  return d * (xs.x * f32(si));
#endif
#if FMT_Q8_F32
  let sc = bitcast<f32>(x.s.x);
  return sc * (xs.x * f32(dot_b4(x.q, a.a0)));
#endif
#if FMT_Q6_K
  // The same signed bytes and scale as FMT_Q8_F32 (quant.wgsl): the same integer and f32 products.
  let sc = q6k_scale_of(x.s.x, x.s.y, bi);
  return sc * (xs.x * f32(dot_b4(q6_words_of(x.q.x, x.q.y, x.q.z), a.a0)));
#endif
#if FMT_F32
  return 0.0;  // never used: the host does not pick I8 for F32 weights
#endif
}
fn qdot(bi: u32, a: QA) -> f32 { return qdot_w(wload(bi), bi, a); }
#if P2
// The second part (FMT_Q8_F32, 16-element blocks): quantize_block, qact and qdot_w as the BE16
// kernel specialises them for FMT_Q8_F32 (same expressions, same order).
fn quantize16(xb: u32, i: u32, inv: f32) {
  let k = i * 16u;
  let v0 = xs(xb, k, inv);
  let v1 = xs(xb, k + 4u, inv);
  let v2 = xs(xb, k + 8u, inv);
  let v3 = xs(xb, k + 12u, inv);
  let m = max(max(amax4(v0), amax4(v1)), max(amax4(v2), amax4(v3)));
  let id = select(0.0, 127.0 / m, m > 0.0);
  let q0 = vec4<u32>(q8x4(v0, id), q8x4(v1, id), q8x4(v2, id), q8x4(v3, id));
  let s = dot4I8Packed(q0.x, ONES) + dot4I8Packed(q0.y, ONES) + dot4I8Packed(q0.z, ONES) + dot4I8Packed(q0.w, ONES);
  xq[i] = q0;
  let d = m / 127.0;
  xsc[i] = vec2<f32>(d, d * f32(s));
}
fn qdot16(bi: u32, a: QA) -> f32 {
  let q = wq2[bi];
  let sw = p.soff2 + bi;  // (soff2: a multiple of 4 words)
  let sc = bitcast<f32>(wq2[sw / 4u][sw % 4u]);
  return sc * (a.s.x * f32(dot_b4(q, a.a0)));
}
// The second part's activation block (16 elements: one vec4 of int8).
fn qact16(ab: u32) -> QA {
  var a: QA;
  a.a0 = xq[ab];
  a.s = xsc[ab];
  return a;
}
#endif
#endif

// First block index of the weight row of virtual row v of a part (its row 0 at r0 of [q | k | v],
// n rows of nb blocks); rows past n read row n - 1 (their sums are never written), so every thread
// runs the same loads.
fn wrow(v: u32, r0: u32, n: u32, nb: u32) -> u32 { return min(row_of_at(v, r0), n - 1u) * nb; }

// The full sum of row slot `slot` after the reduction (see the header).
fn row_sum(slot: u32, sgs: u32) -> f32 {
#if SUBGROUP
  var s = red[slot * LANES];
  for (var j = sgs; j < LANES; j += sgs) { s += red[slot * LANES + j]; }
  return s;
#else
  return red[slot * LANES];
#endif
}

@compute @workgroup_size(THREADS)
#if SUBGROUP
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u,
        @builtin(subgroup_size) sgs: u32, @builtin(subgroup_invocation_id) sgi: u32) {
#else
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let sgs = LANES;
#endif
  let lane = lid.x % LANES;
  let slot0 = lid.x / LANES * RPT;  // this thread's first row slot in the workgroup
#if I8
#if P2
  let g1 = (p.N + ROWS - 1u) / ROWS;  // the first part's workgroups
  second = wid.x >= g1;
  let wx = select(wid.x, wid.x - g1, second);  // workgroup index within the part
  let prow0 = select(p.row0, p.row0 + p.N, second);
  let pn = select(p.N, p.n2, second);
  let nb = select(p.nb, p.K / 16u, second);
#else
  let wx = wid.x;
  let prow0 = p.row0;
  let pn = p.N;
  let nb = p.nb;
#endif
#else
  let wx = wid.x;
  let prow0 = p.row0;
  let pn = p.N;
  let nb = p.nb;
#endif
  let v0 = wx * ROWS + slot0;
  let t = wid.y;
  let xb = p.x_off + t * p.x_stride;
  let w0 = wrow(v0, prow0, pn, nb);
#if R2
  let w1 = wrow(v0 + 1u, prow0, pn, nb);
#endif
#if R4
  let w2 = wrow(v0 + 2u, prow0, pn, nb);
  let w3 = wrow(v0 + 3u, prow0, pn, nb);
#endif
#if I8
  // PF 1: the words of the thread's first weight blocks (blocks lane and lane + LANES of each of
  // its rows) are loaded before the prologue, so their memory latency overlaps the activations'
  // loads, RMSNorm and quantization; the first step below uses them. Same blocks, same arithmetic,
  // same order: bit-identical to PF 0.
  var pe0: WP;
  var po0: WP;
#if R2
  var pe1: WP;
  var po1: WP;
#endif
#if R4
  var pe2: WP;
  var po2: WP;
  var pe3: WP;
  var po3: WP;
#endif
  if (PF == 1u && lane < nb) {
    pe0 = wload(w0 + lane);
#if R2
    pe1 = wload(w1 + lane);
#endif
#if R4
    pe2 = wload(w2 + lane);
    pe3 = wload(w3 + lane);
#endif
    if (lane + LANES < nb) {
      po0 = wload(w0 + lane + LANES);
#if R2
      po1 = wload(w1 + lane + LANES);
#endif
#if R4
      po2 = wload(w2 + lane + LANES);
      po3 = wload(w3 + lane + LANES);
#endif
    }
  }
#endif
#if COMBINE
  combine_partials(lid.x, THREADS, xb);
#endif
#if NORM
  let ss = rms_sum_squares(lid.x, THREADS, xb, p.K);  // same value in every thread
  let inv = 1.0 / sqrt(ss / f32(p.K) + p.eps);
#else
  let inv = 1.0;
#endif
#if I8
#if P2
  if (second) {
    for (var i = lid.x; i < nb; i += THREADS) { quantize16(xb, i, inv); }
  } else {
    for (var i = lid.x; i < nb; i += THREADS) { quantize_block(xb, i, inv); }
  }
#else
  for (var i = lid.x; i < nb; i += THREADS) { quantize_block(xb, i, inv); }
#endif
  workgroupBarrier();
#endif
  var e0 = 0.0;
  var o0 = 0.0;
#if R2
  var e1 = 0.0;
  var o1 = 0.0;
#endif
#if R4
  var e2 = 0.0;
  var o2 = 0.0;
  var e3 = 0.0;
  var o3 = 0.0;
#endif
  var b = lane;
#if I8
#if P2
  // The second part's rows: the loop of its own launch (FMT_Q8_F32), written out again. Not one loop
  // whose block product picks the part per block: a compiler may then merge the two additions after
  // the choice, which changes how it fuses multiply and add (lavapipe and the H100 gave other bits
  // than the per-part launches for rows of several blocks per lane).
  if (second) {
    for (; b + LANES < nb; b += 2u * LANES) {
      let qe = qact16(b);
      let qo = qact16(b + LANES);
      e0 += qdot16(w0 + b, qe);
      o0 += qdot16(w0 + b + LANES, qo);
#if R2
      e1 += qdot16(w1 + b, qe);
      o1 += qdot16(w1 + b + LANES, qo);
#endif
#if R4
      e2 += qdot16(w2 + b, qe);
      o2 += qdot16(w2 + b + LANES, qo);
      e3 += qdot16(w3 + b, qe);
      o3 += qdot16(w3 + b + LANES, qo);
#endif
    }
    if (b < nb) {
      let qe = qact16(b);
      e0 += qdot16(w0 + b, qe);
#if R2
      e1 += qdot16(w1 + b, qe);
#endif
#if R4
      e2 += qdot16(w2 + b, qe);
      e3 += qdot16(w3 + b, qe);
#endif
    }
  } else {
#endif
  if (PF == 1u && b + LANES < nb) {  // the first step, from the prefetched words
    let qe = qact(b);
    let qo = qact(b + LANES);
    e0 += qdot_w(pe0, w0 + b, qe);
    o0 += qdot_w(po0, w0 + b + LANES, qo);
#if R2
    e1 += qdot_w(pe1, w1 + b, qe);
    o1 += qdot_w(po1, w1 + b + LANES, qo);
#endif
#if R4
    e2 += qdot_w(pe2, w2 + b, qe);
    o2 += qdot_w(po2, w2 + b + LANES, qo);
    e3 += qdot_w(pe3, w3 + b, qe);
    o3 += qdot_w(po3, w3 + b + LANES, qo);
#endif
    b += 2u * LANES;
  }
  for (; b + LANES < nb; b += 2u * LANES) {
    let qe = qact(b);
    let qo = qact(b + LANES);
    e0 += qdot(w0 + b, qe);
    o0 += qdot(w0 + b + LANES, qo);
#if R2
    e1 += qdot(w1 + b, qe);
    o1 += qdot(w1 + b + LANES, qo);
#endif
#if R4
    e2 += qdot(w2 + b, qe);
    o2 += qdot(w2 + b + LANES, qo);
    e3 += qdot(w3 + b, qe);
    o3 += qdot(w3 + b + LANES, qo);
#endif
  }
  if (PF == 1u && b == lane && b < nb) {  // a lone block (nb <= lane + LANES), prefetched
    let qe = qact(b);
    e0 += qdot_w(pe0, w0 + b, qe);
#if R2
    e1 += qdot_w(pe1, w1 + b, qe);
#endif
#if R4
    e2 += qdot_w(pe2, w2 + b, qe);
    e3 += qdot_w(pe3, w3 + b, qe);
#endif
  } else if (b < nb) {
    let qe = qact(b);
    e0 += qdot(w0 + b, qe);
#if R2
    e1 += qdot(w1 + b, qe);
#endif
#if R4
    e2 += qdot(w2 + b, qe);
    e3 += qdot(w3 + b, qe);
#endif
  }
#if P2
  }
#endif
#else
  for (; b + LANES < nb; b += 2u * LANES) {
    let xe = act_block(xb, b * BE, inv);
    let xo = act_block(xb, (b + LANES) * BE, inv);
    e0 += block_dot(load_wide(w0 + b), xe);
    o0 += block_dot(load_wide(w0 + b + LANES), xo);
#if R2
    e1 += block_dot(load_wide(w1 + b), xe);
    o1 += block_dot(load_wide(w1 + b + LANES), xo);
#endif
#if R4
    e2 += block_dot(load_wide(w2 + b), xe);
    o2 += block_dot(load_wide(w2 + b + LANES), xo);
    e3 += block_dot(load_wide(w3 + b), xe);
    o3 += block_dot(load_wide(w3 + b + LANES), xo);
#endif
  }
  if (b < nb) {
    let xe = act_block(xb, b * BE, inv);
    e0 += block_dot(load_wide(w0 + b), xe);
#if R2
    e1 += block_dot(load_wide(w1 + b), xe);
#endif
#if R4
    e2 += block_dot(load_wide(w2 + b), xe);
    e3 += block_dot(load_wide(w3 + b), xe);
#endif
  }
#endif
  let r0 = slot0 * LANES + lane;  // red index of this thread's first row
#if SUBGROUP
  let s0 = subgroupAdd(e0 + o0);
#if R2
  let s1 = subgroupAdd(e1 + o1);
#endif
#if R4
  let s2 = subgroupAdd(e2 + o2);
  let s3 = subgroupAdd(e3 + o3);
#endif
  if (sgi == 0u) {  // lane is a multiple of sgs here
    red[r0] = s0;
#if R2
    red[r0 + LANES] = s1;
#endif
#if R4
    red[r0 + 2u * LANES] = s2;
    red[r0 + 3u * LANES] = s3;
#endif
  }
  workgroupBarrier();
#else
  red[r0] = e0 + o0;
#if R2
  red[r0 + LANES] = e1 + o1;
#endif
#if R4
  red[r0 + 2u * LANES] = e2 + o2;
  red[r0 + 3u * LANES] = e3 + o3;
#endif
  workgroupBarrier();
  for (var off = LANES / 2u; off > 0u; off >>= 1u) {
    if (lane < off) {
      red[r0] += red[r0 + off];
#if R2
      red[r0 + LANES] += red[r0 + LANES + off];
#endif
#if R4
      red[r0 + 2u * LANES] += red[r0 + 2u * LANES + off];
      red[r0 + 3u * LANES] += red[r0 + 3u * LANES + off];
#endif
    }
    workgroupBarrier();
  }
#endif
  // Lane i < RPT of a group writes the group's row slot i.
  if (lane >= RPT) { return; }
  let slot = slot0 + lane;
  let vrow = wx * ROWS + slot;
  let n = row_of_at(vrow, prow0);
  if (n >= pn) { return; }
  let sum = row_sum(slot, sgs);
#if CONV
  // The x row of a triple (slots 3i, 3i + 1, 3i + 2 of one workgroup: ROWS a multiple of 3).
  if (vrow % 3u == 2u) { conv_store(vrow / 3u, row_sum(slot - 2u, sgs), row_sum(slot - 1u, sgs), sum); }
#else
#if ROPE
  rope_store_at(vrow, n, t, sum, row_sum(slot ^ 1u, sgs), prow0);  // the pair's other row (ROWS even: same workgroup)
#else
  let yi = p.y_off + t * p.y_stride + n;
#if ADD
  y[yi] = y[yi] + sum;
#else
  y[yi] = sum;
#endif
#endif
#endif
}
