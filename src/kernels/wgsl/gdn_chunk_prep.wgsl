// defines: C
// gdn_chunk_prep: first, state-independent phase of the chunkwise gated delta rule (transformers
// qwen3_5 torch_chunk_gated_delta_rule; flash-linear-attention fla/ops/gated_delta_rule/chunk.py;
// Yang et al. 2024 "Gated Delta Networks" with the WY/UT representation). One workgroup per
// (chunk c, value head h); chunk c covers tokens t0 = c*C .. t0+n-1, n = min(C, T - t0) (the last
// chunk is partial: only its n real tokens are used, so nothing past T reaches the state). Writes:
//   G[t]   = sum_{s<=t} g_s                                  (chunk-local cumulative log decay)
//   A[t,s] = beta_t exp(G_t - G_s) k_t.k_s  (s < t), 0 on and above the diagonal
//   P[t,s] = exp(G_t - G_s) (scale q_t).k_s (s <= t)          (decayed intra-chunk attention)
//   [W | U0] = (I + A)^-1 [beta e^G K | beta V]              (forward substitution, one column
//                                                              per thread, rows in order)
// gdn_chunk_scan then applies them to the state chunk by chunk. Layout: gdn_params.wgsl.
#include gdn_params
@group(0) @binding(0) var<storage, read> qkv: array<f32>;
@group(0) @binding(1) var<storage, read> gates: array<f32>;
@group(0) @binding(2) var<storage, read_write> work: array<f32>;
@group(0) @binding(3) var<uniform> p: P;
const WG: u32 = 64u;
var<workgroup> G: array<f32, {{C}}>;
var<workgroup> B: array<f32, {{C}}>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let c = wid.x;
  let h = wid.y;
  let t0 = c * p.C;
  let n = min(p.C, p.T - t0);
  let hk = key_head(h);
  let ch = c * p.NV + h;
  if (lid.x == 0u) {
    var cum = 0.0;
    for (var t = 0u; t < n; t++) {
      let r = p.g_off + (t0 + t) * p.gb_stride;
      cum += gates[r + h];
      G[t] = cum;
      B[t] = gates[r + p.NV + h];
      work[p.gc_off + ch * p.C + t] = cum;
    }
  }
  workgroupBarrier();
  let mb = ch * p.C * p.C;
  for (var idx = lid.x; idx < n * n; idx += WG) {
    let t = idx / n;
    let s = idx % n;
    if (s > t) { continue; }
    let qt = p.q_off + (t0 + t) * p.qkv_stride + hk * p.DK;
    let kt = p.k_off + (t0 + t) * p.qkv_stride + hk * p.DK;
    let ks = p.k_off + (t0 + s) * p.qkv_stride + hk * p.DK;
    var kk = 0.0;
    var qk = 0.0;
    for (var i = 0u; i < p.DK; i++) {
      kk += qkv[kt + i] * qkv[ks + i];
      qk += (qkv[qt + i] * p.scale) * qkv[ks + i];
    }
    let e = exp(G[t] - G[s]);
    work[p.a_off + mb + t * p.C + s] = select(0.0, B[t] * e * kk, s < t);
    work[p.p_off + mb + t * p.C + s] = e * qk;
  }
  storageBarrier();
  for (var col = lid.x; col < p.DK + p.DV; col += WG) {
    for (var t = 0u; t < n; t++) {
      let ta = t0 + t;
      var x: f32;
      if (col < p.DK) {
        x = B[t] * exp(G[t]) * qkv[p.k_off + ta * p.qkv_stride + hk * p.DK + col];
      } else {
        x = B[t] * qkv[p.v_off + ta * p.qkv_stride + h * p.DV + col - p.DK];
      }
      for (var s = 0u; s < t; s++) {
        var xs: f32;
        if (col < p.DK) { xs = work[p.w_off + ((t0 + s) * p.NV + h) * p.DK + col]; }
        else { xs = work[p.u_off + ((t0 + s) * p.NV + h) * p.DV + col - p.DK]; }
        x -= work[p.a_off + mb + t * p.C + s] * xs;
      }
      if (col < p.DK) { work[p.w_off + (ta * p.NV + h) * p.DK + col] = x; }
      else { work[p.u_off + (ta * p.NV + h) * p.DV + col - p.DK] = x; }
    }
  }
}
