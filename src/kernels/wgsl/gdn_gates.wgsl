// defines: none
// gdn_gates: Gated DeltaNet gates (Qwen3_5GatedDeltaNet.forward, transformers qwen3_5) for T tokens
// and NV value heads: with a = src[a_off + t*src_stride + h], b = src[b_off + t*src_stride + h],
//   g    = -exp(A_log[h]) * softplus(a + dt_bias[h])   (log-space decay, <= 0)
//   beta = sigmoid(b)
// written to out[out_off + t*out_stride + h] (g) and out[out_off + t*out_stride + NV + h] (beta).
// (formulas and softplus: gdn_gate_math.wgsl)
#include gdn_gate_math
struct P { T: u32, NV: u32, a_off: u32, b_off: u32, src_stride: u32, out_off: u32, out_stride: u32 }
@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read> a_log: array<f32>;
@group(0) @binding(2) var<storage, read> dt_bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<uniform> p: P;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) id: vec3u) {
  let h = id.x;
  let t = id.y;
  if (h >= p.NV || t >= p.T) { return; }
  let a = src[p.a_off + t * p.src_stride + h];
  let b = src[p.b_off + t * p.src_stride + h];
  let o = p.out_off + t * p.out_stride;
  out[o + h] = gdn_decay(a, a_log[h], dt_bias[h]);
  out[o + p.NV + h] = gdn_beta(b);
}
