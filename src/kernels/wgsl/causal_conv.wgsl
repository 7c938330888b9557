// defines: BIAS FUSED GATE_IN GATE_OUT SILU UPDATE
// causal_conv: causal depthwise conv1d over T new rows with a rolling state of the previous L-1
// input rows (LFM2 ShortConv, transformers models/lfm2/modeling_lfm2.py Lfm2ShortConv.slow_forward;
// Mamba-style conv1d of Gated DeltaNet, models/qwen3_next/modeling_qwen3_next.py). Per channel c:
//   u[t] = x[t] (* gi[t] when GATE_IN)                         gated input row t
//   E    = [state rows 0..L-2 (oldest first), u[0..T-1]]       extended sequence
//   a    = sum_{j<L} w[c*L + j] * E[t + j] (+ bias[c] when BIAS), summed j = 0, 1, ...
//   y[t] = (SILU ? silu(a) : a) (* go[t] when GATE_OUT)
// UPDATE=0: one invocation per (channel, token); reads the state, writes y.
// UPDATE=1: one invocation per channel; state row i = E[T + i], i ascending (row T+i is read
//           before anything at or above it is written, so no race).
// FUSED=1:  conv and state update in one dispatch (KernelOptions::fuse_conv_state, forwards of a
//           few tokens): one invocation per channel computes y[t], t = 0..T-1, exactly as
//           UPDATE=0 does, then shifts its channel's state as UPDATE=1 does. An invocation touches
//           only its own channel's state (no cross-invocation hazard); same bits as UPDATE=0 + 1.
// Offsets/strides in f32 elements; the state is [L-1][C] at s_off.
struct P { T: u32, C: u32, L: u32, x_off: u32, x_stride: u32, gi_off: u32, gi_stride: u32, go_off: u32,
           go_stride: u32, s_off: u32, y_off: u32, y_stride: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> gi: array<f32>;
@group(0) @binding(2) var<storage, read> go: array<f32>;
@group(0) @binding(3) var<storage, read> w: array<f32>;
@group(0) @binding(4) var<storage, read> bias: array<f32>;
@group(0) @binding(5) var<storage, read_write> st: array<f32>;
@group(0) @binding(6) var<storage, read_write> y: array<f32>;
@group(0) @binding(7) var<uniform> p: P;

fn gated(t: u32, c: u32) -> f32 {
  var v = x[p.x_off + t * p.x_stride + c];
#if GATE_IN
  v = v * gi[p.gi_off + t * p.gi_stride + c];
#endif
  return v;
}

fn ext(e: u32, c: u32) -> f32 {
  let h = p.L - 1u;
  if (e < h) { return st[p.s_off + e * p.C + c]; }
  return gated(e - h, c);
}

fn update_state(c: u32) {
  for (var i = 0u; i + 1u < p.L; i++) {
    st[p.s_off + i * p.C + c] = ext(p.T + i, c);
  }
}

fn conv_at(t: u32, c: u32) {
  var a = 0.0;
  for (var j = 0u; j < p.L; j++) { a += w[c * p.L + j] * ext(t + j, c); }
#if BIAS
  a += bias[c];
#endif
#if SILU
  a = a / (1.0 + exp(-a));
#endif
#if GATE_OUT
  a = a * go[p.go_off + t * p.go_stride + c];
#endif
  y[p.y_off + t * p.y_stride + c] = a;
}

#if FUSED
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let c = g.x;
  if (c >= p.C) { return; }
  for (var t = 0u; t < p.T; t++) { conv_at(t, c); }
  update_state(c);
}
#else
#if UPDATE
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let c = g.x;
  if (c >= p.C) { return; }
  update_state(c);
}
#else
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let c = g.x;
  let t = g.y;
  if (c >= p.C || t >= p.T) { return; }
  conv_at(t, c);
}
#endif
#endif
