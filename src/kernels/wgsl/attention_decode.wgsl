// defines: G HD4 NT SG SPLIT KB LV KL MULTI
// attention_decode: causal GQA attention for ONE query token (decode) at position pos0 over cache
// rows [0, pos0] (with a sliding window W != 0: [pos0 + 1 - W, pos0]). One workgroup per (KV head hk, key split z) serves all G = Hq / Hkv query heads
// of the group, so each K and V row is read once per group (attention.wgsl reads it once per query
// head). Keys are processed in tiles of KT = NT / KL (KL threads per key) with an online softmax
// (Milakov & Gimelshein 2018) whose running max m_g is shared by the workgroup:
//   1. at the tile's start every thread issues its loads: its part of the K row of its key (KL 1:
//      the whole row, HD4 vec4; else the vec4 kp, kp + KL, ... of key l / KL, kp = l % KL, so the
//      KL threads of a key read consecutive vec4) and its V vec4s for the PV phase (thread (jg, d4)
//      = (l / HD4, l % HD4): keys jg, jg + NJ, ... of the tile at dims 4*d4..4*d4+3; consecutive
//      threads read consecutive vec4s of a V row);
//   2. scores s_g = q_g . k * scale for the G heads (Q held in workgroup memory); KL > 1: each
//      thread's partial dot products summed over the key's KL threads by subgroupShuffleXor
//      (butterfly: every thread of the key ends with the same sum);
//   3. tile max per head: subgroupMax + one value per subgroup in workgroup memory (SG), or, without
//      subgroups, every thread scans the tile's scores in workgroup memory; one barrier;
//   4. p_g = exp(s_g - m_g) into workgroup memory; each thread keeps its own running sum of its
//      keys' p_g (rescaled like the accumulators, summed over threads once at the end); barrier;
//   5. acc_g(jg, d4) = acc_g * corr_g + sum over the thread's keys of p_g[j] * V[j][d4].
// At the end the partial sums over the NJ key groups and the running sums are reduced in a fixed
// order through workgroup memory (deterministic: no atomics, fixed thread -> key mapping).
// Variants (ops.cpp attention_decode picks them):
//   HD4  head dim / 4;  G  query heads per KV head;  NT  threads = keys per tile;
//   KB   vec4 of the thread's K row loaded together before their dot products (a divisor of HD4;
//        1: one load per dot step). The products are summed in the same order whatever KB: a
//        scheduling knob only (independent loads in flight), bit-identical;
//   LV   1 (--attn-decode-late-v): the V vec4s of step 1 are loaded in step 5 instead, in batches of
//        VB, and each batch serves all G heads (per head the terms are still added in key order:
//        bit-identical to LV 0). Step 1 then holds no KPT-vec4 V array in registers through the
//        scores (KPT = 32 vec4 per thread at head dim 128), at the price of V's load latency in
//        step 5;
//   SG   1: subgroup reductions for the tile max (adapter with subgroups), 0: workgroup memory;
//   KL   threads per key in the score phase (--attn-decode-key-lanes; 1, or a power of two <= 8 that
//        divides HD4, with SG 1): KL x fewer K loads per thread and KL x fewer keys per tile, the
//        KL threads of a key reading one contiguous stretch of its row (coalesced). Sums in another
//        order than KL 1;
//   SPLIT 1: workgroup z covers keys [k_lo + z * split_len, k_lo + (z+1) * split_len) only (k_lo: the
//        window's first key) and writes the
//        unnormalised partial (m, l, acc[HD]) of each head h = hk * G + g at
//        (h * n_split + z) * (HD + 2) for attention_combine.wgsl (an empty split: m = -3.4e38,
//        l = 0, acc = 0); 0: one workgroup per KV head writes acc / l.
//   MULTI 1 (continuous batching, --batch-decode-attn): one launch serves the one-token decodes of
//        several sequences whose caches lie in one buffer (a KV pool): workgroup y is sequence j,
//        entry tab[tab_off + j] = (row, position, cache base row, split length) gives its query at
//        q_off + row * q_stride, its keys at cache rows base + [0, position], its own split length
//        (SPLIT: workgroups z past its ceil((position + 1) / split length) splits exit at once;
//        records at ((j * Hq + h) * n_split + z) * (HD + 2), n_split the launch's largest; SPLIT 0:
//        output at o_off + row * o_stride). Each sequence's values are computed exactly as a MULTI 0
//        launch of its own computes them (bit-identical), no window.
struct P { T: u32, pos0: u32, Hq: u32, Hkv: u32, HD: u32, q_off: u32, q_stride: u32, o_off: u32,
           o_stride: u32, kv_dim: u32, scale: f32, split_len: u32, n_split: u32,
           window: u32, tab_off: u32 }
@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> kc: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> vc: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> o: array<f32>;
#if MULTI
@group(0) @binding(4) var<storage, read> tab: array<vec4<u32>>;
@group(0) @binding(5) var<uniform> p: P;
#else
@group(0) @binding(4) var<uniform> p: P;
#endif

const HD4: u32 = {{HD4}}u;
const G: u32 = {{G}}u;
const NT: u32 = {{NT}}u;
const KB: u32 = {{KB}}u;
const KL: u32 = {{KL}}u;
const KT: u32 = NT / KL;                   // keys per tile
const HD4P: u32 = HD4 / KL;                // K vec4 per thread in the score phase
const NJ: u32 = NT / HD4;                  // key groups of the PV phase
const KPT: u32 = (KT + NJ - 1u) / NJ;      // keys per thread in the PV phase
const VB: u32 = min(8u, KPT);              // LV: V vec4s loaded together in the PV phase
const NEG: f32 = -3.402823466e38;
var<workgroup> qs: array<vec4<f32>, G * HD4>;
var<workgroup> ps: array<f32, G * KT>;      // [g][key of the tile]: scores (no SG), then p
#if SG
var<workgroup> pmax: array<f32, G * (NT / 4u)>;  // [g][subgroup]: tile max per subgroup (sizes >= 4)
#endif
var<workgroup> red: array<vec4<f32>, NT>;   // final reductions
var<workgroup> lred: array<f32, NT>;

@compute @workgroup_size(NT)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u
#if SG
        , @builtin(subgroup_invocation_id) sg_lane: u32, @builtin(subgroup_size) sg_size: u32
#endif
) {
  let l = lid.x;
  let hk = wid.x;
  let kv4 = p.kv_dim / 4u;
#if MULTI
  let e4 = tab[p.tab_off + wid.y];
  let qrow = e4.x;
  let pos0 = e4.y;
  let kv0 = e4.z;         // the sequence's row 0 in the cache buffer
  let split_len = e4.w;
#if SPLIT
  if (wid.z * split_len > pos0) { return; }  // past this sequence's splits (whole workgroup)
#endif
#else
  let qrow = 0u;
  let pos0 = p.pos0;
  let kv0 = 0u;
  let split_len = p.split_len;
#endif
  let kvh = kv0 * kv4 + hk * HD4;  // vec4 offset of KV head hk in the sequence's cache row 0
  for (var e = l; e < G * HD4; e += NT) {
    let b = p.q_off + qrow * p.q_stride + (hk * G) * p.HD + 4u * e;  // heads of a group are contiguous in q
    qs[e] = vec4<f32>(q[b], q[b + 1u], q[b + 2u], q[b + 3u]);
  }
  workgroupBarrier();
  let n_keys = pos0 + 1u;
  var k_lo = 0u;  // first visible key: the sliding window's start (window 0: key 0)
  if (p.window != 0u && n_keys > p.window) { k_lo = n_keys - p.window; }
#if SPLIT
  let k_begin = min(k_lo + wid.z * split_len, n_keys);
  let k_end = min(k_begin + split_len, n_keys);
#else
  let k_begin = k_lo;
  let k_end = n_keys;
#endif
  let jg = l / HD4;
  let d4 = l % HD4;
  let pv = jg < NJ;  // this thread takes part in the PV phase
  var m: array<f32, G>;
  var lsum: array<f32, G>;
  var acc: array<vec4<f32>, G>;
  for (var g = 0u; g < G; g++) {
    m[g] = NEG;
    lsum[g] = 0.0;
    acc[g] = vec4<f32>(0.0);
  }
  let kk = l / KL;  // the thread's key of the tile in the score phase
  let kp = l % KL;  // ... and its part of the key's row
  for (var kb = k_begin; kb < k_end; kb += KT) {
    let nk = min(KT, k_end - kb);
    // 1. loads: V first (consumed last; LV: in step 5), then K.
#if LV
#else
    var vr: array<vec4<f32>, KPT>;
    for (var i = 0u; i < KPT; i++) {
      let j = jg + i * NJ;
      var v = vec4<f32>(0.0);
      if (pv && j < nk) { v = vc[(kb + j) * kv4 + kvh + d4]; }
      vr[i] = v;
    }
#endif
    var s: array<f32, G>;
    for (var g = 0u; g < G; g++) { s[g] = NEG; }
    var d: array<f32, G>;
    for (var g = 0u; g < G; g++) { d[g] = 0.0; }
    if (kk < nk) {
      let kbase = (kb + kk) * kv4 + kvh + kp;
      for (var i0 = 0u; i0 < HD4P; i0 += KB) {
        var kr: array<vec4<f32>, KB>;
        for (var u = 0u; u < KB; u++) { kr[u] = kc[kbase + (i0 + u) * KL]; }
        for (var u = 0u; u < KB; u++) {
          for (var g = 0u; g < G; g++) { d[g] += dot(qs[g * HD4 + (i0 + u) * KL + kp], kr[u]); }
        }
      }
    }
#if SG
    // KL > 1: the key's KL partial sums (outside the branch: every thread of the subgroup takes part).
    for (var off = 1u; off < KL; off *= 2u) {
      for (var g = 0u; g < G; g++) { d[g] += subgroupShuffleXor(d[g], off); }
    }
#endif
    if (kk < nk) {
      for (var g = 0u; g < G; g++) { s[g] = d[g] * p.scale; }
    }
    // 3. tile max per head -> new running max.
    var m_new: array<f32, G>;
#if SG
    let sgi = l / sg_size;  // subgroups of a 1-D workgroup: consecutive invocation ranges
    let nsg = (NT + sg_size - 1u) / sg_size;
    for (var g = 0u; g < G; g++) {
      let mx = subgroupMax(s[g]);
      if (sg_lane == 0u) { pmax[g * (NT / 4u) + sgi] = mx; }
    }
    workgroupBarrier();
    for (var g = 0u; g < G; g++) {
      var mx = m[g];
      for (var i = 0u; i < nsg; i++) { mx = max(mx, pmax[g * (NT / 4u) + i]); }
      m_new[g] = mx;
    }
#else
    for (var g = 0u; g < G; g++) { ps[g * KT + l] = s[g]; }  // (KL 1 without subgroups: KT = NT)
    workgroupBarrier();
    for (var g = 0u; g < G; g++) {
      var mx = m[g];
      for (var i = 0u; i < nk; i++) { mx = max(mx, ps[g * KT + i]); }
      m_new[g] = mx;
    }
    workgroupBarrier();  // every thread has read the scores before they become p
#endif
    // 4. probabilities and the thread's running sums.
    var corr: array<f32, G>;
    for (var g = 0u; g < G; g++) {
      corr[g] = exp(m[g] - m_new[g]);
      var pj = 0.0;
      if (kk < nk) { pj = exp(s[g] - m_new[g]); }
      if (kp == 0u) { ps[g * KT + kk] = pj; }
      else { pj = 0.0; }  // the key's first thread counts its p
      lsum[g] = lsum[g] * corr[g] + pj;
      m[g] = m_new[g];
    }
    workgroupBarrier();
    // 5. PV over the thread's keys (one running sum per head, keys in order).
#if LV
    var ag: array<vec4<f32>, G>;
    for (var g = 0u; g < G; g++) { ag[g] = vec4<f32>(0.0); }
    for (var i0 = 0u; i0 < KPT; i0 += VB) {
      var vb: array<vec4<f32>, VB>;
      for (var u = 0u; u < VB; u++) {
        let j = jg + (i0 + u) * NJ;
        var v = vec4<f32>(0.0);
        if (pv && i0 + u < KPT && j < nk) { v = vc[(kb + j) * kv4 + kvh + d4]; }
        vb[u] = v;
      }
      for (var u = 0u; u < VB; u++) {
        let j = jg + (i0 + u) * NJ;
        if (i0 + u < KPT && j < nk) {
          for (var g = 0u; g < G; g++) { ag[g] += ps[g * KT + j] * vb[u]; }
        }
      }
    }
    for (var g = 0u; g < G; g++) { acc[g] = acc[g] * corr[g] + ag[g]; }
#else
    for (var g = 0u; g < G; g++) {
      var a = vec4<f32>(0.0);
      for (var i = 0u; i < KPT; i++) {
        let j = jg + i * NJ;
        if (j < nk) { a += ps[g * KT + j] * vr[i]; }
      }
      acc[g] = acc[g] * corr[g] + a;
    }
#endif
    workgroupBarrier();  // ps and pmax are rewritten by the next tile
  }
  // Final reductions, one head at a time: l_g = sum over threads (SG: subgroupAdd, then the
  // subgroups' sums in order; else in thread order), out[d4] = sum over key groups jg (in order) of acc.
#if SG
  let nsg = (NT + sg_size - 1u) / sg_size;
  for (var g = 0u; g < G; g++) {
    let ls = subgroupAdd(lsum[g]);
    if (sg_lane == 0u) { pmax[g * (NT / 4u) + l / sg_size] = ls; }
  }
  workgroupBarrier();
#endif
  for (var g = 0u; g < G; g++) {
    red[l] = acc[g];
    lred[l] = lsum[g];
    workgroupBarrier();
    if (l < HD4) {
      var lt = 0.0;
#if SG
      for (var i = 0u; i < nsg; i++) { lt += pmax[g * (NT / 4u) + i]; }
#else
      for (var i = 0u; i < NT; i++) { lt += lred[i]; }
#endif
      var a = vec4<f32>(0.0);
      for (var i = 0u; i < NJ; i++) { a += red[i * HD4 + l]; }
      let h = hk * G + g;
#if SPLIT
      let pb = ((wid.y * p.Hq + h) * p.n_split + wid.z) * (p.HD + 2u);
      if (l == 0u) { o[pb] = m[g]; o[pb + 1u] = lt; }
      let ob = pb + 2u + 4u * l;
      o[ob] = a.x; o[ob + 1u] = a.y; o[ob + 2u] = a.z; o[ob + 3u] = a.w;
#else
      let r = a / lt;
      let ob = p.o_off + qrow * p.o_stride + h * p.HD + 4u * l;
      o[ob] = r.x; o[ob + 1u] = r.y; o[ob + 2u] = r.z; o[ob + 3u] = r.w;
#endif
    }
    workgroupBarrier();
  }
}
