// defines: none
// silu_mul: SwiGLU gate (Shazeer 2020): y[t, i] = silu(g[t, i]) * u[t, i], silu(a) = a / (1 + exp(-a)).
// g and u are two column ranges of one buffer (fused gate/up output) or separate ranges.
struct P { T: u32, F: u32, g_off: u32, u_off: u32, in_stride: u32, y_off: u32 }
@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: P;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let i = g.x;
  let t = g.y;
  if (i >= p.F || t >= p.T) { return; }
  let a = src[p.g_off + t * p.in_stride + i];
  let u = src[p.u_off + t * p.in_stride + i];
  y[p.y_off + t * p.F + i] = a / (1.0 + exp(-a)) * u;
}
