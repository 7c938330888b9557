// defines: none
// gelu_mul: GeGLU gate (Gemma 3 MLP, transformers modeling_gemma3.py Gemma3MLP with
// gelu_pytorch_tanh): y[t, i] = gelu_tanh(g[t, i]) * u[t, i],
// gelu_tanh(a) = 0.5 a (1 + tanh(sqrt(2/pi) (a + 0.044715 a^3))) (CPU twin: ref::gelu_tanh).
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
  // clamp: tanh(+-15) is +-1 in f32 already; keeps a backend tanh built on exp() away from inf / inf.
  let z = clamp(0.7978845608028654 * (a + 0.044715 * a * a * a), -15.0, 15.0);
  y[p.y_off + t * p.F + i] = 0.5 * a * (1.0 + tanh(z)) * u;
}
