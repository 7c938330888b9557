// rmsnorm: y[t, :] = x[t, :] * (1 / sqrt(mean(x[t, :]^2) + eps)) * weight  (Zhang & Sennrich 2019;
// same operation order as ggml_rms_norm followed by ggml_mul). One workgroup per token row.
struct P { D: u32, eps: f32, x_off: u32, y_off: u32, x_stride: u32, y_stride: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> wt: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: P;
const WG: u32 = 256u;
var<workgroup> red: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let t = wid.x;
  let xb = p.x_off + t * p.x_stride;
  var s = 0.0;
  for (var i = lid.x; i < p.D; i += WG) { let v = x[xb + i]; s += v * v; }
  red[lid.x] = s;
  workgroupBarrier();
  for (var off = WG / 2u; off > 0u; off >>= 1u) {
    if (lid.x < off) { red[lid.x] += red[lid.x + off]; }
    workgroupBarrier();
  }
  let scale = 1.0 / sqrt(red[0] / f32(p.D) + p.eps);
  let yb = p.y_off + t * p.y_stride;
  for (var i = lid.x; i < p.D; i += WG) { y[yb + i] = (x[xb + i] * scale) * wt[i]; }
}
