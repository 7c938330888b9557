// defines: none
// rmsnorm: y[t, :] = x[t, :] * (1 / sqrt(mean(x[t, :]^2) + eps)) * weight  (Zhang & Sennrich 2019;
// same operation order as ggml_rms_norm followed by ggml_mul). One workgroup per token row.
// The sum of squares comes from rms_sum.wgsl, shared with matmul.wgsl's NORM prologue (bit-identical).
// Variant defines: none.
struct P { D: u32, eps: f32, x_off: u32, y_off: u32, x_stride: u32, y_stride: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> wt: array<f32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: P;
const WG: u32 = 256u;

fn rms_x(i: u32) -> f32 { return x[i]; }
#include rms_sum

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let t = wid.x;
  let xb = p.x_off + t * p.x_stride;
  let ss = rms_sum_squares(lid.x, WG, xb, p.D);
  let scale = 1.0 / sqrt(ss / f32(p.D) + p.eps);
  let yb = p.y_off + t * p.y_stride;
  for (var i = lid.x; i < p.D; i += WG) { y[yb + i] = (x[xb + i] * scale) * wt[i]; }
}
