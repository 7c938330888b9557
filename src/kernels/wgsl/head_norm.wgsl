// defines: L2
// head_norm: per-head normalisation in place, one workgroup per (head, token).
// Head h of token t is x[off + t*stride + h*head_stride + i], i < D.
// L2=1: x <- x / sqrt(sum(x^2) + eps)        (transformers qwen3_5 l2norm of Gated DeltaNet q, k;
//                                              flash-linear-attention l2norm)
// L2=0: x <- (x / sqrt(mean(x^2) + eps)) * w  (QK-norm, Qwen3_5RMSNorm with (1 + w) folded into w)
// Same operation order as the CPU twins (kernels/gdn_ref.cpp l2norm_heads / rmsnorm_heads).
struct P { H: u32, D: u32, off: u32, stride: u32, head_stride: u32, eps: f32 }
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
#if L2
@group(0) @binding(1) var<uniform> p: P;
#else
@group(0) @binding(1) var<storage, read> wt: array<f32>;
@group(0) @binding(2) var<uniform> p: P;
#endif
const WG: u32 = 64u;
var<workgroup> red: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let b = p.off + wid.y * p.stride + wid.x * p.head_stride;
  var s = 0.0;
  for (var i = lid.x; i < p.D; i += WG) { let v = x[b + i]; s += v * v; }
  red[lid.x] = s;
  workgroupBarrier();
  for (var o = WG / 2u; o > 0u; o >>= 1u) {
    if (lid.x < o) { red[lid.x] += red[lid.x + o]; }
    workgroupBarrier();
  }
#if L2
  let scale = 1.0 / sqrt(red[0] + p.eps);
  for (var i = lid.x; i < p.D; i += WG) { x[b + i] = x[b + i] * scale; }
#else
  let scale = 1.0 / sqrt(red[0] / f32(p.D) + p.eps);
  for (var i = lid.x; i < p.D; i += WG) { x[b + i] = (x[b + i] * scale) * wt[i]; }
#endif
}
