// defines: VEC4 NORM SILU ROPE NEOX GATE BIAS COMBINE CONV B_P B_NW? B_G? B_CS? B_KC? B_VC? B_B? B_CW? B_ST? CH? CS? CK?
// matmul_io: the parameters and bindings of the matrix-vector / small-T kernels, shared (via
// #include) by matmul.wgsl and matvec.wgsl; included, never compiled alone. Binding 0 the weight
// words w, 1 the activations x (vec4 with VEC4), 2 the output y; the prologue and epilogue
// bindings (NORM: nw; GATE: g with gv(i) = its 4 elements from i; ROPE: the (cos, sin) table cs and
// the caches kc, vc, with BIAS the biases qb) and the uniform P at the slots B_* the caller numbers
// (kernels/ops.cpp). P: K, N (weight columns / rows), T tokens, nb blocks per row, soff
// (quant.wgsl), x/y offsets and strides (floats), eps (NORM), u_off (SILU: the up half; GATE: the
// gate), pos0, q_rows, kv_rows, hd, rot, table_pairs, row0 (ROPE: the matrix's row 0 is row row0
// of the [q | k | v] rows, a multiple of hd: a projection split into parts by weight type); hd and
// n_split (COMBINE: the head dim and the key splits of the partials); n2, soff2 (matvec.wgsl P2:
// the rows and the scale offset of the second weight part). Then the activation
// accessors both kernels read through: xv (4 stored
// elements), and with NORM rms_x (one element, for rms_sum.wgsl) and nw4 (4 norm weights); the row
// map row_of and, with ROPE, the epilogue rope_store. act4 is the activation load with its prologue
// (NORM, SILU or GATE). CONV (matvec.wgsl only; the LFM2 ShortConv in-projection of one token,
// --fuse-conv-in): the rows are [B | C | x] of conv_c channels each, taken in triples (B_c, C_c,
// x_c) by row_of; the epilogue conv_store (below) applies the causal conv of kernel conv_l with the
// channel's rolling state (binding B_ST, [conv_l - 1][conv_c] at conv_s_off) and weights (B_CW,
// [conv_c][conv_l]) and writes C_c * conv to y[y_off + c] instead of the three rows.
struct P { K: u32, N: u32, T: u32, nb: u32, soff: u32, x_off: u32, x_stride: u32, y_off: u32, y_stride: u32,
           eps: f32, u_off: u32, pos0: u32, q_rows: u32, kv_rows: u32, hd: u32, rot: u32, table_pairs: u32,
           row0: u32, n_split: u32, conv_c: u32, conv_l: u32, conv_s_off: u32, n2: u32, soff2: u32 }
@group(0) @binding(0) var<storage, read> w: array<u32>;
#if VEC4
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
#else
@group(0) @binding(1) var<storage, read> x: array<f32>;
#endif
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
#if NORM
#if VEC4
@group(0) @binding({{B_NW}}) var<storage, read> nw: array<vec4<f32>>;
#else
@group(0) @binding({{B_NW}}) var<storage, read> nw: array<f32>;
#endif
#endif
#if ROPE
@group(0) @binding({{B_CS}}) var<storage, read> cs: array<vec2<f32>>;   // [pos][rot/2] (cos, sin)
@group(0) @binding({{B_KC}}) var<storage, read_write> kc: array<f32>;
@group(0) @binding({{B_VC}}) var<storage, read_write> vc: array<f32>;
#if BIAS
@group(0) @binding({{B_B}}) var<storage, read> qb: array<f32>;  // [q | k | v] biases (Qwen2)
#endif
#endif
#if GATE
// GATE (decode fusion, --fuse-attn-gate): the activations are x[t, k] * sigmoid(g[t, u_off + k]),
// g rows laid out as x's (element xb + u_off + k), sigmoid_gate.wgsl's expression: bit-identical
// to sigmoid_gate followed by this product (Qwen3.5's gated attention output). Binding B_G: g.
#if VEC4
@group(0) @binding({{B_G}}) var<storage, read> g: array<vec4<f32>>;
fn gv(i: u32) -> vec4<f32> { return g[i / 4u]; }
#else
@group(0) @binding({{B_G}}) var<storage, read> g: array<f32>;
fn gv(i: u32) -> vec4<f32> { return vec4<f32>(g[i], g[i + 1u], g[i + 2u], g[i + 3u]); }
#endif
#endif
#if CONV
@group(0) @binding({{B_CW}}) var<storage, read> convw: array<f32>;     // [conv_c][conv_l] conv weights
@group(0) @binding({{B_ST}}) var<storage, read_write> cst: array<f32>;  // [conv_l - 1][conv_c] rolling state
#endif
@group(0) @binding({{B_P}}) var<uniform> p: P;

// The 4 stored elements i .. i+3 (i % 4 == 0 with VEC4) of the activation buffer.
fn xv(i: u32) -> vec4<f32> {
#if VEC4
  return x[i / 4u];
#else
  return vec4<f32>(x[i], x[i + 1u], x[i + 2u], x[i + 3u]);
#endif
}

#if NORM
fn rms_x(i: u32) -> f32 {
#if VEC4
  return x[i / 4u][i % 4u];
#else
  return x[i];
#endif
}
#include rms_sum
fn nw4(k: u32) -> vec4<f32> {
#if VEC4
  return nw[k / 4u];
#else
  return vec4<f32>(nw[k], nw[k + 1u], nw[k + 2u], nw[k + 3u]);
#endif
}
#endif

#if COMBINE
// COMBINE (decode fusion, --fuse-attn-combine; matvec.wgsl only, scalar loads): x holds the split-K
// partials of a decode attention (attention_decode.wgsl / attention.wgsl SPLIT) instead of its
// output: for the token whose partials start at xb, head h (K / hd heads) and split s, the record
// at xb + (h * n_split + s) * (hd + 2) is (m_s, l_s, acc_s[hd]). The activations are the merged
// attention output, attention_combine.wgsl's expressions in its order: M = max_s m_s,
// w_s = e^(m_s - M), den = sum_s w_s l_s, out[d] = (sum_s w_s acc_s[d]) / den (sums in split
// order): bit-identical to attention_combine followed by the projection. combine_partials(), called
// once by the kernel from uniform control flow before its first act4, puts w_s and den of every
// head (CH heads, at most CS splits: the host's kSplitMax; one thread per head) and then the CK
// merged elements of the token (all threads) in workgroup memory; act4 reads them there.
const CH: u32 = {{CH}}u;
const CS: u32 = {{CS}}u;
const CK: u32 = {{CK}}u;
var<workgroup> cw: array<f32, CH * CS>;  // [head][split] w_s
var<workgroup> cden: array<f32, CH>;     // [head] den
var<workgroup> xc: array<f32, CK>;       // the merged attention output of the token
// Merged attention output element k of the token at xb (cw, cden filled).
fn combined(xb: u32, k: u32) -> f32 {
  let h = k / p.hd;
  let stride = p.hd + 2u;
  let base = xb + h * p.n_split * stride + 2u + k % p.hd;
  var num = 0.0;
  for (var s = 0u; s < p.n_split; s++) { num += cw[h * CS + s] * x[base + s * stride]; }
  return num / cden[h];
}
fn combine_partials(tid: u32, NT: u32, xb: u32) {
  let ns = p.n_split;
  let stride = p.hd + 2u;
  for (var h = tid; h < p.K / p.hd; h += NT) {
    let base = xb + h * ns * stride;
    var mx = -3.402823466e38;
    for (var s = 0u; s < ns; s++) { mx = max(mx, x[base + s * stride]); }
    var d = 0.0;
    for (var s = 0u; s < ns; s++) {
      let w = exp(x[base + s * stride] - mx);
      cw[h * CS + s] = w;
      d += w * x[base + s * stride + 1u];
    }
    cden[h] = d;
  }
  workgroupBarrier();
  for (var k = tid; k < p.K; k += NT) { xc[k] = combined(xb, k); }
  workgroupBarrier();
}
#endif

// Activations k .. k+3 of the token whose row starts at element xb, with the kernel's prologue:
// NORM (x * inv) * nw (inv = 1 / rms of the token), SILU silu(x) * up, GATE x * sigmoid(g),
// COMBINE the merged split-K attention output.
fn act4(xb: u32, k: u32, inv: f32) -> vec4<f32> {
#if COMBINE
  return vec4<f32>(xc[k], xc[k + 1u], xc[k + 2u], xc[k + 3u]);
#else
#if NORM
  return (xv(xb + k) * inv) * nw4(k);
#else
#if SILU
  let a = xv(xb + k);
  return a / (1.0 + exp(-a)) * xv(xb + p.u_off + k);
#else
#if GATE
  return xv(xb + k) * (1.0 / (1.0 + exp(-gv(xb + p.u_off + k))));
#else
  return xv(xb + k);
#endif
#endif
#endif
#endif
}

// The output row of virtual row v. With ROPE (the fused QKV projection's RoPE + KV-cache store
// epilogue) rows are visited so that both rows of a rotation pair are adjacent: within the first rot
// dims of a q or k head, virtual rows 2p / 2p + 1 are the two rows of rotation pair p (2p, 2p + 1 in
// the GGUF layout, p and p + rot/2 with NEOX). Otherwise the identity. Rows are the matrix's own;
// heads are counted from its row 0 (p.row0 is a multiple of hd, so the map stays in the matrix).
fn row_of_at(v: u32, r0: u32) -> u32 {
#if CONV
  if (v >= p.N) { return v; }
  return (v % 3u) * p.conv_c + v / 3u;  // triple (B_c, C_c, x_c) of channel c = v / 3
#endif
#if ROPE
  if (v + r0 >= p.q_rows + p.kv_rows) { return v; }
  let j = v % p.hd;
  if (j >= p.rot) { return v; }
#if NEOX
  return v - j + j / 2u + (j & 1u) * (p.rot / 2u);
#else
  return v;
#endif
#else
  return v;
#endif
}

// The row map of the dispatch's (first) weight part, whose row 0 is row p.row0 of [q | k | v].
fn row_of(v: u32) -> u32 { return row_of_at(v, p.row0); }

#if ROPE
// The ROPE epilogue for output row n = row_of(vrow) of token t (the matrix's rows; row n + row0 of
// [q | k | v]): its sum (with BIAS plus its bias, add_bias.wgsl's addition), rotated with the pair's
// other sum pv (read only where vrow lies in the rotated dims of a q or k head; with BIAS plus the
// other row's bias) by rope.wgsl's table and expressions, goes to y and, for k / v rows, to the
// caches at position pos0 + t: bit-identical to matmul, add_bias, rope, kv_store. r0: the row of
// [q | k | v] of the part's row 0 (p.row0, or p.row0 + p.N for matvec.wgsl's second part P2).
fn rope_store_at(vrow: u32, n: u32, t: u32, sum: f32, pv: f32, r0: u32) {
  let j = vrow % p.hd;
  let g = n + r0;  // row of [q | k | v]
  var out = sum;
#if BIAS
  out = out + qb[g];
#endif
  if (vrow + r0 < p.q_rows + p.kv_rows && j < p.rot) {
    let first = (vrow & 1u) == 0u;
    let c = cs[(p.pos0 + t) * p.table_pairs + j / 2u];
#if BIAS
    let po = pv + qb[row_of_at(vrow ^ 1u, r0) + r0];
#else
    let po = pv;
#endif
    let a = select(po, out, first);
    let b = select(out, po, first);
    if (first) { out = a * c.x - b * c.y; } else { out = a * c.y + b * c.x; }
  }
  y[p.y_off + t * p.y_stride + g - p.row0] = out;  // (a second part's rows follow the first's)
  if (g >= p.q_rows) {
    let e = g - p.q_rows;
    if (e < p.kv_rows) { kc[(p.pos0 + t) * p.kv_rows + e] = out; } else { vc[(p.pos0 + t) * p.kv_rows + e - p.kv_rows] = out; }
  }
}
fn rope_store(vrow: u32, n: u32, t: u32, sum: f32, pv: f32) { rope_store_at(vrow, n, t, sum, pv, p.row0); }
#endif

#if CONV
// The CONV epilogue for the triple of channel c (T = 1): b, cg, xv the row sums of B_c, C_c and
// x_c. causal_conv.wgsl's FUSED GATE_IN GATE_OUT expressions in its order (u = x * B; a = sum over
// j of w[c, j] * E[j], E = [state rows 0 .. L-2, u], from 0.0; a * C), then its state shift
// (row i = E[1 + i]): bit-identical to the projection followed by causal_conv. The channel's
// state is touched by this invocation only.
fn conv_store(c: u32, b: f32, cg: f32, xv: f32) {
  let L = p.conv_l;
  let u = xv * b;
  var a = 0.0;
  for (var j = 0u; j + 1u < L; j++) { a += convw[c * L + j] * cst[p.conv_s_off + j * p.conv_c + c]; }
  a += convw[c * L + L - 1u] * u;
  y[p.y_off + c] = a * cg;
  for (var i = 0u; i + 1u < L; i++) {
    var e = u;
    if (i + 2u < L) { e = cst[p.conv_s_off + (i + 1u) * p.conv_c + c]; }
    cst[p.conv_s_off + i * p.conv_c + c] = e;
  }
}
#endif
