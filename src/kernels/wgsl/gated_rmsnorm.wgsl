// defines: none
// gated_rmsnorm: Qwen3_5RMSNormGated (transformers models/qwen3_5/modeling_qwen3_5.py), in place,
// one workgroup per (head, token): for head h of D values at x[x_off + t*x_stride + h*D + i],
//   x <- (x / sqrt(mean(x^2) + eps)) * w[i] * silu(z[z_off + t*z_stride + h*D + i]).
struct P { D: u32, eps: f32, x_off: u32, x_stride: u32, z_off: u32, z_stride: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read> z: array<f32>;
@group(0) @binding(2) var<storage, read> wt: array<f32>;
@group(0) @binding(3) var<uniform> p: P;
const WG: u32 = 64u;
var<workgroup> red: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let b = p.x_off + wid.y * p.x_stride + wid.x * p.D;
  let zb = p.z_off + wid.y * p.z_stride + wid.x * p.D;
  var s = 0.0;
  for (var i = lid.x; i < p.D; i += WG) { let v = x[b + i]; s += v * v; }
  red[lid.x] = s;
  workgroupBarrier();
  for (var o = WG / 2u; o > 0u; o >>= 1u) {
    if (lid.x < o) { red[lid.x] += red[lid.x + o]; }
    workgroupBarrier();
  }
  let scale = 1.0 / sqrt(red[0] / f32(p.D) + p.eps);
  for (var i = lid.x; i < p.D; i += WG) {
    let g = z[zb + i];
    x[b + i] = (x[b + i] * scale) * wt[i] * (g / (1.0 + exp(-g)));
  }
}
