// attention_flash: causal GQA attention for T > 1 query tokens (prefill chunks, a turn's new tokens)
// as a register-tiled flash attention (FlashAttention-2, Dao 2023; online softmax, Milakov &
// Gimelshein 2018). Dispatch and tile choice: kernels::attention (ops.cpp, KernelOptions::
// attention_flash); CPU twin: ref::attention; test: ops_test.cpp Ops.AttentionFlash*.
// The rows of KV head hk are i = t * G + g (token t, query head hk * G + g, G = Hq / Hkv). One
// workgroup per (block of BR consecutive rows, KV head, key split). Its Q block stays in workgroup
// memory; per tile of BC keys (K and V rows loaded once, vec4, coalesced, for all BR rows):
//   1. scores: thread (ty, tx) computes an RM x RN register tile S[r][u] = q(row ty*RM + r) .
//      k(key tx + TX*u) (fma over the head dim in order), scaled; masked keys (j > pos0 + t, or
//      outside the split) get -3.4e38; per row the max of its RN scores -> pm.
//   2. online softmax: every thread of a row group forms the row's new max from the TX partial
//      maxes (same inputs, same order: the same value in all TX threads), its probabilities
//      p = e^(s - m) (0 for masked keys) -> pt (key-major), the rescale factor corr = e^(m_old - m),
//      and its own partial row sum l = l * corr + sum_u p (the TX partial sums are added at the end).
//   3. PV: the thread's RM rows x RD vec4 output slice (dims 4 * (tx + TX*c)):
//      acc = acc * corr + sum_j p[r][j] * v[j] (keys in order).
// Tiles past the block's last visible key are never loaded (causal skip); masking costs one compare
// per score. Every sum runs in a fixed order: results are deterministic.
// Variants (all required):
//   HD4 head dim / 4;  BR rows per workgroup;  BC keys per tile;  RM rows per thread (2 or 4);
//   TX threads per row group (BC and HD4 multiples of TX); KV_SHARED 1: V is loaded into K's
//   workgroup array after the scores (less memory, for large head dims);  SPLIT as attention.wgsl:
//   workgroup z handles keys [z * split_len, (z+1) * split_len) and writes the unnormalised partial
//   (m, l, acc[HD]) at ((t * Hq + h) * n_split + z) * (HD + 2) for attention_combine.wgsl (a row with
//   no visible key in its split writes m = -3.4e38, l = 0, acc = 0).
// Workgroup memory (f32): (BR + BC * (2 - KV_SHARED)) * (HD + 4) + BC * (BR / RM + 1) * RM + 2 * BR * TX
// (ops.cpp checks it against maxComputeWorkgroupStorageSize).
struct P { T: u32, pos0: u32, Hq: u32, Hkv: u32, HD: u32, q_off: u32, q_stride: u32, o_off: u32,
           o_stride: u32, kv_dim: u32, scale: f32, split_len: u32, n_split: u32 }
@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> kc: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> vc: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> o: array<f32>;
@group(0) @binding(4) var<uniform> p: P;

alias RV = vec{{RM}}<f32>;       // one value per row of a thread's row group
const HD4: u32 = {{HD4}}u;
const HS: u32 = HD4 + 1u;        // padded row stride (vec4) of the Q and K/V tiles
const BR: u32 = {{BR}}u;
const BC: u32 = {{BC}}u;
const RM: u32 = {{RM}}u;
const TX: u32 = {{TX}}u;
const TY: u32 = BR / RM;         // row groups
const NT: u32 = TX * TY;         // threads
const RN: u32 = BC / TX;         // keys per thread in the score phase
const RD: u32 = HD4 / TX;        // output vec4s per row per thread
const PS: u32 = TY + 1u;         // padded key stride of pt (in RV)
const NEG: f32 = -3.402823466e38;

var<workgroup> qs: array<vec4<f32>, BR * HS>;
var<workgroup> ks: array<vec4<f32>, BC * HS>;
#if KV_SHARED
#else
var<workgroup> vs: array<vec4<f32>, BC * HS>;
#endif
var<workgroup> pt: array<RV, BC * PS>;   // probabilities, key-major: pt[j * PS + ty][r]
var<workgroup> pm: array<f32, BR * TX>;  // per row, per tx: partial max (at the end: partial sum)

fn load_kv(l: u32, kb: u32, nk: u32, kv4: u32, kv_base: u32, from_v: bool) {
  for (var e = l; e < BC * HD4; e += NT) {
    let j = e / HD4;
    let c = e % HD4;
    var v = vec4<f32>(0.0);
    if (j < nk) {
      if (from_v) { v = vc[(kb + j) * kv4 + kv_base + c]; } else { v = kc[(kb + j) * kv4 + kv_base + c]; }
    }
#if KV_SHARED
    ks[j * HS + c] = v;
#else
    if (from_v) { vs[j * HS + c] = v; } else { ks[j * HS + c] = v; }
#endif
  }
}

@compute @workgroup_size(NT)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let l = lid.x;
  let tx = l % TX;
  let ty = l / TX;
  let r0 = ty * RM;
  let G = p.Hq / p.Hkv;
  let hk = wid.y;
  let i0 = wid.x * BR;
  let n_rows = min(BR, p.T * G - i0);
  let kv_base = hk * HD4;
  let kv4 = p.kv_dim / 4u;
  for (var e = l; e < BR * HD4; e += NT) {
    let r = e / HD4;
    let c = e % HD4;
    var v = vec4<f32>(0.0);
    if (r < n_rows) {
      let i = i0 + r;
      let b = p.q_off + (i / G) * p.q_stride + (hk * G + i % G) * p.HD + 4u * c;
      v = vec4<f32>(q[b], q[b + 1u], q[b + 2u], q[b + 3u]);
    }
    qs[r * HS + c] = v;
  }
  let n_keys = p.pos0 + (i0 + n_rows - 1u) / G + 1u;  // keys visible to the block's last row
#if SPLIT
  let k_begin = min(wid.z * p.split_len, n_keys);
  let k_end = min(k_begin + p.split_len, n_keys);
#else
  let k_begin = 0u;
  let k_end = n_keys;
#endif
  // Last key visible to each of this thread's rows (rows past n_rows see none).
  var last: array<u32, RM>;
  var live: array<bool, RM>;
  for (var r = 0u; r < RM; r++) {
    let i = i0 + r0 + r;
    live[r] = r0 + r < n_rows;
    last[r] = p.pos0 + i / G;
  }
  var m: array<f32, RM>;
  var lsum: array<f32, RM>;
  var acc: array<vec4<f32>, RM * RD>;
  for (var r = 0u; r < RM; r++) {
    m[r] = NEG;
    lsum[r] = 0.0;
  }
  for (var a = 0u; a < RM * RD; a++) { acc[a] = vec4<f32>(0.0); }
  for (var kb = k_begin; kb < k_end; kb += BC) {
    let nk = min(BC, k_end - kb);
    load_kv(l, kb, nk, kv4, kv_base, false);
#if KV_SHARED
#else
    load_kv(l, kb, nk, kv4, kv_base, true);
#endif
    workgroupBarrier();
    // 1. scores
    var s: array<f32, RM * RN>;
    for (var a = 0u; a < RM * RN; a++) { s[a] = 0.0; }
    for (var c = 0u; c < HD4; c++) {
      var qv: array<vec4<f32>, RM>;
      for (var r = 0u; r < RM; r++) { qv[r] = qs[(r0 + r) * HS + c]; }
      for (var u = 0u; u < RN; u++) {
        let kv = ks[(tx + TX * u) * HS + c];
        for (var r = 0u; r < RM; r++) {
          let a = r * RN + u;
          s[a] = fma(qv[r].w, kv.w, fma(qv[r].z, kv.z, fma(qv[r].y, kv.y, fma(qv[r].x, kv.x, s[a]))));
        }
      }
    }
    for (var r = 0u; r < RM; r++) {
      var mx = NEG;
      for (var u = 0u; u < RN; u++) {
        let j = kb + tx + TX * u;
        let a = r * RN + u;
        if (live[r] && j < k_end && j <= last[r]) { s[a] = s[a] * p.scale; } else { s[a] = NEG; }
        mx = max(mx, s[a]);
      }
      pm[(r0 + r) * TX + tx] = mx;
    }
    workgroupBarrier();
    // 2. online softmax
    var corr: RV;
    for (var r = 0u; r < RM; r++) {
      var mx = m[r];
      for (var w = 0u; w < TX; w++) { mx = max(mx, pm[(r0 + r) * TX + w]); }
      corr[r] = exp(m[r] - mx);
      m[r] = mx;
    }
    var su = RV(0.0);
    for (var u = 0u; u < RN; u++) {
      var pv: RV;
      for (var r = 0u; r < RM; r++) {
        let a = r * RN + u;
        var pj = 0.0;
        if (s[a] > NEG) { pj = exp(s[a] - m[r]); }
        pv[r] = pj;
      }
      pt[(tx + TX * u) * PS + ty] = pv;
      su += pv;
    }
    for (var r = 0u; r < RM; r++) { lsum[r] = lsum[r] * corr[r] + su[r]; }
#if KV_SHARED
    load_kv(l, kb, nk, kv4, kv_base, true);  // every thread is past its K reads (barrier above)
#endif
    workgroupBarrier();
    // 3. PV
    for (var r = 0u; r < RM; r++) {
      for (var c = 0u; c < RD; c++) { acc[r * RD + c] = acc[r * RD + c] * corr[r]; }
    }
    for (var j = 0u; j < BC; j++) {
      let pv = pt[j * PS + ty];
      for (var c = 0u; c < RD; c++) {
#if KV_SHARED
        let vv = ks[j * HS + tx + TX * c];
#else
        let vv = vs[j * HS + tx + TX * c];
#endif
        for (var r = 0u; r < RM; r++) { acc[r * RD + c] = fma(vec4<f32>(pv[r]), vv, acc[r * RD + c]); }
      }
    }
    workgroupBarrier();
  }
  // Row sums: the TX partial sums of each row, added in tx order.
  for (var r = 0u; r < RM; r++) { pm[(r0 + r) * TX + tx] = lsum[r]; }
  workgroupBarrier();
  for (var r = 0u; r < RM; r++) {
    var su = 0.0;
    for (var w = 0u; w < TX; w++) { su += pm[(r0 + r) * TX + w]; }
    lsum[r] = su;
  }
  for (var r = 0u; r < RM; r++) {
    if (!live[r]) { continue; }
    let i = i0 + r0 + r;
    let t = i / G;
    let h = hk * G + i % G;
#if SPLIT
    let pb = ((t * p.Hq + h) * p.n_split + wid.z) * (p.HD + 2u);
    if (tx == 0u) {
      o[pb] = m[r];
      o[pb + 1u] = lsum[r];
    }
#endif
    for (var c = 0u; c < RD; c++) {
#if SPLIT
      let b = pb + 2u + 4u * (tx + TX * c);
      let v = acc[r * RD + c];
#else
      let b = p.o_off + t * p.o_stride + h * p.HD + 4u * (tx + TX * c);
      let v = acc[r * RD + c] / lsum[r];
#endif
      o[b] = v.x;
      o[b + 1u] = v.y;
      o[b + 2u] = v.z;
      o[b + 3u] = v.w;
    }
  }
}
