// defines: BC HD4 JK PF RM TX TY
// attention_flash_sg: causal GQA attention for T > 1 query tokens (prefill chunks, a turn's new tokens)
// as flash attention (FlashAttention-2, Dao 2023; online softmax, Milakov & Gimelshein 2018) whose
// query rows live in registers, each row's head dim split over TX lanes of one subgroup
// (--attn-flash-lanes; attention_flash.wgsl keeps its Q block in workgroup memory instead).
// Dispatch and tile choice: kernels::attention (ops.cpp, attention_flash_lanes_tile); generated
// register code: kernels/attention_flash.cpp attention_flash_sg_wgsl(); CPU twin: ref::attention;
// test: ops_test.cpp Ops.AttentionFlashLanes*.
// The rows of KV head hk are i = t * G + g (token t, query head hk * G + g, G = Hq / Hkv), as in
// attention_flash.wgsl. One workgroup of NT = TX * TY threads per (block of BR = RM * TY consecutive
// rows, KV head, key split). Thread (ty, tx) = (l / TX, l % TX) holds rows ty * RM .. ty * RM + RM - 1
// of the block, and of each row the RD = HD4 / TX vec4 at dims 4 * (tx + TX * c), c = 0..RD-1: its
// query slice q_R_C (loaded once) and its output accumulator acc_R_C. Per tile of BC keys (K and V
// rows in workgroup memory, vec4, loaded coalesced for all BR rows), in groups of JK keys:
//   1. partial scores d_R_U = q_R . k_U over the thread's dims (fma, c ascending, x..w), then summed
//      over the row's TX lanes by subgroupShuffleXor (butterfly, offsets 1, 2, .., TX / 2; IEEE
//      addition commutes, so every lane of the row ends with the same bits); scaled; masked keys
//      (past the split, j > pos0 + t, or with WINDOW outside the row's window) -> -3.4e38;
//   2. online softmax, computed redundantly by each lane of the row (same inputs, same bits): the
//      row max over the group's JK scores and the running max m_R, corr_R = e^(m_old - m_R),
//      p_R_U = e^(s_R_U - m_R) (0 for masked keys), lsum_R = lsum_R * corr_R + (p_R_0 + .. + p_R_JK-1);
//   3. PV: acc_R_C = acc_R_C * corr_R, then acc_R_C = fma(p_R_U, v_U[dims], acc_R_C), U ascending.
// No workgroup memory or barrier for the scores or probabilities: two barriers per key tile. The
// rows' lanes must share a subgroup: the host takes this kernel only when TX <= the adapter's
// smallest subgroup size, and (as attention_decode.wgsl) assumes a 1-D workgroup's subgroups are
// consecutive, aligned invocation ranges. Tiles past the block's last visible key are never
// loaded (causal skip). Every sum runs in a fixed order: results are deterministic.
// Variants (all required):
//   HD4 head dim / 4;  TX lanes per row (a power of two dividing HD4);  RM rows per thread;
//   TY row groups (NT = TX * TY threads, BR = RM * TY rows);  BC keys per tile;  JK keys per
//   softmax group (divides BC);  SPLIT as attention_flash.wgsl: workgroup z handles keys
//   [k_lo + z * split_len, k_lo + (z+1) * split_len) and writes the unnormalised partial (m, l,
//   acc[HD]) at ((t * Hq + h) * n_split + z) * (HD + 2) for attention_combine.wgsl;  WINDOW as
//   attention_flash.wgsl (sliding-window layers: key j visible to the row at position t iff
//   t - j < p.window as well; the block's keys start at its first row's window start);
//   PF 1 (--attn-flash-prefetch): the next tile's K and V rows (LPT vec4 of each per thread) are
//   loaded into registers right after the current tile's barrier and stored at the top of the next
//   iteration; the same values reach the same arrays: bit-identical to PF 0.
// Workgroup memory (f32): 2 * BC * (HD + 4) (K and V tiles, rows padded by one vec4).
struct P { T: u32, pos0: u32, Hq: u32, Hkv: u32, HD: u32, q_off: u32, q_stride: u32, o_off: u32,
           o_stride: u32, kv_dim: u32, scale: f32, split_len: u32, n_split: u32, window: u32,
}
@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> kc: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> vc: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> o: array<f32>;
@group(0) @binding(4) var<uniform> p: P;

const HD4: u32 = {{HD4}}u;
const HS: u32 = HD4 + 1u;  // padded row stride (vec4) of the K and V tiles
const BC: u32 = {{BC}}u;
const JK: u32 = {{JK}}u;
const RM: u32 = {{RM}}u;
const TX: u32 = {{TX}}u;
const TY: u32 = {{TY}}u;
const NT: u32 = TX * TY;
const BR: u32 = RM * TY;
const NEG: f32 = -3.402823466e38;

var<workgroup> ks: array<vec4<f32>, BC * HS>;
var<workgroup> vs: array<vec4<f32>, BC * HS>;

// Element e (key e / HD4, vec4 e % HD4) of the K (from_v: V) tile at key kb with nk keys (0 past nk).
fn kv_elem(e: u32, kb: u32, nk: u32, kv4: u32, kv_base: u32, from_v: bool) -> vec4<f32> {
  let j = e / HD4;
  var v = vec4<f32>(0.0);
  if (j < nk) {
    let a = (kb + j) * kv4 + kv_base + e % HD4;
    if (from_v) { v = vc[a]; } else { v = kc[a]; }
  }
  return v;
}
fn put_one(e: u32, v: vec4<f32>, to_v: bool) {
  let idx = (e / HD4) * HS + e % HD4;
  if (to_v) { vs[idx] = v; } else { ks[idx] = v; }
}
// (A constant trip count: llvmpipe's compiler takes minutes over this kernel with the strided loop
// `for (e = l; e < BC * HD4; e += NT)`, 2026-12-07.)
fn load_kv(l: u32, kb: u32, nk: u32, kv4: u32, kv_base: u32) {
  for (var it = 0u; it < (BC * HD4 + NT - 1u) / NT; it++) {
    let e = l + it * NT;
    if (e < BC * HD4) {
      put_one(e, kv_elem(e, kb, nk, kv4, kv_base, false), false);
      put_one(e, kv_elem(e, kb, nk, kv4, kv_base, true), true);
    }
  }
}

#if PF
// PF: vec4 of a K (or V) tile each thread loads (the host checks BC * HD4 = LPT * NT, LPT <= 8).
const LPT: u32 = BC * HD4 / NT;
struct KVR { a0: vec4<f32>, a1: vec4<f32>, a2: vec4<f32>, a3: vec4<f32>, a4: vec4<f32>, a5: vec4<f32>, a6: vec4<f32>, a7: vec4<f32> }
fn fetch_kv(l: u32, kb: u32, nk: u32, kv4: u32, kv_base: u32, from_v: bool) -> KVR {
  var r: KVR;
  r.a0 = kv_elem(l, kb, nk, kv4, kv_base, from_v);
  if (LPT > 1u) { r.a1 = kv_elem(l + 1u * NT, kb, nk, kv4, kv_base, from_v); }
  if (LPT > 2u) { r.a2 = kv_elem(l + 2u * NT, kb, nk, kv4, kv_base, from_v); }
  if (LPT > 3u) { r.a3 = kv_elem(l + 3u * NT, kb, nk, kv4, kv_base, from_v); }
  if (LPT > 4u) { r.a4 = kv_elem(l + 4u * NT, kb, nk, kv4, kv_base, from_v); }
  if (LPT > 5u) { r.a5 = kv_elem(l + 5u * NT, kb, nk, kv4, kv_base, from_v); }
  if (LPT > 6u) { r.a6 = kv_elem(l + 6u * NT, kb, nk, kv4, kv_base, from_v); }
  if (LPT > 7u) { r.a7 = kv_elem(l + 7u * NT, kb, nk, kv4, kv_base, from_v); }
  return r;
}
fn put_kv(l: u32, r: KVR, to_v: bool) {
  put_one(l, r.a0, to_v);
  if (LPT > 1u) { put_one(l + 1u * NT, r.a1, to_v); }
  if (LPT > 2u) { put_one(l + 2u * NT, r.a2, to_v); }
  if (LPT > 3u) { put_one(l + 3u * NT, r.a3, to_v); }
  if (LPT > 4u) { put_one(l + 4u * NT, r.a4, to_v); }
  if (LPT > 5u) { put_one(l + 5u * NT, r.a5, to_v); }
  if (LPT > 6u) { put_one(l + 6u * NT, r.a6, to_v); }
  if (LPT > 7u) { put_one(l + 7u * NT, r.a7, to_v); }
}
#endif

// Query vec4 col of row i (0 for a row past the block's last).
fn q_vec(i: u32, live: bool, hk: u32, G: u32, col: u32) -> vec4<f32> {
  if (!live) { return vec4<f32>(0.0); }
  let b = p.q_off + (i / G) * p.q_stride + (hk * G + i % G) * p.HD + 4u * col;
  return vec4<f32>(q[b], q[b + 1u], q[b + 2u], q[b + 3u]);
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
  let i0 = wid.x * BR;
  let n_rows = min(BR, p.T * G - i0);
  let kv_base = hk * HD4;
  let kv4 = p.kv_dim / 4u;
  let n_keys = p.pos0 + (i0 + n_rows - 1u) / G + 1u;  // keys visible to the block's last row
  let kr = key_range(n_keys, p.pos0 + i0 / G, wid.z);
  let k_begin = kr.x;
  let k_end = kr.y;
#if PF
  var pk: KVR;  // the K rows of the tile to come
  var pv: KVR;  // and its V rows
  if (k_begin < k_end) {
    pk = fetch_kv(l, k_begin, min(BC, k_end - k_begin), kv4, kv_base, false);
    pv = fetch_kv(l, k_begin, min(BC, k_end - k_begin), kv4, kv_base, true);
  }
#endif
  // Per row R = 0..RM-1 of the thread (generated, kernels/attention_flash.cpp): live_R, last_R (last
  // key visible), m_R, lsum_R, q_R_C and acc_R_C (C = 0..RD-1: dims 4 * (tx + TX * C)).
  /*SG_DECL*/
  for (var kb = k_begin; kb < k_end; kb += BC) {
#if PF
    put_kv(l, pk, false);
    put_kv(l, pv, true);
    workgroupBarrier();
    if (kb + BC < k_end) {  // the next tile's loads, in flight during this tile's arithmetic
      pk = fetch_kv(l, kb + BC, min(BC, k_end - kb - BC), kv4, kv_base, false);
      pv = fetch_kv(l, kb + BC, min(BC, k_end - kb - BC), kv4, kv_base, true);
    }
#else
    load_kv(l, kb, min(BC, k_end - kb), kv4, kv_base);
    workgroupBarrier();
#endif
    for (var j = 0u; j < BC; j += JK) {
      // Keys j .. j + JK - 1 of the tile (generated): scores, lane sums, mask, softmax, PV.
      /*SG_GROUP*/
    }
    workgroupBarrier();
  }
  /*SG_END*/
}
