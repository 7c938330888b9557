// defines: none
// gdn_chunk_scan: second phase of the chunkwise gated delta rule (after gdn_chunk_prep): the
// sequential scan over chunks, one invocation per (state column j < DV, value head h) owning
// S[:, j] (columns are independent). Per chunk (tokens t0 .. t0+n-1, G/A/P/W/U0 from the prep):
//   U   = U0 - W S                                  (new values: delta-rule corrections)
//   o_t = e^{G_t} (scale q_t).S + sum_{s<=t} P[t,s] U_s
//   S  <- e^{G_last} S + sum_s exp(G_last - G_s) k_s U_s^T
// Only the n real tokens of a partial last chunk enter the state. Layout: gdn_params.wgsl.
// Every multiply-add is an explicit fma(): WGSL lets a driver fuse a * b + c or not, and NVIDIA's
// fused the staged and unstaged forms differently (H100, 2026-12-07: the last bits differed), so
// every form names the fused operation and they agree on any driver.
#include gdn_params
@group(0) @binding(0) var<storage, read> qkv: array<f32>;
@group(0) @binding(1) var<storage, read_write> work: array<f32>;
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
  let sb = p.s_off + h * p.DK * p.DV + j;
  let nch = (p.T + p.C - 1u) / p.C;
  for (var c = 0u; c < nch; c++) {
    let t0 = c * p.C;
    let n = min(p.C, p.T - t0);
    let ch = c * p.NV + h;
    let gb = p.gc_off + ch * p.C;
    let mb = ch * p.C * p.C;
    for (var t = 0u; t < n; t++) {
      let wb = p.w_off + ((t0 + t) * p.NV + h) * p.DK;
      var ws = 0.0;
      for (var i = 0u; i < p.DK; i++) { ws = fma(work[wb + i], st[sb + i * p.DV], ws); }
      let ui = p.u_off + ((t0 + t) * p.NV + h) * p.DV + j;
      work[ui] = work[ui] - ws;
    }
    for (var t = 0u; t < n; t++) {
      let qb = p.q_off + (t0 + t) * p.qkv_stride + hk * p.DK;
      var qs = 0.0;
      for (var i = 0u; i < p.DK; i++) { qs = fma(qkv[qb + i] * p.scale, st[sb + i * p.DV], qs); }
      var o = exp(work[gb + t]) * qs;
      for (var s = 0u; s <= t; s++) {
        o = fma(work[p.p_off + mb + t * p.C + s], work[p.u_off + ((t0 + s) * p.NV + h) * p.DV + j], o);
      }
      out[p.o_off + (t0 + t) * p.o_stride + h * p.DV + j] = o;
    }
    let gl = work[gb + n - 1u];
    let el = exp(gl);
    for (var i = 0u; i < p.DK; i++) {
      var sn = el * st[sb + i * p.DV];
      for (var s = 0u; s < n; s++) {
        sn = fma(exp(gl - work[gb + s]) * qkv[p.k_off + (t0 + s) * p.qkv_stride + hk * p.DK + i],
                 work[p.u_off + ((t0 + s) * p.NV + h) * p.DV + j], sn);
      }
      st[sb + i * p.DV] = sn;
    }
  }
}
