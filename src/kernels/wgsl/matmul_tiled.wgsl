// matmul_tiled: y[t, n] (+)= sum_k W[n, k] * x[t, k] for prefill forwards (T > 8 tokens), as a
// tiled matrix product. Dispatch, tile choice and limits: kernels/matmul_tiled.cpp; CPU twin:
// ref::matmul; test: kernels/matmul_tiled_test.cpp.
// A workgroup computes a tile of BN output features x BT tokens. Per K-step of BK = 32 elements it
//   - dequantizes the BN x BK weight tile ONCE into workgroup memory (f32, k-major: ws[k][n]),
//   - loads the BT x BK activation tile with vec4 loads into workgroup memory (k-major: xs[k][t]),
//   - and each of its (BN/RN) x (BT/RT) threads accumulates an RN x RT register tile of outputs
//     with vec4 FMAs (per k: RN/4 weight vec4s and RT/4 activation vec4s from workgroup memory,
//     RN x RT/4 vec4 FMAs).
// A thread's rows are the feature quads tn + a * (BN/RN) (a < RN/4) and its tokens the token quads
// tq + b * (BT/RT) (b < RT/4), so neighbouring threads read neighbouring vec4s (no bank conflicts).
// Each output is summed in k order 0..K-1, one FMA per k (F16: see below).
// Variant defines (all required):
//   FMT_*, BE, BE16, BE32  weight layout (quant.wgsl)
//   BN, BT   tile: output features x tokens per workgroup (multiples of RN and RT)
//   RN, RT   register tile: features x tokens per thread (multiples of 4)
//   ADD      accumulate into y (fused residual add) instead of overwriting
//   F16      workgroup tiles in f16 and the products of one K-step summed in f16 (vec4<f16> FMAs),
//            then added to the f32 accumulators (needs the shader-f16 feature)
// Requires: x offset and row stride multiples of 4 (vec4 loads), K a multiple of BE.
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
const BPR: u32 = BK / BE;  // weight blocks per tile row per K-step
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

@compute @workgroup_size(NT)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3u) {
  let n0 = wid.x * BN;
  let t0 = wid.y * BT;
  let tn = lid % WN;
  let tq = lid / WN;
  var acc: array<vec4<f32>, RN * NB>;  // [a * 4 + i][b]: feature quad a, lane i, token quad b
  for (var j = 0u; j < RN * NB; j++) { acc[j] = vec4<f32>(0.0); }
  let nkt = (p.K + BK - 1u) / BK;
  for (var kt = 0u; kt < nkt; kt++) {
    let k0 = kt * BK;
    // Weight tile: BN rows x BPR blocks, consecutive threads on consecutive rows.
    for (var i = lid; i < BN * BPR; i += NT) {
      let r = i % BN;
      let j = i / BN;
      let n = n0 + r;
      let kb = k0 / BE + j;
      var b: Blk;
      if (n < p.N && kb < p.nb) { b = load_block(n * p.nb + kb); }
      let kk = j * BE;
      put_w(kk, r, b.v0);
#if BE16
      put_w(kk + 4u, r, b.v1); put_w(kk + 8u, r, b.v2); put_w(kk + 12u, r, b.v3);
#endif
#if BE32
      put_w(kk + 4u, r, b.v1); put_w(kk + 8u, r, b.v2); put_w(kk + 12u, r, b.v3);
      put_w(kk + 16u, r, b.v4); put_w(kk + 20u, r, b.v5); put_w(kk + 24u, r, b.v6); put_w(kk + 28u, r, b.v7);
#endif
    }
    // Activation tile: BT rows x BK/4 vec4s; pairs of threads read a row's 32 contiguous bytes.
    for (var i = lid; i < BT * (BK / 4u); i += NT) {
      let k4 = (i / (2u * BT)) * 2u + i % 2u;
      let t = (i / 2u) % BT;
      let kg = k0 + k4 * 4u;
      var v = vec4<f32>(0.0);
      if (t0 + t < p.T && kg < p.K) { v = x[(p.x_off + (t0 + t) * p.x_stride + kg) / 4u]; }
      let xi = k4 * 4u * ST4 + t / 4u;
      let c = t % 4u;
      xs[xi][c] = S(v.x);
      xs[xi + ST4][c] = S(v.y);
      xs[xi + 2u * ST4][c] = S(v.z);
      xs[xi + 3u * ST4][c] = S(v.w);
    }
    workgroupBarrier();
#if F16
    var acch: array<vec4<f16>, RN * NB>;
    for (var j = 0u; j < RN * NB; j++) { acch[j] = vec4<f16>(0.0h); }
#endif
    for (var k = 0u; k < BK; k++) {
      var wv: array<S4, NA>;
      var xv: array<S4, NB>;
      for (var a = 0u; a < NA; a++) { wv[a] = ws[k * SN4 + tn + a * WN]; }
      for (var b = 0u; b < NB; b++) { xv[b] = xs[k * ST4 + tq + b * WT]; }
      for (var a = 0u; a < NA; a++) {
        for (var i = 0u; i < 4u; i++) {
          for (var b = 0u; b < NB; b++) {
            let j = (a * 4u + i) * NB + b;
#if F16
            acch[j] = fma(vec4<f16>(wv[a][i]), xv[b], acch[j]);
#else
            acc[j] = fma(vec4<f32>(wv[a][i]), xv[b], acc[j]);
#endif
          }
        }
      }
    }
#if F16
    for (var j = 0u; j < RN * NB; j++) { acc[j] += vec4<f32>(acch[j]); }
#endif
    workgroupBarrier();
  }
  for (var a = 0u; a < NA; a++) {
    for (var i = 0u; i < 4u; i++) {
      let n = n0 + (tn + a * WN) * 4u + i;
      if (n >= p.N) { continue; }
      for (var b = 0u; b < NB; b++) {
        let v = acc[(a * 4u + i) * NB + b];
        for (var c = 0u; c < 4u; c++) {
          let t = t0 + (tq + b * WT) * 4u + c;
          if (t < p.T) {
            let yi = p.y_off + t * p.y_stride + n;
#if ADD
            y[yi] = y[yi] + v[c];
#else
            y[yi] = v[c];
#endif
          }
        }
      }
    }
  }
}
