// matmul: y[t, n] (+)= sum_k W[n, k] * x[t, k] for a quantized/float weight W (N x K) and f32
// activations x (T x K). Variants (each its own define, see kernels/matmul.cpp):
//   ROWS  rows per workgroup, LANES threads per row (LANES a power of two; lanes stride over
//         blocks and are reduced in a fixed tree order, so results are run-to-run deterministic)
//   REDUCE  LANES > 1: the cross-lane reduction (LANES = 1 needs no barrier: one thread per row,
//         the fast choice on CPU-emulated GPUs where barriers are expensive)
//   TT    tokens per workgroup: each dequantized weight block is reused for TT tokens (prefill)
//   VEC4  read activations as vec4<f32>
//   ADD   accumulate into y (fused residual add) instead of overwriting
struct P { K: u32, N: u32, T: u32, nb: u32, soff: u32, x_off: u32, x_stride: u32, y_off: u32, y_stride: u32 }
@group(0) @binding(0) var<storage, read> w: array<u32>;
#if VEC4
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
#else
@group(0) @binding(1) var<storage, read> x: array<f32>;
#endif
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: P;

const BE: u32 = {{BE}}u;
const ROWS: u32 = {{ROWS}}u;
const LANES: u32 = {{LANES}}u;
const TT: u32 = {{TT}}u;
// Per-thread partial sums live in workgroup memory (slot (r * TT + tt) * LANES + lane, written by
// one thread only) so no private array is indexed dynamically.
var<workgroup> red: array<f32, ROWS * LANES * TT>;

#include quant

// x element i of the row starting at element xb.
fn xs(xb: u32, i: u32) -> vec4<f32> {
#if VEC4
  return x[(xb + i) / 4u];
#else
  return vec4<f32>(x[xb + i], x[xb + i + 1u], x[xb + i + 2u], x[xb + i + 3u]);
#endif
}

fn block_dot(b: Blk, xb: u32) -> f32 {
  var s = dot(b.v0, xs(xb, 0u));
#if BE16
  s += dot(b.v1, xs(xb, 4u)) + dot(b.v2, xs(xb, 8u)) + dot(b.v3, xs(xb, 12u));
#endif
#if BE32
  s += dot(b.v1, xs(xb, 4u)) + dot(b.v2, xs(xb, 8u)) + dot(b.v3, xs(xb, 12u));
  s += dot(b.v4, xs(xb, 16u)) + dot(b.v5, xs(xb, 20u)) + dot(b.v6, xs(xb, 24u)) + dot(b.v7, xs(xb, 28u));
#endif
  return s;
}

@compute @workgroup_size(ROWS * LANES)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let lane = lid.x % LANES;
  let r = lid.x / LANES;
  let n = wid.x * ROWS + r;
  let t0 = wid.y * TT;
  let slot = r * TT * LANES + lane;
  for (var tt = 0u; tt < TT; tt++) { red[slot + tt * LANES] = 0.0; }
  if (n < p.N) {
    for (var b = lane; b < p.nb; b += LANES) {
      let blk = load_block(n * p.nb + b);
      for (var tt = 0u; tt < TT; tt++) {
        let t = t0 + tt;
        if (t < p.T) { red[slot + tt * LANES] += block_dot(blk, p.x_off + t * p.x_stride + b * BE); }
      }
    }
  }
#if REDUCE
  workgroupBarrier();
  for (var off = LANES / 2u; off > 0u; off >>= 1u) {
    if (lane < off) {
      for (var tt = 0u; tt < TT; tt++) {
        let i = slot + tt * LANES;
        red[i] += red[i + off];
      }
    }
    workgroupBarrier();
  }
#endif
  if (lane == 0u && n < p.N) {
    for (var tt = 0u; tt < TT; tt++) {
      let t = t0 + tt;
      if (t < p.T) {
        let yi = p.y_off + t * p.y_stride + n;
#if ADD
        y[yi] = y[yi] + red[slot + tt * LANES];
#else
        y[yi] = red[slot + tt * LANES];
#endif
      }
    }
  }
}
