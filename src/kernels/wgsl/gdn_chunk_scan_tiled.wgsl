// defines: WG JB SDIM UDIM CDIM NP
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
//            + sum_s exp(G_last - G_s) k_s[i] U[s][j] (phase 2 no longer reads S: no barrier between)
//   barrier before the next chunk. Only the n real tokens of a partial last chunk enter the state.
// Why: gdn_chunk_scan.wgsl gives each thread one column and walks DK global-memory state reads per
// token in a dependent chain with only NV * DV / 64 workgroups in flight (Qwen3.5-0.8B: 32); here the
// state is read from workgroup memory, every dot product of a chunk runs at once, and there are
// NV * DV / JB workgroups. CDIM = C (the chunk's e^{G_t} and exp(G_last - G_s) factors).
// Layout: gdn_params.wgsl.
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
    workgroupBarrier();  // S loaded (first chunk) or updated (previous chunk); EG / ED written
    var qs: array<f32, NP>;
    for (var k = 0u; k < NP; k++) {
      let pr = tid + k * WG;
      let t = pr / JB;
      let jj = pr % JB;
      let j = j0 + jj;
      if (t < n && j < p.DV) {
        let wb = p.w_off + ((t0 + t) * p.NV + h) * p.DK;
        let qb = p.q_off + (t0 + t) * p.qkv_stride + hk * p.DK;
        var ws = 0.0;
        var q = 0.0;
        for (var i = 0u; i < p.DK; i++) {
          let s = S[i * JB + jj];
          ws += work[wb + i] * s;
          q += (qkv[qb + i] * p.scale) * s;
        }
        U[t * JB + jj] = work[p.u_off + ((t0 + t) * p.NV + h) * p.DV + j] - ws;
        qs[k] = q;
      }
    }
    workgroupBarrier();  // U complete
    for (var k = 0u; k < NP; k++) {
      let pr = tid + k * WG;
      let t = pr / JB;
      let jj = pr % JB;
      let j = j0 + jj;
      if (t < n && j < p.DV) {
        var o = EG[t] * qs[k];
        for (var s = 0u; s <= t; s++) { o += work[p.p_off + mb + t * p.C + s] * U[s * JB + jj]; }
        out[p.o_off + (t0 + t) * p.o_stride + h * p.DV + j] = o;
      }
    }
    let el = EG[n - 1u];
    for (var e = tid; e < se; e += WG) {
      let i = e / JB;
      let jj = e % JB;
      if (j0 + jj < p.DV) {
        var sn = el * S[e];
        let kb = p.k_off + t0 * p.qkv_stride + hk * p.DK + i;
        for (var s = 0u; s < n; s++) { sn += ED[s] * qkv[kb + s * p.qkv_stride] * U[s * JB + jj]; }
        S[e] = sn;
      }
    }
    workgroupBarrier();  // S updated, U and EG / ED free for the next chunk
  }
  for (var e = tid; e < se; e += WG) {
    let j = j0 + e % JB;
    if (j < p.DV) { st[sb + (e / JB) * p.DV + j] = S[e]; }
  }
}
