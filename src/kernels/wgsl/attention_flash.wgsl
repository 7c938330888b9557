// defines: BC BR HD4 RM TX GATHER KV_SHARED PF UNROLL WINDOW
// attention_flash: causal GQA attention for T > 1 query tokens (prefill chunks, a turn's new tokens)
// as a register-tiled flash attention (FlashAttention-2, Dao 2023; online softmax, Milakov &
// Gimelshein 2018). Dispatch and tile choice: kernels::attention (ops.cpp, KernelOptions::
// attention_flash); CPU twin: ref::attention; test: ops_test.cpp Ops.AttentionFlash*.
// The rows of KV head hk are i = t * G + g (token t, query head hk * G + g, G = Hq / Hkv). One
// workgroup per (block of BR consecutive rows, KV head, key split). Its Q block stays in workgroup
// memory; per tile of BC keys (K and V rows loaded once, vec4, coalesced, for all BR rows):
//   1. scores: thread (ty, tx) computes an RM x RN register tile S[r][u] = q(row ty*RM + r) .
//      k(key tx + TX*u) (fma over the head dim in order), scaled; masked keys (j > pos0 + t, outside
//      the split, or with WINDOW below the row's window) get -3.4e38; per row the max of its RN
//      scores -> pm.
//   2. online softmax: every thread of a row group forms the row's new max from the TX partial
//      maxes (same inputs, same order: the same value in all TX threads), its probabilities
//      p = e^(s - m) (0 for masked keys) -> pt (key-major), the rescale factor corr = e^(m_old - m),
//      and its own partial row sum l = l * corr + sum_u p (the TX partial sums are added at the end).
//   3. PV: the thread's RM rows x RD vec4 output slice (dims 4 * (tx + TX*c)):
//      acc = acc * corr + sum_j p[r][j] * v[j] (keys in order).
// Tiles past the block's last visible key are never loaded (causal skip); masking costs one compare
// per score. Every sum runs in a fixed order: results are deterministic.
// UNROLL 1 (--attn-flash-unroll): the per-thread register tile is generated code
// (kernels/attention_flash.cpp attention_flash_wgsl(): the FLASH_* marker comments in main() are
// replaced by straight-line code over named variables before specialisation; loops over private
// arrays rely on the driver unrolling them, else the tile lives in scratch memory, as
// matmul_tiled.wgsl explains). UNROLL 0: the loop form over private arrays (SwiftShader's Subzero
// compiler exhausts memory on the generated form: > 8 GB after 120 s, 2026-12-02). Both perform the
// same operations in the same order: the same bits (test: Ops.AttentionFlashUnrollIsBitExact).
// Variants (all required):
//   UNROLL generated register tile (1) or loop form (0);
//   HD4 head dim / 4;  BR rows per workgroup;  BC keys per tile;  RM rows per thread (2 or 4);
//   TX threads per row group (BC and HD4 multiples of TX); KV_SHARED 1: V is loaded into K's
//   workgroup array after the scores (less memory, for large head dims);  SPLIT as attention.wgsl:
//   workgroup z handles keys [k_lo + z * split_len, k_lo + (z+1) * split_len) (k_lo: 0, or with WINDOW
//   the block's first window start) and writes the unnormalised partial
//   (m, l, acc[HD]) at ((t * Hq + h) * n_split + z) * (HD + 2) for attention_combine.wgsl (a row with
//   no visible key in its split writes m = -3.4e38, l = 0, acc = 0).
//   PF 1 (--attn-flash-prefetch): the K and V rows of the next key tile are loaded into registers
//   (LPT vec4 of each per thread, named fields, no private array) while the current tile is
//   computed, and stored into workgroup memory at the start of the next iteration (the first tile's
//   loads are issued before the Q block's): the global-load latency of a tile overlaps the previous
//   tile's arithmetic instead of stalling every thread at the tile's first barrier. With KV_SHARED
//   the tile's V rows are loaded during its scores and the next tile's K rows during its PV. The
//   same values reach the same workgroup arrays: bit-identical to PF 0.
//   GATHER 1 (gathered block-sparse attention, kernels/sparse_attention.h; not with SPLIT): the keys
//   are the virtual sequence of the blocks listed in `index` for the rows' query block (slot s's
//   block b gives virtual keys s * B .. s * B + B - 1 = cache rows b * B ..), as attention_sparse.wgsl;
//   workgroup x = (query block of the forward) * ntb + (block of BR rows of that query block), so all
//   rows of a workgroup share one selection; empty slots and future keys are masked. Only the
//   selected K/V rows are loaded.
//   WINDOW 1 (--attn-flash-window; sliding-window layers, Gemma 3's local ones; not with GATHER): key j
//   is visible to the row at position t iff t - j < p.window as well (Beltagy et al. 2020); the block's
//   keys start at its first row's window start k_lo (tiles below it are never loaded; SPLIT's splits
//   count from k_lo, as attention_tiled.wgsl), later rows mask the keys below their own window.
// Workgroup memory (f32): (BR + BC * (2 - KV_SHARED)) * (HD + 4) + BC * (BR / RM + 1) * RM + 2 * BR * TX
// (ops.cpp checks it against maxComputeWorkgroupStorageSize).
struct P { T: u32, pos0: u32, Hq: u32, Hkv: u32, HD: u32, q_off: u32, q_stride: u32, o_off: u32,
           o_stride: u32, kv_dim: u32, scale: f32, split_len: u32, n_split: u32,
#if GATHER
           B: u32, S: u32, qb0: u32, ntb: u32,
#else
           window: u32,
#endif
}
@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> kc: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> vc: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> o: array<f32>;
#if GATHER
@group(0) @binding(4) var<storage, read> index: array<u32>;
@group(0) @binding(5) var<uniform> p: P;
const NONE: u32 = 0xFFFFFFFFu;
// Cache row of virtual key jv of index row ib, or NONE for an empty slot.
fn key_row(jv: u32, ib: u32) -> u32 {
  let b = index[ib + jv / p.B];
  if (b == NONE) { return NONE; }
  return b * p.B + jv % p.B;
}
#else
@group(0) @binding(4) var<uniform> p: P;
#endif

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
const CU: u32 = 4u;              // head-dim vec4s per generated score step (HD4 is a multiple of 8)
const JU: u32 = 4u;              // keys per generated PV step (BC is a multiple of 4)

var<workgroup> qs: array<vec4<f32>, BR * HS>;
var<workgroup> ks: array<vec4<f32>, BC * HS>;
#if KV_SHARED
#else
var<workgroup> vs: array<vec4<f32>, BC * HS>;
#endif
var<workgroup> pt: array<RV, BC * PS>;   // probabilities, key-major: pt[j * PS + ty][r]
var<workgroup> pm: array<f32, BR * TX>;  // per row, per tx: partial max (at the end: partial sum)

// Element e (key e / HD4, vec4 e % HD4) of the K (from_v: V) tile at virtual key kb with nk keys, as
// load_kv and fetch_kv store it (0 past nk or for an empty slot).
fn kv_elem(e: u32, kb: u32, nk: u32, kv4: u32, kv_base: u32, from_v: bool, ib: u32) -> vec4<f32> {
  let j = e / HD4;
  let c = e % HD4;
  var v = vec4<f32>(0.0);
  if (j < nk) {
#if GATHER
    let row = key_row(kb + j, ib);
#else
    let row = kb + j;
#endif
    if (row != 0xFFFFFFFFu) {
      if (from_v) { v = vc[row * kv4 + kv_base + c]; } else { v = kc[row * kv4 + kv_base + c]; }
    }
  }
  return v;
}
// Element e of the K (to_v: V) tile into its workgroup array (K's with KV_SHARED).
fn put_one(e: u32, v: vec4<f32>, to_v: bool) {
  let idx = (e / HD4) * HS + e % HD4;
#if KV_SHARED
  ks[idx] = v;
#else
  if (to_v) { vs[idx] = v; } else { ks[idx] = v; }
#endif
}
fn load_kv(l: u32, kb: u32, nk: u32, kv4: u32, kv_base: u32, from_v: bool, ib: u32) {
  for (var e = l; e < BC * HD4; e += NT) { put_one(e, kv_elem(e, kb, nk, kv4, kv_base, from_v, ib), from_v); }
}

#if PF
// PF: vec4 of a K (or V) tile each thread loads (the host checks BC * HD4 = LPT * NT, LPT <= 16).
const LPT: u32 = BC * HD4 / NT;
struct KVR { a0: vec4<f32>, a1: vec4<f32>, a2: vec4<f32>, a3: vec4<f32>, a4: vec4<f32>, a5: vec4<f32>, a6: vec4<f32>, a7: vec4<f32>, a8: vec4<f32>, a9: vec4<f32>, a10: vec4<f32>, a11: vec4<f32>, a12: vec4<f32>, a13: vec4<f32>, a14: vec4<f32>, a15: vec4<f32> }
// This thread's LPT elements l, l + NT, ... of the tile (loads only; see PF above).
fn fetch_kv(l: u32, kb: u32, nk: u32, kv4: u32, kv_base: u32, from_v: bool, ib: u32) -> KVR {
  var r: KVR;
  r.a0 = kv_elem(l, kb, nk, kv4, kv_base, from_v, ib);
  if (LPT > 1u) { r.a1 = kv_elem(l + 1u * NT, kb, nk, kv4, kv_base, from_v, ib); }
  if (LPT > 2u) { r.a2 = kv_elem(l + 2u * NT, kb, nk, kv4, kv_base, from_v, ib); }
  if (LPT > 3u) { r.a3 = kv_elem(l + 3u * NT, kb, nk, kv4, kv_base, from_v, ib); }
  if (LPT > 4u) { r.a4 = kv_elem(l + 4u * NT, kb, nk, kv4, kv_base, from_v, ib); }
  if (LPT > 5u) { r.a5 = kv_elem(l + 5u * NT, kb, nk, kv4, kv_base, from_v, ib); }
  if (LPT > 6u) { r.a6 = kv_elem(l + 6u * NT, kb, nk, kv4, kv_base, from_v, ib); }
  if (LPT > 7u) { r.a7 = kv_elem(l + 7u * NT, kb, nk, kv4, kv_base, from_v, ib); }
  if (LPT > 8u) { r.a8 = kv_elem(l + 8u * NT, kb, nk, kv4, kv_base, from_v, ib); }
  if (LPT > 9u) { r.a9 = kv_elem(l + 9u * NT, kb, nk, kv4, kv_base, from_v, ib); }
  if (LPT > 10u) { r.a10 = kv_elem(l + 10u * NT, kb, nk, kv4, kv_base, from_v, ib); }
  if (LPT > 11u) { r.a11 = kv_elem(l + 11u * NT, kb, nk, kv4, kv_base, from_v, ib); }
  if (LPT > 12u) { r.a12 = kv_elem(l + 12u * NT, kb, nk, kv4, kv_base, from_v, ib); }
  if (LPT > 13u) { r.a13 = kv_elem(l + 13u * NT, kb, nk, kv4, kv_base, from_v, ib); }
  if (LPT > 14u) { r.a14 = kv_elem(l + 14u * NT, kb, nk, kv4, kv_base, from_v, ib); }
  if (LPT > 15u) { r.a15 = kv_elem(l + 15u * NT, kb, nk, kv4, kv_base, from_v, ib); }
  return r;
}
// Stores fetch_kv's elements into the K (to_v: V) workgroup array.
fn put_kv(l: u32, r: KVR, to_v: bool) {
  put_one(l, r.a0, to_v);
  if (LPT > 1u) { put_one(l + 1u * NT, r.a1, to_v); }
  if (LPT > 2u) { put_one(l + 2u * NT, r.a2, to_v); }
  if (LPT > 3u) { put_one(l + 3u * NT, r.a3, to_v); }
  if (LPT > 4u) { put_one(l + 4u * NT, r.a4, to_v); }
  if (LPT > 5u) { put_one(l + 5u * NT, r.a5, to_v); }
  if (LPT > 6u) { put_one(l + 6u * NT, r.a6, to_v); }
  if (LPT > 7u) { put_one(l + 7u * NT, r.a7, to_v); }
  if (LPT > 8u) { put_one(l + 8u * NT, r.a8, to_v); }
  if (LPT > 9u) { put_one(l + 9u * NT, r.a9, to_v); }
  if (LPT > 10u) { put_one(l + 10u * NT, r.a10, to_v); }
  if (LPT > 11u) { put_one(l + 11u * NT, r.a11, to_v); }
  if (LPT > 12u) { put_one(l + 12u * NT, r.a12, to_v); }
  if (LPT > 13u) { put_one(l + 13u * NT, r.a13, to_v); }
  if (LPT > 14u) { put_one(l + 14u * NT, r.a14, to_v); }
  if (LPT > 15u) { put_one(l + 15u * NT, r.a15, to_v); }
}
#endif

// V row vec4 idx of the tile (K's array with KV_SHARED).
fn vrow(idx: u32) -> vec4<f32> {
#if KV_SHARED
  return ks[idx];
#else
  return vs[idx];
#endif
}

#include attention_flash_out

@compute @workgroup_size(NT)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let l = lid.x;
  let tx = l % TX;
  let ty = l / TX;
  let r0 = ty * RM;
  let G = p.Hq / p.Hkv;
  let hk = wid.y;
#if GATHER
  let qbi = wid.x / p.ntb;
  let qb = p.qb0 + qbi;
  let t_lo = max(qb * p.B, p.pos0) - p.pos0;
  let t_hi = min((qb + 1u) * p.B, p.pos0 + p.T) - p.pos0;
  let i0 = t_lo * G + (wid.x % p.ntb) * BR;
  if (i0 >= t_hi * G) { return; }  // a row block past this query block's rows (whole workgroup)
  let n_rows = min(BR, t_hi * G - i0);
  let ib = (qbi * p.Hkv + hk) * p.S;
#else
  let i0 = wid.x * BR;
  let n_rows = min(BR, p.T * G - i0);
  let ib = 0u;
#endif
  let kv_base = hk * HD4;
  let kv4 = p.kv_dim / 4u;
#if GATHER
  let n_keys = p.S * p.B;  // virtual keys (uniform bound; empty slots and future keys masked)
#else
  let n_keys = p.pos0 + (i0 + n_rows - 1u) / G + 1u;  // keys visible to the block's last row
#endif
  let kr = key_range(n_keys, p.pos0 + i0 / G, wid.z);
  let k_begin = kr.x;
  let k_end = kr.y;
#if PF
  var pk: KVR;       // the K rows of the tile to come (see PF in the header)
  var pv_next: KVR;  // and its V rows
  if (k_begin < k_end) {
    pk = fetch_kv(l, k_begin, min(BC, k_end - k_begin), kv4, kv_base, false, ib);
#if KV_SHARED
#else
    pv_next = fetch_kv(l, k_begin, min(BC, k_end - k_begin), kv4, kv_base, true, ib);
#endif
  }
#endif
  // The Q block (read at the first tile's scores, after its barrier).
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
  // Register tile. UNROLL 1: generated (kernels/attention_flash.cpp attention_flash_wgsl():
  // named variables, no private arrays): per row R = 0..RM-1 of the thread live_R, last_R (last key
  // visible), m_R, lsum_R, and acc_R_C (output vec4 C = 0..RD-1 of the row: dims 4 * (tx + TX * C)).
  // UNROLL 0: the same quantities in private arrays indexed in loops (live[R], ..., acc[R * RD + C]).
#if UNROLL
  /*FLASH_DECL*/
#else
  var last: array<u32, RM>;
  var live: array<bool, RM>;
  var m: array<f32, RM>;
  var lsum: array<f32, RM>;
  var acc: array<vec4<f32>, RM * RD>;
  for (var r = 0u; r < RM; r++) {
    live[r] = r0 + r < n_rows;
    last[r] = p.pos0 + (i0 + r0 + r) / G;
    m[r] = NEG;
    lsum[r] = 0.0;
  }
  for (var a = 0u; a < RM * RD; a++) { acc[a] = vec4<f32>(0.0); }
#endif
  for (var kb = k_begin; kb < k_end; kb += BC) {
    let nk = min(BC, k_end - kb);
#if PF
    put_kv(l, pk, false);
#if KV_SHARED
    workgroupBarrier();
    pv_next = fetch_kv(l, kb, nk, kv4, kv_base, true, ib);  // this tile's V rows, in flight during its scores
#else
    put_kv(l, pv_next, true);
    workgroupBarrier();
    if (kb + BC < k_end) {  // the next tile's loads, in flight during this tile's arithmetic
      pk = fetch_kv(l, kb + BC, min(BC, k_end - kb - BC), kv4, kv_base, false, ib);
      pv_next = fetch_kv(l, kb + BC, min(BC, k_end - kb - BC), kv4, kv_base, true, ib);
    }
#endif
#else
    load_kv(l, kb, nk, kv4, kv_base, false, ib);
#if KV_SHARED
#else
    load_kv(l, kb, nk, kv4, kv_base, true, ib);
#endif
    workgroupBarrier();
#endif
    // 1. scores s_R_U of row R, key tx + TX * U (U = 0..RN-1), summed over the head dim in order;
    // the cache row jr_U of each of this thread's keys (NONE past the split or for an empty slot);
    // masked scores -> NEG; per row the max of its RN scores -> pm.
#if UNROLL
    /*FLASH_SCORE_DECL*/
    for (var c = 0u; c < HD4; c += CU) {
      /*FLASH_SCORE_STEP*/
    }
    /*FLASH_MASK*/
#else
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
    var jr: array<u32, RN>;
    for (var u = 0u; u < RN; u++) {
      let j = kb + tx + TX * u;
#if GATHER
      jr[u] = 0xFFFFFFFFu;
      if (j < k_end) { jr[u] = key_row(j, ib); }
#else
      jr[u] = j;
      if (j >= k_end) { jr[u] = 0xFFFFFFFFu; }
#endif
    }
    for (var r = 0u; r < RM; r++) {
      var mx = NEG;
      for (var u = 0u; u < RN; u++) {
        let a = r * RN + u;
#if WINDOW
        let seen = live[r] && jr[u] != 0xFFFFFFFFu && jr[u] <= last[r] && jr[u] + p.window > last[r];  // in row r's window
#else
        let seen = live[r] && jr[u] != 0xFFFFFFFFu && jr[u] <= last[r];
#endif
        if (seen) { s[a] = s[a] * p.scale; } else { s[a] = NEG; }
        mx = max(mx, s[a]);
      }
      pm[(r0 + r) * TX + tx] = mx;
    }
#endif
    workgroupBarrier();
    // 2. online softmax: new row max from the TX partial maxes, corr_R = e^(m_old - m), the
    // probabilities -> pt (key-major), the thread's partial row sum.
#if UNROLL
    /*FLASH_SOFTMAX*/
#else
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
#endif
#if KV_SHARED
#if PF
    put_kv(l, pv_next, true);  // every thread is past its K reads (barrier above)
    if (kb + BC < k_end) { pk = fetch_kv(l, kb + BC, min(BC, k_end - kb - BC), kv4, kv_base, false, ib); }  // during PV
#else
    load_kv(l, kb, nk, kv4, kv_base, true, ib);  // every thread is past its K reads (barrier above)
#endif
#endif
    workgroupBarrier();
    // 3. PV: acc_R_C = acc_R_C * corr_R + sum_j p[R][j] v[j] (keys in order).
#if UNROLL
    /*FLASH_PV_SCALE*/
    for (var j = 0u; j < BC; j += JU) {
      /*FLASH_PV_STEP*/
    }
#else
    for (var r = 0u; r < RM; r++) {
      for (var c = 0u; c < RD; c++) { acc[r * RD + c] = acc[r * RD + c] * corr[r]; }
    }
    for (var j = 0u; j < BC; j++) {
      let pv = pt[j * PS + ty];
      for (var c = 0u; c < RD; c++) {
        let vv = vrow(j * HS + tx + TX * c);
        for (var r = 0u; r < RM; r++) { acc[r * RD + c] = fma(vec4<f32>(pv[r]), vv, acc[r * RD + c]); }
      }
    }
#endif
    workgroupBarrier();
  }
  // Row sums: the TX partial sums of each row, added in tx order; then the outputs.
#if UNROLL
  /*FLASH_END*/
#else
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
    if (tx == 0u) { store_stats(i, hk, G, wid.z, m[r], lsum[r]); }
    for (var c = 0u; c < RD; c++) { store_out(i, hk, G, wid.z, tx + TX * c, acc[r * RD + c], lsum[r]); }
  }
#endif
}
