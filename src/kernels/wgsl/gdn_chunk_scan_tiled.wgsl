// defines: WG JB SDIM UDIM CDIM NP STAGE PF LQ?
// gdn_chunk_scan_tiled: the sequential scan of the chunkwise gated delta rule (after gdn_chunk_prep),
// one workgroup of WG threads per (tile of JB state columns j0 .. j0+JB-1, value head h), the tile
// S[0..DK-1][j0..j0+JB-1] kept in workgroup memory for the whole prompt (SDIM = DK*JB floats; the
// columns of S are independent, so tiles never meet). Per chunk (tokens t0 .. t0+n-1, G/A/P/W/U0
// from the prep), the same arithmetic in the same order as gdn_chunk_scan.wgsl's one invocation per
// column (so the same bits), spread over the workgroup:
//   phase 1, one (t, j) pair per thread (NP pairs at most, pair = lid + k*WG, t = pair / JB):
//            U[t][j] = U0[t][j] - W_t.S[:, j]    (into workgroup memory U, UDIM = C*JB floats)
//            qs      = (scale q_t).S[:, j]       (kept in a register until phase 2)
//   barrier; phase 2, the same pairs: o_t[j] = e^{G_t} qs + sum_{s<=t} P[t,s] U[s][j]
//            phase 3, one state element (i, j) at a time: S[i][j] = e^{G_last} S[i][j]
//            + sum_s exp(G_last - G_s) k_s[i] U[s][j] (phase 2 no longer reads S: no barrier between,
//            except with STAGE: k's rows are staged between them)
//   barrier before the next chunk. Only the n real tokens of a partial last chunk enter the state.
// Why: gdn_chunk_scan.wgsl gives each thread one column and walks DK global-memory state reads per
// token in a dependent chain with only NV * DV / 64 workgroups in flight (Qwen3.5-0.8B: 32); here the
// state is read from workgroup memory, every dot product of a chunk runs at once, and there are
// NV * DV / JB workgroups. CDIM = C (the chunk's e^{G_t} and exp(G_last - G_s) factors).
// STAGE 1 (--gdn-scan-stage; DK a multiple of 4): the chunk's rows are first copied into workgroup
// memory, coalesced, by the whole workgroup: W and (scale q) (scaled once: the same rounded product
// the unstaged form multiplies by) into A and B before phase 1, then k into A (W is no longer read)
// while phase 2 runs, with a barrier before phase 3. The dot products then read vec4s of A / B
// (rows padded by one vec4: the 4 tokens of a warp hit different banks) instead of walking global
// memory in a dependent chain, and phase 3 gives each thread 4 consecutive state rows of one column
// (4 independent sums sharing each vec4 of k). Every sum keeps its terms, rounding and order: the
// same bits as STAGE 0 (test: gdn_ops_test TiledScanSameBitsAsOneColumnScan). Workgroup memory:
// 2 * C * (DK / 4 + 1) vec4 more (gdn_scan_tile decides whether it fits).
// PF 1 (--gdn-scan-prefetch; with STAGE only): the staging's global loads leave the barriers' path:
// each thread loads its LQ vec4 of the chunk's k rows into registers before phase 1 (stored into A
// after phase 1) and its LQ vec4 of the next chunk's W and q rows before phase 2 (stored into A and B
// at the next chunk's start), so their latency overlaps the dot products instead of stalling every
// thread at a barrier. The same values reach the same workgroup arrays: the same bits as PF 0.
// Layout: gdn_params.wgsl.
// Every multiply-add is an explicit fma(): WGSL lets a driver fuse a * b + c or not, and NVIDIA's
// fused the staged and unstaged forms differently (H100, 2026-12-07: the last bits differed), so
// every form names the fused operation and they agree on any driver.
#include gdn_params
@group(0) @binding(0) var<storage, read> qkv: array<f32>;
@group(0) @binding(1) var<storage, read_write> work: array<f32>;
@group(0) @binding(2) var<storage, read_write> st: array<f32>;
@group(0) @binding(3) var<storage, read_write> out: array<f32>;
@group(0) @binding(4) var<uniform> p: P;
const WG: u32 = {{WG}}u;
const JB: u32 = {{JB}}u;
const NP: u32 = {{NP}}u;
var<workgroup> S: array<f32, {{SDIM}}>;
var<workgroup> U: array<f32, {{UDIM}}>;
var<workgroup> EG: array<f32, {{CDIM}}>;  // e^{G_t}
var<workgroup> ED: array<f32, {{CDIM}}>;  // exp(G_last - G_s)
#if STAGE
const DK4: u32 = {{SDIM}}u / JB / 4u;  // vec4 per key row (SDIM = DK * JB)
const RS: u32 = DK4 + 1u;               // padded row stride of A and B (vec4)
var<workgroup> A: array<vec4<f32>, {{CDIM}} * RS>;  // the chunk's W rows (phase 1), then its k rows (phase 3)
var<workgroup> B: array<vec4<f32>, {{CDIM}} * RS>;  // the chunk's (scale q) rows

// vec4 e of a chunk's rows (row t = e / DK4, elements 4 (e % DK4) .. + 3) of W, (scale q) or k.
fn w_quad(e: u32, t0: u32, h: u32) -> vec4<f32> {
  let b = p.w_off + ((t0 + e / DK4) * p.NV + h) * p.DK + 4u * (e % DK4);
  return vec4<f32>(work[b], work[b + 1u], work[b + 2u], work[b + 3u]);
}
fn q_quad(e: u32, t0: u32, hk: u32) -> vec4<f32> {
  let b = p.q_off + (t0 + e / DK4) * p.qkv_stride + hk * p.DK + 4u * (e % DK4);
  return vec4<f32>(qkv[b] * p.scale, qkv[b + 1u] * p.scale, qkv[b + 2u] * p.scale, qkv[b + 3u] * p.scale);
}
fn k_quad(e: u32, t0: u32, hk: u32) -> vec4<f32> {
  let b = p.k_off + (t0 + e / DK4) * p.qkv_stride + hk * p.DK + 4u * (e % DK4);
  return vec4<f32>(qkv[b], qkv[b + 1u], qkv[b + 2u], qkv[b + 3u]);
}
// Slot of vec4 e in A / B (rows padded to RS).
fn slot(e: u32) -> u32 { return (e / DK4) * RS + e % DK4; }
#if PF
const LQ: u32 = {{LQ}}u;  // vec4 of a chunk's rows per thread: ceil(C * DK4 / WG)
#else
// Rows 0 .. n-1 of a chunk into A or B.
fn stage_w(tid: u32, n: u32, t0: u32, h: u32) {
  for (var e = tid; e < n * DK4; e += WG) { A[slot(e)] = w_quad(e, t0, h); }
}
fn stage_q(tid: u32, n: u32, t0: u32, hk: u32) {
  for (var e = tid; e < n * DK4; e += WG) { B[slot(e)] = q_quad(e, t0, hk); }
}
fn stage_k(tid: u32, n: u32, t0: u32, hk: u32) {
  for (var e = tid; e < n * DK4; e += WG) { A[slot(e)] = k_quad(e, t0, hk); }
}
#endif
#endif

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let j0 = wid.x * JB;
  let h = wid.y;
  let tid = lid.x;
  let hk = key_head(h);
  let sb = p.s_off + h * p.DK * p.DV;
  let se = p.DK * JB;  // elements of the tile
  for (var e = tid; e < se; e += WG) {
    let j = j0 + e % JB;
    if (j < p.DV) { S[e] = st[sb + (e / JB) * p.DV + j]; }
  }
  let nch = (p.T + p.C - 1u) / p.C;
#if STAGE
#if PF
  var pw: array<vec4<f32>, LQ>;  // the next chunk's W and q vec4, then this chunk's
  var pq: array<vec4<f32>, LQ>;
  var pk: array<vec4<f32>, LQ>;  // this chunk's k vec4
  {
    let n0 = min(p.C, p.T);
    for (var k = 0u; k < LQ; k++) {
      let e = tid + k * WG;
      if (e < n0 * DK4) {
        pw[k] = w_quad(e, 0u, h);
        pq[k] = q_quad(e, 0u, hk);
      }
    }
  }
#endif
#endif
  for (var c = 0u; c < nch; c++) {
    let t0 = c * p.C;
    let n = min(p.C, p.T - t0);
    let ch = c * p.NV + h;
    let gb = p.gc_off + ch * p.C;
    let mb = ch * p.C * p.C;
    let gl = work[gb + n - 1u];
    for (var t = tid; t < n; t += WG) {
      EG[t] = exp(work[gb + t]);
      ED[t] = exp(gl - work[gb + t]);
    }
#if STAGE
#if PF
    for (var k = 0u; k < LQ; k++) {
      let e = tid + k * WG;
      if (e < n * DK4) {
        A[slot(e)] = pw[k];
        B[slot(e)] = pq[k];
        pk[k] = k_quad(e, t0, hk);
      }
    }
#else
    stage_w(tid, n, t0, h);
    stage_q(tid, n, t0, hk);
#endif
#endif
    workgroupBarrier();  // S loaded (first chunk) or updated (previous chunk); EG / ED written (STAGE: A = W, B = q)
    var qs: array<f32, NP>;
    for (var k = 0u; k < NP; k++) {
      let pr = tid + k * WG;
      let t = pr / JB;
      let jj = pr % JB;
      let j = j0 + jj;
      if (t < n && j < p.DV) {
        var ws = 0.0;
        var q = 0.0;
#if STAGE
        for (var i4 = 0u; i4 < DK4; i4++) {
          let w = A[t * RS + i4];
          let qv = B[t * RS + i4];
          let s0 = S[(4u * i4) * JB + jj];
          let s1 = S[(4u * i4 + 1u) * JB + jj];
          let s2 = S[(4u * i4 + 2u) * JB + jj];
          let s3 = S[(4u * i4 + 3u) * JB + jj];
          ws = fma(w.x, s0, ws);
          q = fma(qv.x, s0, q);
          ws = fma(w.y, s1, ws);
          q = fma(qv.y, s1, q);
          ws = fma(w.z, s2, ws);
          q = fma(qv.z, s2, q);
          ws = fma(w.w, s3, ws);
          q = fma(qv.w, s3, q);
        }
#else
        let wb = p.w_off + ((t0 + t) * p.NV + h) * p.DK;
        let qb = p.q_off + (t0 + t) * p.qkv_stride + hk * p.DK;
        for (var i = 0u; i < p.DK; i++) {
          let s = S[i * JB + jj];
          ws = fma(work[wb + i], s, ws);
          q = fma(qkv[qb + i] * p.scale, s, q);
        }
#endif
        U[t * JB + jj] = work[p.u_off + ((t0 + t) * p.NV + h) * p.DV + j] - ws;
        qs[k] = q;
      }
    }
    workgroupBarrier();  // U complete
#if STAGE
#if PF
    for (var k = 0u; k < LQ; k++) {  // A's W rows were last read before the barrier above
      let e = tid + k * WG;
      if (e < n * DK4) { A[slot(e)] = pk[k]; }
    }
    if (c + 1u < nch) {  // the next chunk's W and q rows, stored at its start
      let t1 = t0 + p.C;
      let n1 = min(p.C, p.T - t1);
      for (var k = 0u; k < LQ; k++) {
        let e = tid + k * WG;
        if (e < n1 * DK4) {
          pw[k] = w_quad(e, t1, h);
          pq[k] = q_quad(e, t1, hk);
        }
      }
    }
#else
    stage_k(tid, n, t0, hk);  // A's W rows were last read before the barrier above
#endif
#endif
    for (var k = 0u; k < NP; k++) {
      let pr = tid + k * WG;
      let t = pr / JB;
      let jj = pr % JB;
      let j = j0 + jj;
      if (t < n && j < p.DV) {
        var o = EG[t] * qs[k];
        for (var s = 0u; s <= t; s++) { o = fma(work[p.p_off + mb + t * p.C + s], U[s * JB + jj], o); }
        out[p.o_off + (t0 + t) * p.o_stride + h * p.DV + j] = o;
      }
    }
    let el = EG[n - 1u];
#if STAGE
    workgroupBarrier();  // A = k
    for (var e = tid; e < DK4 * JB; e += WG) {  // state rows 4 i4 .. 4 i4 + 3 of column jj
      let i4 = e / JB;
      let jj = e % JB;
      if (j0 + jj < p.DV) {
        let r = 4u * i4 * JB + jj;
        var sn0 = el * S[r];
        var sn1 = el * S[r + JB];
        var sn2 = el * S[r + 2u * JB];
        var sn3 = el * S[r + 3u * JB];
        for (var s = 0u; s < n; s++) {
          let ed = ED[s];
          let k = A[s * RS + i4];
          let us = U[s * JB + jj];
          sn0 = fma(ed * k.x, us, sn0);
          sn1 = fma(ed * k.y, us, sn1);
          sn2 = fma(ed * k.z, us, sn2);
          sn3 = fma(ed * k.w, us, sn3);
        }
        S[r] = sn0;
        S[r + JB] = sn1;
        S[r + 2u * JB] = sn2;
        S[r + 3u * JB] = sn3;
      }
    }
#else
    for (var e = tid; e < se; e += WG) {
      let i = e / JB;
      let jj = e % JB;
      if (j0 + jj < p.DV) {
        var sn = el * S[e];
        let kb = p.k_off + t0 * p.qkv_stride + hk * p.DK + i;
        for (var s = 0u; s < n; s++) { sn = fma(ED[s] * qkv[kb + s * p.qkv_stride], U[s * JB + jj], sn); }
        S[e] = sn;
      }
    }
#endif
    workgroupBarrier();  // S updated, U and EG / ED free for the next chunk
  }
  for (var e = tid; e < se; e += WG) {
    let j = j0 + e % JB;
    if (j < p.DV) { st[sb + (e / JB) * p.DV + j] = S[e]; }
  }
}
