// defines: NORM DV? WG?
// gdn_step: one decode token of the gated delta rule (transformers qwen3_5
// torch_recurrent_gated_delta_rule; flash-linear-attention fused_recurrent_gated_delta_rule), in
// place on the fp32 state. One invocation per (state column j < DV, value head h): columns are
// independent in the delta rule, so each thread owns S[:, j] of its head:
//   S <- exp(g) S;  u = beta (v_j - S[:, j].k);  S[:, j] <- S[:, j] + k u;  o_j = S[:, j].(scale q).
// Value head h reads key head h / (NV / NK) (repeat_interleave). Layout: gdn_params.wgsl.
// NORM=0: workgroups of 64 columns, (ceil(DV/64), NV) of them; out gets o.
// NORM=1 (KernelOptions::gdn_fuse_norm): one workgroup of WG threads (define WG) per value head h
//   (WG a multiple of 64; thread lid owns columns lid, lid + WG, ...), o kept in workgroup memory,
//   then Qwen3_5RMSNormGated of the head exactly as gated_rmsnorm.wgsl does it (threads 0..63 sum
//   o_i^2 for i = lid, lid + 64, ..., the same 64-wide tree), so out gets the same bits as
//   gdn_step + gated_rmsnorm:  out_j = (o_j / sqrt(mean(o^2) + eps)) * w_j * silu(z_j),
//   z_j = z[z_off + h*DV + j], w = nw: [DV] f32, eps = norm_eps. The define DV sizes the workgroup array.
#include gdn_params
@group(0) @binding(0) var<storage, read> qkv: array<f32>;
@group(0) @binding(1) var<storage, read> gates: array<f32>;
@group(0) @binding(2) var<storage, read_write> st: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
#if NORM
@group(0) @binding(4) var<storage, read> z: array<f32>;
@group(0) @binding(5) var<storage, read> nw: array<f32>;
@group(0) @binding(6) var<uniform> p: P;
#else
@group(0) @binding(4) var<uniform> p: P;
#endif

// Updates column j of head h's state in place and returns o_j.
fn column(h: u32, j: u32) -> f32 {
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
  return acc;
}

#if NORM
const WG: u32 = {{WG}}u;
var<workgroup> ov: array<f32, {{DV}}>;
var<workgroup> red: array<f32, 64>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let h = wid.x;
  for (var j = lid.x; j < p.DV; j += WG) { ov[j] = column(h, j); }
  workgroupBarrier();
  if (lid.x < 64u) {
    var s = 0.0;
    for (var i = lid.x; i < p.DV; i += 64u) { let v = ov[i]; s += v * v; }
    red[lid.x] = s;
  }
  workgroupBarrier();
  for (var o = 32u; o > 0u; o >>= 1u) {
    if (lid.x < o) { red[lid.x] += red[lid.x + o]; }
    workgroupBarrier();
  }
  let scale = 1.0 / sqrt(red[0] / f32(p.DV) + p.norm_eps);
  let ob = p.o_off + h * p.DV;
  let zb = p.z_off + h * p.DV;
  for (var j = lid.x; j < p.DV; j += WG) {
    let g = z[zb + j];
    out[ob + j] = (ov[j] * scale) * nw[j] * (g / (1.0 + exp(-g)));
  }
}
#else
const WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let j = wid.x * WG + lid.x;
  let h = wid.y;
  if (j >= p.DV) { return; }
  out[p.o_off + h * p.DV + j] = column(h, j);
}
#endif
