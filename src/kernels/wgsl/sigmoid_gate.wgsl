// defines: none
// sigmoid_gate: gated attention output (Qwen3_5Attention, transformers qwen3_5):
// x[x_off + t*x_stride + i] *= sigmoid(g[g_off + t*g_stride + i]), i < N, t < T.
struct P { T: u32, N: u32, x_off: u32, x_stride: u32, g_off: u32, g_stride: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read> g: array<f32>;
@group(0) @binding(2) var<uniform> p: P;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3u) {
  let i = id.x;
  let t = id.y;
  if (i >= p.N || t >= p.T) { return; }
  let xi = p.x_off + t * p.x_stride + i;
  x[xi] = x[xi] * (1.0 / (1.0 + exp(-g[p.g_off + t * p.g_stride + i])));
}
