// defines: BN BT RN RT ADD OFFSET SPLIT BE
// matmul_tiled_i8: y[t, n] (+)= sum_k W[n, k] * x[t, k] for prefill forwards (T > 8 tokens) with
// packed int8 dot products (`dot4I8Packed`), the --matmul-int8 variant of matmul_tiled.wgsl.
// Dispatch and tile: kernels/matmul_int8.cpp; CPU twin: ref::matmul on the activations as
// quantize_q8 rounds them (kernels/matmul_int8.h); test: kernels/matmul_int8_test.cpp.
// Inputs: the quantized weight W (quant.wgsl layouts: Q4_0, Q4_1, Q4_K, Q8_0 (and Q5_0 widened to
// it), Q8_F32 or Q6_K (Q6_K widened or as stored)) and the activations as quantize_q8.wgsl writes them: per token and block of
// 32, 8 words of int8 (q_x) and (d_x, s_x = d_x sum q_x).
// Per block of 32 (one K-step), for a weight row with values w = a * q_w + o (q_w the stored
// unsigned nibble or signed byte; Q4_0: a = d, o = -8 d; Q4_1: a = d, o = m; Q4_K: a = d * sc,
// o = -dmin * m, ggml's get_scale_min_k4; Q8_0: a = d, o = 0; Q6_K: one a per 16 elements, o = 0):
//   sum_k w[k] x_q[k] = a d_x sum_k q_w[k] q_x[k] + o s_x
// (ggml's vec_dot_q4_1_q8_1 / vec_dot_q4_K_q8_K semantics: the integer dot product per block, then
// the scales and the min term in f32). The integer sums (|sum| <= 32 * 128 * 127 < 2^22) are
// accumulated from the start value 0x4B400000 (the f32 1.5 * 2^23) so that bitcast<f32>(i) -
// 12582912.0 is their exact f32 value: an add instead of an int-to-float conversion (a quarter-rate
// instruction on NVIDIA GPUs).
// A workgroup computes BN features x BT tokens; per K-step it writes the BN x 32 weight tile (int8
// lanes, 4 per u32: Q4 nibbles unpacked with a mask; Q8 words as stored) and its (a, o) per row, and
// the BT x 32 activation tile with (d_x, s_x) per token, into workgroup memory, k-major (wq[h * BN +
// row] = words 4 h .. 4 h + 3 of the row's block), so neighbouring threads read neighbouring vec4s.
// Each of its (BN/RN) x (BT/RT) threads owns rows tn + a * (BN/RN) (a < RN) and tokens tq + b *
// (BT/RT) (b < RT): RN x RT f32 accumulators, 8 dot4I8Packed per (row, token) and K-step. The next
// K-step's raw words are loaded into registers during the current step's products (as matmul_tiled).
// The register tile and the prefetch slots are generated code (kernels/matmul_int8.cpp,
// i8_source()): markers TILE_DECL, TILE_STEP, TILE_STORE, TILE_PREFETCH_DECL, TILE_FETCH_FIRST,
// TILE_FETCH_NEXT, TILE_PUT.
// Variant defines (all required):
//   FMT_*, BE, BE32  weight layout (quant.wgsl); FMT_F32 is not supported (kernels use the f32 path)
//   BN, BT, RN, RT   tile: features x tokens per workgroup, per thread (BN a multiple of RN, BT of RT)
//   ADD              accumulate into y (fused residual add) instead of overwriting
//   OFFSET           the format has a per-block offset o (Q4_0, Q4_1, Q4_K)
//   SPLIT            two scales per block of 32, one per half (Q8_F32 / Q6_K: Q6_K's 16-element blocks)
// Requires K a multiple of 32 (256 for K-quants).
struct P { K: u32, N: u32, T: u32, nb: u32, soff: u32, y_off: u32, y_stride: u32 }
@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> xq: array<vec4<u32>>;  // quantize_q8 words (2 vec4 per block)
@group(0) @binding(2) var<storage, read> xs: array<vec2<f32>>;  // quantize_q8 (d, s) per block
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<uniform> p: P;

const BE: u32 = {{BE}}u;
const BN: u32 = {{BN}}u;
const BT: u32 = {{BT}}u;
const RN: u32 = {{RN}}u;
const RT: u32 = {{RT}}u;
const WN: u32 = BN / RN;   // threads along features
const WT: u32 = BT / RT;   // threads along tokens
const NT: u32 = WN * WT;   // threads per workgroup
const MAGIC_I: i32 = 0x4B400000;
const MAGIC_F: f32 = 12582912.0;

var<workgroup> wt: array<vec4<u32>, 2u * BN>;  // weight int8 words, k-major halves
var<workgroup> wsc: array<vec2<f32>, BN>;      // (a, o), or SPLIT: (a first 16, a last 16)
var<workgroup> xt: array<vec4<u32>, 2u * BT>;  // activation int8 words, k-major halves
var<workgroup> xsc: array<vec2<f32>, BT>;      // (d_x, s_x)

#include quant

// Raw words of weight slot part q (0..3) of one row's K-step: Q4: quant word q (elements 4q..4q+3
// low nibbles, 16+4q.. high); Q8: words 2q, 2q+1; part 0 also the scale words.
struct Raw { q: vec2<u32>, h: vec4<u32>, sel: u32 }
fn fetch(n: u32, kt: u32, q: u32) -> Raw {
  var r: Raw;
#if FMT_Q4_0
  let bi = n * p.nb + kt;
  r.q.x = w[bi * 4u + q];
  if (q == 0u) { r.h.x = w[p.soff + bi / 2u]; }
  r.sel = bi & 1u;
#endif
#if FMT_Q4_1
  let bi = n * p.nb + kt;
  r.q.x = w[bi * 4u + q];
  if (q == 0u) { r.h.x = w[p.soff + bi]; }
#endif
#if FMT_Q4_K
  let bi = n * p.nb + kt;
  r.q.x = w[bi * 4u + q];
  if (q == 0u) {
    let hs = p.soff + (bi >> 3u) * 4u;
    r.h = vec4<u32>(w[hs], w[hs + 1u], w[hs + 2u], w[hs + 3u]);
  }
  r.sel = bi & 7u;
#endif
#if FMT_Q8_0
  let bi = n * p.nb + kt;
  r.q = vec2<u32>(w[bi * 8u + 2u * q], w[bi * 8u + 2u * q + 1u]);
  if (q == 0u) { r.h.x = w[p.soff + bi / 2u]; }
  r.sel = bi & 1u;
#endif
#if FMT_Q8_F32
  // BE = 16: blocks 2 kt and 2 kt + 1 of the row, consecutive words.
  let bi = n * p.nb + kt * 2u;
  r.q = vec2<u32>(w[bi * 4u + 2u * q], w[bi * 4u + 2u * q + 1u]);
  if (q == 0u) { r.h.x = w[p.soff + bi]; r.h.y = w[p.soff + bi + 1u]; }
#endif
#if FMT_Q6_K
  // As FMT_Q8_F32 (the same signed bytes, quant.wgsl): part q is half q % 2 of block 2 kt + q / 2;
  // its 3 raw words in h.xyz; parts 0 and 2 (the first half of each block) also its block's scale
  // word and d in q, so that the two scales of a K-step are formed by two threads, not one.
  let bi = n * p.nb + kt * 2u + q / 2u;
  r.h = vec4<u32>(q6_raw(bi), 0u);
  if (q % 2u == 0u) { r.q = q6k_scale_raw(bi); }
  r.sel = bi;
#endif
  return r;
}
// Writes part q of tile row r: int8 words and, for part 0, the row's (a, o) (Q6_K: parts 0 and 2, one
// block's a each).
fn put(r: u32, q: u32, raw: Raw) {
#if OFFSET
  wt[r][q] = raw.q.x & 0x0f0f0f0fu;
  wt[BN + r][q] = (raw.q.x >> 4u) & 0x0f0f0f0fu;
#else
#if FMT_Q6_K
  let q6 = q6_half(raw.h.x, raw.h.y, raw.h.z, q % 2u);  // only this part's half
  wt[(q / 2u) * BN + r][(2u * q) % 4u] = q6.x;
  wt[(q / 2u) * BN + r][(2u * q) % 4u + 1u] = q6.y;
  // Its block's scale, to a fixed component (a dynamic one may become a whole-vector write, e.g. in HLSL).
  if (q == 0u) { wsc[r].x = q6k_scale_of(raw.q.x, raw.q.y, raw.sel); }
  if (q == 2u) { wsc[r].y = q6k_scale_of(raw.q.x, raw.q.y, raw.sel); }
#else
  wt[(q / 2u) * BN + r][(2u * q) % 4u] = raw.q.x;
  wt[(q / 2u) * BN + r][(2u * q) % 4u + 1u] = raw.q.y;
#endif
#endif
  if (q == 0u) {
#if FMT_Q4_0
    let d = unpack2x16float(raw.h.x)[raw.sel];
    wsc[r] = vec2<f32>(d, -8.0 * d);
#endif
#if FMT_Q4_1
    wsc[r] = unpack2x16float(raw.h.x);
#endif
#if FMT_Q4_K
    wsc[r] = q4k_scale_min(raw.h, raw.sel);
#endif
#if FMT_Q8_0
    wsc[r] = vec2<f32>(unpack2x16float(raw.h.x)[raw.sel], 0.0);
#endif
#if FMT_Q8_F32
    wsc[r] = vec2<f32>(bitcast<f32>(raw.h.x), bitcast<f32>(raw.h.y));
#endif
  }
}
// Weight slot i (< BN * 4: row i % BN, part i / BN) of K-step kt.
fn fetch_w(i: u32, n0: u32, kt: u32) -> Raw {
  var r: Raw;
  if (i < BN * 4u && n0 + i % BN < p.N) { r = fetch(n0 + i % BN, kt, i / BN); }
  return r;
}
fn put_wslot(i: u32, r: Raw) {
  if (i < BN * 4u) { put(i % BN, i / BN, r); }
}
// Activation slot i (< BT * 2: token i / 2, half i % 2; half 0 also carries (d, s)) of K-step kt:
// quantize_q8's blocks are block-major, so a K-step's tokens are contiguous and neighbouring
// threads read neighbouring 16 bytes.
struct XRaw { q: vec4<u32>, s: vec2<f32> }
fn fetch_x(i: u32, t0: u32, kt: u32) -> XRaw {
  var r: XRaw;
  let t = t0 + i / 2u;
  if (i < BT * 2u && t < p.T) {
    let b = kt * p.T + t;
    r.q = xq[b * 2u + i % 2u];
    if (i % 2u == 0u) { r.s = xs[b]; }
  }
  return r;
}
fn put_xslot(i: u32, r: XRaw) {
  if (i < BT * 2u) {
    xt[(i % 2u) * BT + i / 2u] = r.q;
    if (i % 2u == 0u) { xsc[i / 2u] = r.s; }
  }
}

// Integer dot product of one row's and one token's block words (from MAGIC_I), as exact f32.
fn idot8(w0: vec4<u32>, w1: vec4<u32>, x0: vec4<u32>, x1: vec4<u32>) -> f32 {
  let i = MAGIC_I + dot4I8Packed(w0.x, x0.x) + dot4I8Packed(w0.y, x0.y) + dot4I8Packed(w0.z, x0.z) +
          dot4I8Packed(w0.w, x0.w) + dot4I8Packed(w1.x, x1.x) + dot4I8Packed(w1.y, x1.y) +
          dot4I8Packed(w1.z, x1.z) + dot4I8Packed(w1.w, x1.w);
  return bitcast<f32>(i) - MAGIC_F;
}
fn idot4(w0: vec4<u32>, x0: vec4<u32>) -> f32 {
  let i = MAGIC_I + dot4I8Packed(w0.x, x0.x) + dot4I8Packed(w0.y, x0.y) + dot4I8Packed(w0.z, x0.z) +
          dot4I8Packed(w0.w, x0.w);
  return bitcast<f32>(i) - MAGIC_F;
}
// One (row, token) pair's K-step into accumulator c.
fn acc_step(c: f32, w0: vec4<u32>, w1: vec4<u32>, ws: vec2<f32>, x0: vec4<u32>, x1: vec4<u32>, xsc_: vec2<f32>) -> f32 {
#if SPLIT
  return fma(idot4(w0, x0), ws.x * xsc_.x, fma(idot4(w1, x1), ws.y * xsc_.x, c));
#else
#if OFFSET
  return fma(idot8(w0, w1, x0, x1), ws.x * xsc_.x, fma(ws.y, xsc_.y, c));
#else
  return fma(idot8(w0, w1, x0, x1), ws.x * xsc_.x, c);
#endif
#endif
}

fn store1(n: u32, t: u32, v: f32) {
  if (n < p.N && t < p.T) {
    let yi = p.y_off + t * p.y_stride + n;
#if ADD
    y[yi] = y[yi] + v;
#else
    y[yi] = v;
#endif
  }
}

@compute @workgroup_size(NT)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3u) {
  let n0 = wid.x * BN;
  let t0 = wid.y * BT;
  let tn = lid % WN;
  let tq = lid / WN;
  // Accumulators (generated): c_A_B = row tn + A * WN, token tq + B * WT.
  /*TILE_DECL*/
  let nkt = p.K / 32u;
  // Prefetch registers (generated): wr_S / xr_S hold slots lid + S * NT of the next K-step.
  /*TILE_PREFETCH_DECL*/
  /*TILE_FETCH_FIRST*/
  for (var kt = 0u; kt < nkt; kt++) {
    /*TILE_PUT*/
    workgroupBarrier();
    if (kt + 1u < nkt) {
      /*TILE_FETCH_NEXT*/
    }
    /*TILE_STEP*/
    workgroupBarrier();
  }
  /*TILE_STORE*/
}
