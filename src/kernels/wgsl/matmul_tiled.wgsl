// defines: BN BT RN RT ADD F16 BE
// matmul_tiled: y[t, n] (+)= sum_k W[n, k] * x[t, k] for prefill forwards (T > 8 tokens), as a
// tiled matrix product. Dispatch, tile choice and limits: kernels/matmul_tiled.cpp; CPU twin:
// ref::matmul; test: kernels/matmul_tiled_test.cpp.
// A workgroup computes a tile of BN output features x BT tokens. Per K-step of BK = 32 elements it
//   - dequantizes the BN x BK weight tile ONCE into workgroup memory (f32, k-major: ws[k][n]; each
//     thread decodes 8 weights: a quarter of a row's step),
//   - loads the BT x BK activation tile with vec4 loads into workgroup memory (k-major: xs[k][t]),
//   - and each of its (BN/RN) x (BT/RT) threads accumulates an RN x RT register tile of outputs
//     with vec4 FMAs (per k: RN/4 weight vec4s and RT/4 activation vec4s from workgroup memory,
//     RN x RT/4 vec4 FMAs).
// A thread's rows are the feature quads tn + a * (BN/RN) (a < RN/4) and its tokens the token quads
// tq + b * (BT/RT) (b < RT/4), so neighbouring threads read neighbouring vec4s (no bank conflicts).
// Each output is summed in k order 0..K-1, one FMA per k (F16: see below).
// The register tile is generated code (kernels/matmul_tiled.cpp, tiled_source()): the marker
// comments TILE_DECL (accumulators c_A_I_B), TILE_STEP_BEGIN / TILE_STEP_END (F16: per-step
// accumulators h_A_I_B, folded into c_A_I_B), TILE_STEP (4 k of loads and FMAs) and TILE_STORE
// (writes through store4), and the prefetch TILE_PREFETCH_DECL / TILE_FETCH_FIRST / TILE_FETCH_NEXT
// (fetch_w / fetch_x into registers) / TILE_PUT (put_wslot / put_xslot into workgroup memory) in
// main() are replaced before specialisation.
// Variant defines (all required):
//   FMT_*, BE, BE16, BE32  weight layout (quant.wgsl)
//   BN, BT   tile: output features x tokens per workgroup (multiples of RN and RT)
//   RN, RT   register tile: features x tokens per thread (multiples of 4)
//   ADD      accumulate into y (fused residual add) instead of overwriting
//   F16      workgroup tiles in f16 and the products of one K-step summed in f16 (vec4<f16> FMAs),
//            then added to the f32 accumulators (needs the shader-f16 feature)
// Requires: x offset and row stride multiples of 4 (vec4 loads); quantized formats: K a multiple of
// 32 (BE = 32, or 16 for FMT_Q8_F32 / FMT_Q6_K: K-quants, K a multiple of 256); FMT_F32: K a multiple of 4.
#if F16
enable f16;
#endif
struct P { K: u32, N: u32, T: u32, nb: u32, soff: u32, x_off: u32, x_stride: u32, y_off: u32, y_stride: u32 }
@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: P;

const BE: u32 = {{BE}}u;
const BN: u32 = {{BN}}u;
const BT: u32 = {{BT}}u;
const RN: u32 = {{RN}}u;
const RT: u32 = {{RT}}u;
const BK: u32 = 32u;
const WN: u32 = BN / RN;   // threads along features
const WT: u32 = BT / RT;   // threads along tokens
const NT: u32 = WN * WT;   // threads per workgroup
const SN4: u32 = BN / 4u;  // vec4s per k row of ws
const ST4: u32 = BT / 4u;  // vec4s per k row of xs
const NA: u32 = RN / 4u;
const NB: u32 = RT / 4u;

#if F16
alias S4 = vec4<f16>;
alias S = f16;
#else
alias S4 = vec4<f32>;
alias S = f32;
#endif
var<workgroup> ws: array<S4, BK * SN4>;
var<workgroup> xs: array<S4, BK * ST4>;

#include quant

// Weight tile: 4 consecutive k (from k) of tile row r.
fn put_w(k: u32, r: u32, v: vec4<f32>) {
  let i = k * SN4 + r / 4u;
  let c = r % 4u;
  ws[i][c] = S(v.x);
  ws[i + SN4][c] = S(v.y);
  ws[i + 2u * SN4][c] = S(v.z);
  ws[i + 3u * SN4][c] = S(v.w);
}

// Part q4 (0..3) of row n's 32 weights of K-step kt: 8 values as two vec4s of 4 consecutive k, at
// k offsets ka and kb within the step. Spreading a step's decoding over 4 threads per row keeps
// all threads busy (a whole block per thread would idle 3/4 of a 64-row x 256-thread workgroup).
// fetch() issues the global loads only (the raw words, into registers, during the previous step's
// FMAs); decode() does the arithmetic when they are written to workgroup memory, so no thread waits
// for memory before its FMAs. Layouts: quant.wgsl (Q4: word q4 holds elements 4 q4 .. 4 q4 + 3
// low, 16 + 4 q4 .. high; Q8: 4 per word).
struct Part { a: vec4<f32>, b: vec4<f32>, ka: u32, kb: u32 }
struct Raw { q: vec4<u32>, r: vec4<u32>, sel: u32 }
fn fetch(n: u32, kt: u32, q4: u32) -> Raw {
  var r: Raw;
#if FMT_F32
  // Row-major floats (any BE): the tail step of a K that is not a multiple of 32 reads zeros.
  let k = kt * BK + 8u * q4;
  let b = n * p.K + k;
  if (k < p.K) { r.q = vec4<u32>(w[b], w[b + 1u], w[b + 2u], w[b + 3u]); }
  if (k + 4u < p.K) { r.r = vec4<u32>(w[b + 4u], w[b + 5u], w[b + 6u], w[b + 7u]); }
#endif
#if FMT_Q4_0
  let bi = n * p.nb + kt;
  r.q.x = w[bi * 4u + q4];
  r.r.x = w[p.soff + bi / 2u];
  r.sel = bi & 1u;
#endif
#if FMT_Q4_1
  let bi = n * p.nb + kt;
  r.q.x = w[bi * 4u + q4];
  r.r.x = w[p.soff + bi];
#endif
#if FMT_Q4_K
  let bi = n * p.nb + kt;
  let hs = p.soff + (bi >> 3u) * 4u;
  r.q.x = w[bi * 4u + q4];
  r.r = vec4<u32>(w[hs], w[hs + 1u], w[hs + 2u], w[hs + 3u]);
  r.sel = bi & 7u;
#endif
#if FMT_Q8_0
  let bi = n * p.nb + kt;
  r.q.x = w[bi * 8u + 2u * q4];
  r.q.y = w[bi * 8u + 2u * q4 + 1u];
  r.r.x = w[p.soff + bi / 2u];
  r.sel = bi & 1u;
#endif
#if FMT_Q8_F32
  // BE = 16: blocks 2 kt and 2 kt + 1 of the row; part q4 is half of block 2 kt + q4 / 2.
  let bi = n * p.nb + kt * 2u + q4 / 2u;
  let base = bi * 4u + (q4 % 2u) * 2u;
  r.q.x = w[base];
  r.q.y = w[base + 1u];
  r.r.x = w[p.soff + bi];
#endif
#if FMT_Q6_K
  // As FMT_Q8_F32 (the same signed bytes, quant.wgsl): half q4 % 2 of block 2 kt + q4 / 2, its 3 raw
  // words and its scale's two words.
  let bi = n * p.nb + kt * 2u + q4 / 2u;
  r.q = vec4<u32>(q6_raw(bi), q4 % 2u);
  r.r = vec4<u32>(q6k_scale_raw(bi), bi, 0u);
#endif
  return r;
}
fn decode(r: Raw, q4: u32) -> Part {
  var v: Part;
  v.ka = 8u * q4;
  v.kb = 8u * q4 + 4u;
#if FMT_F32
  v.a = bitcast<vec4<f32>>(r.q); v.b = bitcast<vec4<f32>>(r.r);
#endif
#if FMT_Q4_0
  let d = unpack2x16float(r.r.x)[r.sel];
  v.a = (lo4(r.q.x) - 8.0) * d; v.b = (hi4(r.q.x) - 8.0) * d;
  v.ka = 4u * q4; v.kb = 16u + 4u * q4;
#endif
#if FMT_Q4_1
  let dm = unpack2x16float(r.r.x);
  v.a = lo4(r.q.x) * dm.x + dm.y; v.b = hi4(r.q.x) * dm.x + dm.y;
  v.ka = 4u * q4; v.kb = 16u + 4u * q4;
#endif
#if FMT_Q4_K
  let so = q4k_scale_min(r.r, r.sel);
  let s = so.x;
  let o = so.y;
  v.a = lo4(r.q.x) * s + o; v.b = hi4(r.q.x) * s + o;
  v.ka = 4u * q4; v.kb = 16u + 4u * q4;
#endif
#if FMT_Q8_0
  let d = unpack2x16float(r.r.x)[r.sel];
  v.a = i8x4(r.q.x) * d; v.b = i8x4(r.q.y) * d;
#endif
#if FMT_Q8_F32
  let s = bitcast<f32>(r.r.x);
  v.a = i8x4(r.q.x) * s; v.b = i8x4(r.q.y) * s;
#endif
#if FMT_Q6_K
  let s = q6k_scale_of(r.r.x, r.r.y, r.r.z);
  let q = q6_half(r.q.x, r.q.y, r.q.z, r.q.w);  // only this part's half
  v.a = i8x4(q.x) * s; v.b = i8x4(q.y) * s;
#endif
  return v;
}
// Weight-tile slot i (< BN * 4: row i % BN, part i / BN) of K-step kt, raw.
fn fetch_w(i: u32, n0: u32, kt: u32) -> Raw {
  var r: Raw;
  if (i < BN * 4u && n0 + i % BN < p.N) { r = fetch(n0 + i % BN, kt, i / BN); }
  return r;
}
fn put_wslot(i: u32, r: Raw) {
  if (i < BN * 4u) {
    let v = decode(r, i / BN);
    put_w(v.ka, i % BN, v.a);
    put_w(v.kb, i % BN, v.b);
  }
}
// Activation-tile slot i (< BT * BK / 4) of K-step kt: pairs of threads read a row's 32
// contiguous bytes (k4 = vec4 index in the step, t = tile row).
fn fetch_x(i: u32, t0: u32, kt: u32) -> vec4<f32> {
  let k4 = (i / (2u * BT)) * 2u + i % 2u;
  let t = (i / 2u) % BT;
  let kg = kt * BK + k4 * 4u;
  var v = vec4<f32>(0.0);
  if (i < BT * (BK / 4u) && t0 + t < p.T && kg < p.K) { v = x[(p.x_off + (t0 + t) * p.x_stride + kg) / 4u]; }
  return v;
}
fn put_xslot(i: u32, v: vec4<f32>) {
  if (i < BT * (BK / 4u)) {
    let k4 = (i / (2u * BT)) * 2u + i % 2u;
    let t = (i / 2u) % BT;
    let xi = k4 * 4u * ST4 + t / 4u;
    let c = t % 4u;
    xs[xi][c] = S(v.x);
    xs[xi + ST4][c] = S(v.y);
    xs[xi + 2u * ST4][c] = S(v.z);
    xs[xi + 3u * ST4][c] = S(v.w);
  }
}

// Writes feature n (< p.N) of the 4 tokens of token quad tq4 of the tile (those < p.T).
fn store4(n: u32, t4: u32, v: vec4<f32>) {
  let t = t4 * 4u;
  for (var c = 0u; c < 4u; c++) {
    if (t + c < p.T) {
      let yi = p.y_off + (t + c) * p.y_stride + n;
#if ADD
      y[yi] = y[yi] + v[c];
#else
      y[yi] = v[c];
#endif
    }
  }
}

@compute @workgroup_size(NT)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3u) {
  let n0 = wid.x * BN;
  let t0 = wid.y * BT;
  let tn = lid % WN;
  let tq = lid / WN;
  // Register tile (generated, see the header): c_A_I_B = feature quad A, lane I, token quad B.
  /*TILE_DECL*/
  let nkt = (p.K + BK - 1u) / BK;
  // Prefetch registers (generated): wr_S / xr_S hold slots lid + S * NT of the next K-step.
  /*TILE_PREFETCH_DECL*/
  /*TILE_FETCH_FIRST*/
  for (var kt = 0u; kt < nkt; kt++) {
    /*TILE_PUT*/
    workgroupBarrier();
    if (kt + 1u < nkt) {
      /*TILE_FETCH_NEXT*/
    }
    /*TILE_STEP_BEGIN*/
    for (var k = 0u; k < BK; k += 4u) {
      /*TILE_STEP*/
    }
    /*TILE_STEP_END*/
    workgroupBarrier();
  }
  /*TILE_STORE*/
}
