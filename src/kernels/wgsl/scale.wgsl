// defines: none
// scale: x[off + i] *= s for i < n, in place (Gemma 3's embedding scale sqrt(d_model)).
struct P { n: u32, off: u32, s: f32 }
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<uniform> p: P;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let i = g.y * 65535u * 64u + g.x;
  if (i >= p.n) { return; }
  x[p.off + i] = x[p.off + i] * p.s;
}
