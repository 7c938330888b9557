// matmul: y[t, n] (+)= sum_k W[n, k] * x[t, k] for a quantized/float weight W (N x K) and f32
// activations x (T x K). Variants (each its own define, see kernels/matmul.cpp):
//   ROWS  rows per workgroup, LANES threads per row (LANES a power of two; lanes stride over
//         blocks and are reduced in a fixed tree order, so results are run-to-run deterministic)
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
var<workgroup> red: array<f32, ROWS * LANES * TT>;

#include quant

@compute @workgroup_size(ROWS * LANES)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let lane = lid.x % LANES;
  let r = lid.x / LANES;
  let n = wid.x * ROWS + r;
  let t0 = wid.y * TT;
  var acc: array<f32, TT>;
  for (var tt = 0u; tt < TT; tt++) { acc[tt] = 0.0; }
  if (n < p.N) {
    for (var b = lane; b < p.nb; b += LANES) {
      var wv: array<f32, BE>;
      dequant_block(n * p.nb + b, &wv);
      for (var tt = 0u; tt < TT; tt++) {
        let t = t0 + tt;
        if (t < p.T) {
          let xb = p.x_off + t * p.x_stride + b * BE;
          var s = 0.0;
#if VEC4
          for (var i = 0u; i < BE; i += 4u) {
            s += dot(vec4<f32>(wv[i], wv[i + 1u], wv[i + 2u], wv[i + 3u]), x[(xb + i) / 4u]);
          }
#else
          for (var i = 0u; i < BE; i++) { s += wv[i] * x[xb + i]; }
#endif
          acc[tt] += s;
        }
      }
    }
  }
  for (var tt = 0u; tt < TT; tt++) { red[(r * TT + tt) * LANES + lane] = acc[tt]; }
  workgroupBarrier();
  for (var off = LANES / 2u; off > 0u; off >>= 1u) {
    if (lane < off) {
      for (var tt = 0u; tt < TT; tt++) {
        let i = (r * TT + tt) * LANES + lane;
        red[i] += red[i + off];
      }
    }
    workgroupBarrier();
  }
  if (lane == 0u && n < p.N) {
    for (var tt = 0u; tt < TT; tt++) {
      let t = t0 + tt;
      if (t < p.T) {
        let yi = p.y_off + t * p.y_stride + n;
#if ADD
        y[yi] = y[yi] + red[(r * TT + tt) * LANES];
#else
        y[yi] = red[(r * TT + tt) * LANES];
#endif
      }
    }
  }
}
