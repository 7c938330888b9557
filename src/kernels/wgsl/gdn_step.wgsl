// gdn_step: one decode token of the gated delta rule (transformers qwen3_5
// torch_recurrent_gated_delta_rule; flash-linear-attention fused_recurrent_gated_delta_rule), in
// place on the fp32 state. One invocation per (state column j < DV, value head h): columns are
// independent in the delta rule, so each thread owns S[:, j] of its head:
//   S <- exp(g) S;  u = beta (v_j - S[:, j].k);  S[:, j] <- S[:, j] + k u;  o_j = S[:, j].(scale q).
// Value head h reads key head h / (NV / NK) (repeat_interleave). Layout: gdn_params.wgsl.
#include gdn_params
@group(0) @binding(0) var<storage, read> qkv: array<f32>;
@group(0) @binding(1) var<storage, read> gates: array<f32>;
@group(0) @binding(2) var<storage, read_write> st: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<uniform> p: P;
const WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let j = wid.x * WG + lid.x;
  let h = wid.y;
  if (j >= p.DV) { return; }
  let hk = key_head(h);
  let qb = p.q_off + hk * p.DK;
  let kb = p.k_off + hk * p.DK;
  let decay = exp(gates[p.g_off + h]);
  let beta = gates[p.g_off + p.NV + h];
  let sb = p.s_off + h * p.DK * p.DV + j;
  var m = 0.0;
  for (var i = 0u; i < p.DK; i++) { m += (st[sb + i * p.DV] * decay) * qkv[kb + i]; }
  let u = (qkv[p.v_off + h * p.DV + j] - m) * beta;
  var acc = 0.0;
  for (var i = 0u; i < p.DK; i++) {
    let s = st[sb + i * p.DV] * decay + qkv[kb + i] * u;
    st[sb + i * p.DV] = s;
    acc += s * (qkv[qb + i] * p.scale);
  }
  out[p.o_off + h * p.DV + j] = acc;
}
