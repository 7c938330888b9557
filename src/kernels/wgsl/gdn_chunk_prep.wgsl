// defines: C STAGE RK? RQ?
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
// STAGE 1 (--gdn-prep-stage; DK, DV multiples of 4): 256 threads instead of 64; the chunk's k rows
// and (scale q) rows are first copied into workgroup memory (KS, QS: coalesced, f32 rows padded by
// one element; scalar arrays because each thread of the substitution writes its own column, and a
// write to one component of a workgroup vec4 may touch the whole vec4 in WGSL's memory model), A stays in workgroup memory (AM; the work buffer's A rows are not written: only this kernel
// reads them), and the forward substitution keeps each column's solved rows in place of the staged
// rows (slot (t, col) of KS holds k_t[col] until the thread owning column col overwrites it with
// W[t][col]; QS's slots take U0's columns: q is no longer read after the barrier). Every sum keeps its
// terms, rounding and order: the same bits as STAGE 0 (test: gdn_ops_test
// TiledScanSameBitsAsOneColumnScan). Workgroup memory: 4 C (DK + max(DK, DV) + 2) + 4 C^2 + 8 C bytes
// (gdn_prep_staged decides whether it fits).
// Every multiply-add is an explicit fma(): WGSL lets a driver fuse a * b + c or not, and NVIDIA's
// fused the staged and unstaged forms differently (H100, 2026-12-07: the last bits differed), so
// every form names the fused operation and they agree on any driver.
#include gdn_params
@group(0) @binding(0) var<storage, read> qkv: array<f32>;
@group(0) @binding(1) var<storage, read> gates: array<f32>;
@group(0) @binding(2) var<storage, read_write> work: array<f32>;
@group(0) @binding(3) var<uniform> p: P;
var<workgroup> G: array<f32, {{C}}>;
var<workgroup> B: array<f32, {{C}}>;
#if STAGE
const WG: u32 = 256u;
const RK: u32 = {{RK}}u;  // f32 per row of KS: DK + 1 (padded: the rows of a warp's keys hit different banks)
const RQ: u32 = {{RQ}}u;  // f32 per row of QS: max(DK, DV) + 1
var<workgroup> KS: array<f32, {{C}} * RK>;  // k rows, then W rows (forward substitution)
var<workgroup> QS: array<f32, {{C}} * RQ>;  // (scale q) rows, then U0 rows
var<workgroup> AM: array<f32, {{C}} * {{C}}>;     // A[t][s]
#else
const WG: u32 = 64u;
#endif

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
#if STAGE
  for (var e = lid.x; e < n * p.DK; e += WG) {
    let t = e / p.DK;
    let i = e % p.DK;
    KS[t * RK + i] = qkv[p.k_off + (t0 + t) * p.qkv_stride + hk * p.DK + i];
    QS[t * RQ + i] = qkv[p.q_off + (t0 + t) * p.qkv_stride + hk * p.DK + i] * p.scale;
  }
#endif
  workgroupBarrier();
  let mb = ch * p.C * p.C;
  for (var idx = lid.x; idx < n * n; idx += WG) {
    let t = idx / n;
    let s = idx % n;
    if (s > t) { continue; }
    var kk = 0.0;
    var qk = 0.0;
#if STAGE
    for (var i = 0u; i < p.DK; i++) {
      let ks = KS[s * RK + i];
      kk = fma(KS[t * RK + i], ks, kk);
      qk = fma(QS[t * RQ + i], ks, qk);
    }
    let e = exp(G[t] - G[s]);
    AM[t * p.C + s] = select(0.0, B[t] * e * kk, s < t);
#else
    let qt = p.q_off + (t0 + t) * p.qkv_stride + hk * p.DK;
    let kt = p.k_off + (t0 + t) * p.qkv_stride + hk * p.DK;
    let ks = p.k_off + (t0 + s) * p.qkv_stride + hk * p.DK;
    for (var i = 0u; i < p.DK; i++) {
      kk = fma(qkv[kt + i], qkv[ks + i], kk);
      qk = fma(qkv[qt + i] * p.scale, qkv[ks + i], qk);
    }
    let e = exp(G[t] - G[s]);
    work[p.a_off + mb + t * p.C + s] = select(0.0, B[t] * e * kk, s < t);
#endif
    work[p.p_off + mb + t * p.C + s] = e * qk;
  }
#if STAGE
  workgroupBarrier();  // AM complete; KS / QS no longer read as k / q rows but by their column's owner
  for (var col = lid.x; col < p.DK + p.DV; col += WG) {
    let kcol = col < p.DK;
    let cc = select(col - p.DK, col, kcol);
    for (var t = 0u; t < n; t++) {
      let ta = t0 + t;
      var x: f32;
      if (kcol) {
        x = B[t] * exp(G[t]) * KS[t * RK + cc];
      } else {
        x = B[t] * qkv[p.v_off + ta * p.qkv_stride + h * p.DV + cc];
      }
      for (var s = 0u; s < t; s++) {
        var xs: f32;
        if (kcol) { xs = KS[s * RK + cc]; }
        else { xs = QS[s * RQ + cc]; }
        x = fma(-AM[t * p.C + s], xs, x);
      }
      if (kcol) {
        KS[t * RK + cc] = x;
        work[p.w_off + (ta * p.NV + h) * p.DK + cc] = x;
      } else {
        QS[t * RQ + cc] = x;
        work[p.u_off + (ta * p.NV + h) * p.DV + cc] = x;
      }
    }
  }
#else
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
        x = fma(-work[p.a_off + mb + t * p.C + s], xs, x);
      }
      if (col < p.DK) { work[p.w_off + (ta * p.NV + h) * p.DK + col] = x; }
      else { work[p.u_off + (ta * p.NV + h) * p.DV + col - p.DK] = x; }
    }
  }
#endif
}
