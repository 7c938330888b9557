// defines: BN BT FN FT SGS ADD BE
// matmul_coop: y[t, n] (+)= sum_k W[n, k] * x[t, k] for prefill forwards (T > 8 tokens) on the GPU's
// matrix units through WGSL cooperative matrices (wgpu's experimental `wgpu_cooperative_matrix`:
// 16 x 16 x 16 fragments, f16 operands, f32 sums; NVIDIA's tensor cores). The --matmul-coop variant
// of matmul_tiled.wgsl. Dispatch, tile choice and the adapter check: kernels/matmul_coop.cpp; CPU twin:
// ref::matmul; test: kernels/matmul_coop_test.cpp.
// A workgroup computes a tile of BT tokens x BN output features with NSG subgroups of SGS invocations.
// Per K-step of BK = 32 elements it
//   - dequantizes the BN x BK weight tile ONCE into workgroup memory as f16 (k-major: ws[k * BN + n]),
//     with the loads of matmul_tiled (matmul_tile_load.wgsl: each slot 8 weights, issued into registers
//     during the previous step's products),
//   - converts the BT x BK activation tile to f16 in workgroup memory (k-major: xs[k * BT + t]),
//   - and each subgroup multiplies its FT x FN fragments of 16 tokens x 16 features: per 16 k, FT
//     activation fragments (A: 16 t x 16 k, column-major in xs: coopLoad) and FN weight fragments
//     (B: 16 k x 16 n, row-major in ws: coopLoadT) into FT x FN f32 accumulator fragments.
// Subgroup s holds tokens (s / SN) * 16 FT + 16 j and features (s % SN) * 16 FN + 16 i (SN = BN / 16 FN).
// At the end each subgroup stores its fragments one at a time into its own 16 x 16 f32 slot of workgroup
// memory (cs, row-major t x n) and writes the slot to y, so partial tiles (T or N not multiples of the
// tile) write only their rows and ADD adds to y in place; the slots keep the staging at 1 KiB a subgroup
// whatever the tile.
// Rounding: weights and activations are rounded to f16 (11-bit significands) before the products;
// the order of the f32 sums inside a fragment multiply is the hardware's. Not bit-exact with
// matmul_tiled; |error| as the f16 rounding of the operands (kernels/matmul_coop_test.cpp).
// Variant defines (all required):
//   FMT_*, BE, BE32  weight layout (quant.wgsl)
//   BN, BT   tile: output features x tokens per workgroup (multiples of 16 FN and 16 FT)
//   FN, FT   fragments per subgroup along features and tokens
//   SGS      the adapter's subgroup size (fixed: min = max); NT = NSG * SGS invocations (a pipeline the driver
//            compiled to other subgroups writes NaN: see main)
//   ADD      accumulate into y (fused residual add) instead of overwriting
// Requires the device feature WGPUNativeFeature_CooperativeMatrix with 16 x 16 x 16 f16 x f16 -> f32
// fragments, shader-f16 and subgroups; x offset and row stride multiples of 4 (vec4 loads); K as
// matmul_tiled.
enable f16;
enable wgpu_cooperative_matrix;
struct P { K: u32, N: u32, T: u32, nb: u32, soff: u32, x_off: u32, x_stride: u32, y_off: u32, y_stride: u32 }
@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: P;

const BE: u32 = {{BE}}u;
const BN: u32 = {{BN}}u;
const BT: u32 = {{BT}}u;
const FN: u32 = {{FN}}u;
const FT: u32 = {{FT}}u;
const SGS: u32 = {{SGS}}u;
const BK: u32 = 32u;
const SN: u32 = BN / (16u * FN);  // subgroups along features
const NSG: u32 = SN * (BT / (16u * FT));
const NT: u32 = NSG * SGS;        // invocations per workgroup

var<workgroup> ws: array<f16, BK * BN>;
var<workgroup> xs: array<f16, BK * BT>;
var<workgroup> cs: array<f32, NSG * 256u>;
var<private> bad: bool;

#include matmul_tile_load

// Weight tile: 4 consecutive k (from k) of tile row r.
fn put_w(k: u32, r: u32, v: vec4<f32>) {
  let i = k * BN + r;
  ws[i] = f16(v.x);
  ws[i + BN] = f16(v.y);
  ws[i + 2u * BN] = f16(v.z);
  ws[i + 3u * BN] = f16(v.w);
}
fn put_wslot(i: u32, r: Raw) {
  if (i < BN * 4u) {
    let v = decode(r, i / BN);
    put_w(v.ka, i % BN, v.a);
    put_w(v.kb, i % BN, v.b);
  }
}
// Activation-tile slot i as fetch_x reads it: 4 consecutive k of tile row t.
fn put_xslot(i: u32, v: vec4<f32>) {
  if (i < BT * (BK / 4u)) {
    let k4 = (i / (2u * BT)) * 2u + i % 2u;
    let t = (i / 2u) % BT;
    let xi = k4 * 4u * BT + t;
    xs[xi] = f16(v.x);
    xs[xi + BT] = f16(v.y);
    xs[xi + 2u * BT] = f16(v.z);
    xs[xi + 3u * BT] = f16(v.w);
  }
}

// Writes the subgroup's staged fragment (slot sg of cs: 16 tokens from t x 16 features from n, row-major)
// to y: the rows < p.T and features < p.N; ADD adds. Called between two barriers.
fn write_slot(sg: u32, lane: u32, t: u32, n: u32) {
  for (var e = lane; e < 256u; e += SGS) {
    let tt = t + e / 16u;
    let nn = n + e % 16u;
    if (tt < p.T && nn < p.N) {
      let yi = p.y_off + tt * p.y_stride + nn;
      let v = select(cs[sg * 256u + e], bitcast<f32>(0x7fc00000u), bad);
#if ADD
      y[yi] = y[yi] + v;
#else
      y[yi] = v;
#endif
    }
  }
}

@compute @workgroup_size(NT)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3u,
        @builtin(subgroup_id) sg: u32, @builtin(subgroup_invocation_id) lane: u32,
        @builtin(num_subgroups) nsg: u32) {
  // The fragments assume NSG subgroups of SGS invocations (the size measured on a small shader): a driver
  // that compiled this pipeline to another subgroup size would leave tiles unwritten, so it writes NaN.
  bad = nsg != NSG;
  let n0 = wid.x * BN;
  let t0 = wid.y * BT;
  let fn0 = (sg % SN) * 16u * FN;  // the subgroup's first feature in the tile
  let ft0 = (sg / SN) * 16u * FT;  // and token
  // Accumulator fragments (generated): acc_J_I = tokens ft0 + 16 J, features fn0 + 16 I.
  /*COOP_DECL*/
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
    for (var kk = 0u; kk < BK; kk += 16u) {
      /*COOP_STEP*/
    }
    workgroupBarrier();
  }
  // Output (generated): for each fragment J, I of the subgroup in turn, coopStoreT into its slot, a barrier,
  // write_slot, a barrier (the same count in every subgroup, so the barriers are reached uniformly).
  /*COOP_STAGE*/
}
