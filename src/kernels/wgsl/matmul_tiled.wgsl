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

#include matmul_tile_load

// Weight tile: 4 consecutive k (from k) of tile row r.
fn put_w(k: u32, r: u32, v: vec4<f32>) {
  let i = k * SN4 + r / 4u;
  let c = r % 4u;
  ws[i][c] = S(v.x);
  ws[i + SN4][c] = S(v.y);
  ws[i + 2u * SN4][c] = S(v.z);
  ws[i + 3u * SN4][c] = S(v.w);
}

fn put_wslot(i: u32, r: Raw) {
  if (i < BN * 4u) {
    let v = decode(r, i / BN);
    put_w(v.ka, i % BN, v.a);
    put_w(v.kb, i % BN, v.b);
  }
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
