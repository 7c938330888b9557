// defines: none
// matmul_tile_load: the tiled prefill matmuls' global loads (matmul_tiled.wgsl, matmul_coop.wgsl); included, never
// compiled alone. Uses the including kernel's P (K, N, T, nb, soff, x_off, x_stride), bindings w (weight words) and
// x (vec4 activations), and constants BN, BT, BK (= 32). fetch_w / fetch_x issue a K-step's loads of one tile slot
// into registers; decode() turns a weight slot's raw words into 8 f32 weights at their k offsets in the step.
#include quant

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
