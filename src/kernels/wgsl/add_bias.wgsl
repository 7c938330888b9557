// defines: none
// add_bias: y[y_off + t * stride + i] += b[i] for t < T, i < N (a Linear layer's bias, added
// after its matmul; e.g. Qwen2's Q/K/V projection biases, transformers modeling_qwen2.py
// `nn.Linear(..., bias=True)`).
struct P { T: u32, N: u32, y_off: u32, stride: u32 }
@group(0) @binding(0) var<storage, read> b: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: P;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let i = g.x;
  let t = g.y;
  if (i >= p.N || t >= p.T) { return; }
  let k = p.y_off + t * p.stride + i;
  y[k] = y[k] + b[i];
}
