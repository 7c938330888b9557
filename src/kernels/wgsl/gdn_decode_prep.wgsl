// defines: none
// gdn_decode_prep: everything a Gated DeltaNet decode step (T = 1) needs before the delta rule, in
// one dispatch (KernelOptions::gdn_fuse_prep; transformers models/qwen3_5/modeling_qwen3_5.py,
// Qwen3_5GatedDeltaNet.forward: conv1d + SiLU over [q | k | v], l2norm of q and k per head,
// beta = sigmoid(b), g = -A_log.exp() * softplus(a + dt_bias)). Same operations in the same order
// as causal_conv.wgsl (SILU=1, no bias, no gates) + head_norm.wgsl (L2=1) + gdn_gates.wgsl, so the
// outputs and the conv state get the same bits as those three to four dispatches.
// Channels c < C = 2*NK*DK + VD of the projection row x[x_off + c] ([q | k | v], as the conv):
//   y[y_off + c] = silu(sum_{j<L} w[c*L + j] * E[j]),  E = [state rows 0..L-2; x[c]]
//   state row i <- E[1 + i] (i ascending; each invocation shifts only its own channel)
// Workgroups of 64 (the head_norm reduction width):
//   [0, 2*NK):            q/k head wid (DK channels at wid*DK), then y <- y / sqrt(sum(y^2) + eps)
//   [2*NK, 2*NK + NVW):   64 v channels each (NVW = ceil(VD / 64))
//   [2*NK + NVW, ...):    value heads h < NV: gates[g_off + h] = g, gates[g_off + NV + h] = beta,
//                         with a = x[a_off + h], b = x[b_off + h] (gdn_gate_math.wgsl).
// The conv state is [L-1][C] f32 at offset 0 (the sequence's conv buffer, layout of causal_conv).
#include gdn_gate_math
struct P { NK: u32, NV: u32, DK: u32, VD: u32, L: u32, C: u32, x_off: u32, y_off: u32, a_off: u32,
           b_off: u32, g_off: u32, eps: f32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read> a_log: array<f32>;
@group(0) @binding(3) var<storage, read> dt_bias: array<f32>;
@group(0) @binding(4) var<storage, read_write> st: array<f32>;
@group(0) @binding(5) var<storage, read_write> y: array<f32>;
@group(0) @binding(6) var<storage, read_write> gates: array<f32>;
@group(0) @binding(7) var<uniform> p: P;
const WG: u32 = 64u;
var<workgroup> red: array<f32, WG>;

// Extended sequence element e of channel c (causal_conv.wgsl ext() with T = 1, no input gate).
fn ext(e: u32, c: u32) -> f32 {
  if (e < p.L - 1u) { return st[e * p.C + c]; }
  return x[p.x_off + c];
}

// Conv + SiLU of channel c into y, then the shift of its state.
fn conv_channel(c: u32) {
  var a = 0.0;
  for (var j = 0u; j < p.L; j++) { a += w[c * p.L + j] * ext(j, c); }
  a = a / (1.0 + exp(-a));
  y[p.y_off + c] = a;
  for (var i = 0u; i + 1u < p.L; i++) { st[i * p.C + c] = ext(1u + i, c); }
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let nqk = 2u * p.NK;
  let nvw = (p.VD + WG - 1u) / WG;
  if (wid.x < nqk) {
    let b = p.y_off + wid.x * p.DK;
    for (var i = lid.x; i < p.DK; i += WG) { conv_channel(wid.x * p.DK + i); }
    var s = 0.0;
    for (var i = lid.x; i < p.DK; i += WG) { let v = y[b + i]; s += v * v; }
    red[lid.x] = s;
    workgroupBarrier();
    for (var o = WG / 2u; o > 0u; o >>= 1u) {
      if (lid.x < o) { red[lid.x] += red[lid.x + o]; }
      workgroupBarrier();
    }
    let scale = 1.0 / sqrt(red[0] + p.eps);
    for (var i = lid.x; i < p.DK; i += WG) { y[b + i] = y[b + i] * scale; }
  } else if (wid.x < nqk + nvw) {
    let i = (wid.x - nqk) * WG + lid.x;
    if (i < p.VD) { conv_channel(nqk * p.DK + i); }
  } else {
    let h = (wid.x - nqk - nvw) * WG + lid.x;
    if (h < p.NV) {
      gates[p.g_off + h] = gdn_decay(x[p.a_off + h], a_log[h], dt_bias[h]);
      gates[p.g_off + p.NV + h] = gdn_beta(x[p.b_off + h]);
    }
  }
}
