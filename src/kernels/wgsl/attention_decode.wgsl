// defines: G HD4 NT SG SPLIT KB LV KL PF MULTI QKN NEOX
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
//   PF   1 (--attn-decode-prefetch; LV 0, QKN 0): the thread's whole share of a tile (its HD4P vec4
//        of the K row, its KPT V vec4) in registers (Tile): the first tile's loads are issued
//        before the query's load into workgroup memory and its barrier, the next tile's K rows
//        right after the scores and its V rows right after the PV products. The same products in the
//        same order as PF 0 (whatever KB): bit-identical;
//   NT   (--attn-decode-threads) threads per workgroup: keys per tile KT = NT / KL, NJ = NT / HD4
//        key groups in the PV phase;
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
//   QKN  1 (--fused-decode; MULTI 0): q is the raw QKV projection (the query heads at q_off, the new
//        token's raw key / value heads at k_off / v_off) and the workgroup first does what
//        qk_norm_rope_kv.wgsl does in a dispatch of its own: the per-head RMSNorm of its G query
//        heads (weights qw) and of its key head (weights kw; Zhang & Sennrich 2019, per head as in
//        LFM2 / Qwen3 / Gemma 3), RoPE at pos0 (the (cos, sin) table cs, first rot dims; NEOX: pairs
//        (i, i + rot/2), else (2i, 2i+1)), and the workgroup whose keys include pos0 (one per KV
//        head) stores the new key and value rows in the caches before it reads them (storageBarrier:
//        no other workgroup reads row pos0). The sums of squares are reduced in another order than
//        qk_norm_rope_kv's 64-lane tree: not bit-identical to the unfused path (a tolerance test,
//        kernels/fused_ops_test.cpp).
struct P { T: u32, pos0: u32, Hq: u32, Hkv: u32, HD: u32, q_off: u32, q_stride: u32, o_off: u32,
           o_stride: u32, kv_dim: u32, scale: f32, split_len: u32, n_split: u32,
           window: u32, tab_off: u32, pad0: u32, k_off: u32, v_off: u32, rot: u32, table_pairs: u32,
           eps: f32, pad1: u32, pad2: u32, pad3: u32 }
@group(0) @binding(0) var<storage, read> q: array<f32>;
#if QKN
@group(0) @binding(1) var<storage, read_write> kc: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> vc: array<vec4<f32>>;
#else
@group(0) @binding(1) var<storage, read> kc: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> vc: array<vec4<f32>>;
#endif
@group(0) @binding(3) var<storage, read_write> o: array<f32>;
#if MULTI
@group(0) @binding(4) var<storage, read> tab: array<vec4<u32>>;
@group(0) @binding(5) var<uniform> p: P;
#else
#if QKN
@group(0) @binding(4) var<storage, read> qw: array<f32>;        // [HD] query norm weight
@group(0) @binding(5) var<storage, read> kw: array<f32>;        // [HD] key norm weight
@group(0) @binding(6) var<storage, read> cs: array<vec2<f32>>;  // [pos][rot/2] (cos, sin)
@group(0) @binding(7) var<uniform> p: P;
#else
@group(0) @binding(4) var<uniform> p: P;
#endif
#endif

const HD4: u32 = {{HD4}}u;
const G: u32 = {{G}}u;
const NT: u32 = {{NT}}u;
const KB: u32 = {{KB}}u;
const PF: u32 = {{PF}}u;
const KL: u32 = {{KL}}u;
const KT: u32 = NT / KL;                   // keys per tile
const HD4P: u32 = HD4 / KL;                // K vec4 per thread in the score phase
const NJ: u32 = NT / HD4;                  // key groups of the PV phase
const KPT: u32 = (KT + NJ - 1u) / NJ;      // keys per thread in the PV phase
const VB: u32 = min(8u, KPT);              // LV: V vec4s loaded together in the PV phase
const NEG: f32 = -3.402823466e38;
const QPT4: u32 = (G * HD4 + NT - 1u) / NT;  // QKN: query vec4 per thread
var<workgroup> qs: array<vec4<f32>, G * HD4>;
var<workgroup> ps: array<f32, G * KT>;      // [g][key of the tile]: scores (no SG), then p
#if SG
var<workgroup> pmax: array<f32, G * (NT / 4u)>;  // [g][subgroup]: tile max per subgroup (sizes >= 4)
#endif
var<workgroup> red: array<vec4<f32>, NT>;   // final reductions
var<workgroup> lred: array<f32, NT>;

#if PF
// The thread's share of key tile kb (nk keys): K vec4 kp, kp + KL, ... of key kk's row (kbase: the
// key's vec4 offset at kp), and the V vec4 d4 of keys jg, jg + NJ, ... (zeros past nk), as PF 0's
// step 1 loads them.
struct Tile { k: array<vec4<f32>, HD4P>, v: array<vec4<f32>, KPT> }
fn load_k(t: ptr<function, Tile>, kb: u32, nk: u32, kv4: u32, kvh: u32, kk: u32, kp: u32) {
  if (kk < nk) {
    let kbase = (kb + kk) * kv4 + kvh + kp;
    for (var i = 0u; i < HD4P; i++) { (*t).k[i] = kc[kbase + i * KL]; }
  }
}
fn load_v(t: ptr<function, Tile>, kb: u32, nk: u32, kv4: u32, kvh: u32, jg: u32, d4: u32, pv: bool) {
  for (var i = 0u; i < KPT; i++) {
    let j = jg + i * NJ;
    var v = vec4<f32>(0.0);
    if (pv && j < nk) { v = vc[(kb + j) * kv4 + kvh + d4]; }
    (*t).v[i] = v;
  }
}
#endif

#if QKN
// Threads per head in the QK-norm sums: the largest power of two with G of them in NT threads.
fn qkn_lanes() -> u32 {
  var n = NT;
  while (n * G > NT) { n = n / 2u; }
  return n;
}

// The sum of squares of HD4 vec4 starting at vec4 b of qs (src 0) or HD floats at q[b] (src 1),
// over the PH threads of head slot g = l / PH (lred as scratch; every thread of the workgroup calls
// it, for uniform barriers). Returns the sum in every thread of the slot.
fn qkn_sum(l: u32, g: u32, PH: u32, b: u32, from_q: bool) -> f32 {
  let j = l % PH;
  var s = 0.0;
  if (g < G) {
    for (var e = j; e < HD4; e += PH) {
      var v: vec4<f32>;
      if (from_q) { let i = b + 4u * e; v = vec4<f32>(q[i], q[i + 1u], q[i + 2u], q[i + 3u]); }
      else { v = qs[b + e]; }
      s += dot(v, v);
    }
  }
  lred[l] = s;
  workgroupBarrier();
  for (var off = PH / 2u; off > 0u; off >>= 1u) {
    if (g < G && j < off) { lred[l] += lred[l + off]; }
    workgroupBarrier();
  }
  var r = 0.0;
  if (g < G) { r = lred[g * PH]; }
  workgroupBarrier();  // lred is free again
  return r;
}

// The partner of element j < rot in its RoPE pair, the pair's index and whether j is its first.
fn rope_pair(j: u32) -> vec3u {
  let half = p.rot / 2u;
#if NEOX
  if (j < half) { return vec3u(j + half, j, 1u); }
  return vec3u(j - half, j - half, 0u);
#else
  if ((j & 1u) == 0u) { return vec3u(j + 1u, j / 2u, 1u); }
  return vec3u(j - 1u, j / 2u, 0u);
#endif
}

// Element j of a normed head after RoPE at table row c0: x its normed value, xo its pair partner's
// (rope_pair(j).x; unused past rot), by rope.wgsl's expressions.
fn rotated(j: u32, x: f32, xo: f32, c0: u32) -> f32 {
  if (j >= p.rot) { return x; }
  let pr = rope_pair(j);
  let c = cs[c0 + pr.y];
  if (pr.z == 1u) { return x * c.x - xo * c.y; }
  return xo * c.y + x * c.x;
}
#endif

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
  let kk = l / KL;  // the thread's key of the tile in the score phase
  let kp = l % KL;  // ... and its part of the key's row
#if PF
  var tl: Tile;  // the first tile's loads, issued before the query's
  load_v(&tl, k_begin, min(KT, k_end - k_begin), kv4, kvh, jg, d4, pv);
  load_k(&tl, k_begin, min(KT, k_end - k_begin), kv4, kvh, kk, kp);
#endif
  for (var e = l; e < G * HD4; e += NT) {
    let b = p.q_off + qrow * p.q_stride + (hk * G) * p.HD + 4u * e;  // heads of a group are contiguous in q
    qs[e] = vec4<f32>(q[b], q[b + 1u], q[b + 2u], q[b + 3u]);
  }
  workgroupBarrier();
#if QKN
  // The fused QK-norm + RoPE of the group's query heads in qs (per element: normed, then the pair
  // rotated by rope.wgsl's expressions), then the new key row (normed, rotated) and value row
  // stored at cache row pos0 by the workgroup whose keys include it.
  let PH = qkn_lanes();
  let gq = l / PH;
  let qsum = qkn_sum(l, gq, PH, gq * HD4, false);
  if (l % PH == 0u && gq < G) { lred[gq] = 1.0 / sqrt(qsum / f32(p.HD) + p.eps); }
  workgroupBarrier();
  let c0 = pos0 * p.table_pairs;
  // Each thread owns whole vec4 of qs (a write to one component of a vector may touch the whole
  // vector on some backends, gpuweb#2112): its new values are computed from the raw qs, kept, and
  // written after a barrier.
  var qn: array<vec4<f32>, QPT4>;
  for (var e4 = l; e4 < G * HD4; e4 += NT) {
    let g = e4 / HD4;
    let sc = lred[g];
    var v: vec4<f32>;
    for (var i = 0u; i < 4u; i++) {
      let j = 4u * (e4 % HD4) + i;
      let jo = select(j, rope_pair(j).x, j < p.rot);
      v[i] = rotated(j, qs[g * HD4 + j / 4u][j % 4u] * sc * qw[j], qs[g * HD4 + jo / 4u][jo % 4u] * sc * qw[jo], c0);
    }
    qn[(e4 - l) / NT] = v;
  }
  workgroupBarrier();  // every thread has read the raw q before it is overwritten
  for (var e4 = l; e4 < G * HD4; e4 += NT) { qs[e4] = qn[(e4 - l) / NT]; }
  // The new key: every workgroup computes the sum (uniform barriers), the one holding key pos0 stores.
  let kb0 = p.k_off + hk * p.HD;
  let ksum = qkn_sum(l, select(G, 0u, l < PH), PH, kb0, true);
  if (l == 0u) { lred[0] = 1.0 / sqrt(ksum / f32(p.HD) + p.eps); }
  workgroupBarrier();
  let ksc = lred[0];
  var kl = 0u;  // the first visible key (k_lo below)
  if (p.window != 0u && pos0 + 1u > p.window) { kl = pos0 + 1u - p.window; }
#if SPLIT
  let has_new = kl + wid.z * split_len <= pos0 && pos0 < kl + (wid.z + 1u) * split_len;
#else
  let has_new = true;
#endif
  if (has_new) {  // whole vec4 per thread (as qs above)
    let row = pos0 * kv4 + kvh;
    let vb = p.v_off + hk * p.HD;
    for (var j4 = l; j4 < HD4; j4 += NT) {
      var kv: vec4<f32>;
      for (var i = 0u; i < 4u; i++) {
        let j = 4u * j4 + i;
        let jo = select(j, rope_pair(j).x, j < p.rot);
        kv[i] = rotated(j, q[kb0 + j] * ksc * kw[j], q[kb0 + jo] * ksc * kw[jo], c0);
      }
      kc[row + j4] = kv;
      vc[row + j4] = vec4<f32>(q[vb + 4u * j4], q[vb + 4u * j4 + 1u], q[vb + 4u * j4 + 2u], q[vb + 4u * j4 + 3u]);
    }
  }
  storageBarrier();  // the stored rows are read below by other threads of this workgroup
  workgroupBarrier();  // qs complete
#endif
  var m: array<f32, G>;
  var lsum: array<f32, G>;
  var acc: array<vec4<f32>, G>;
  for (var g = 0u; g < G; g++) {
    m[g] = NEG;
    lsum[g] = 0.0;
    acc[g] = vec4<f32>(0.0);
  }
  for (var kb = k_begin; kb < k_end; kb += KT) {
    let nk = min(KT, k_end - kb);
    // 1. loads: V first (consumed last; LV: in step 5), then K.
#if LV
#else
#if PF
#else
    var vr: array<vec4<f32>, KPT>;
    for (var i = 0u; i < KPT; i++) {
      let j = jg + i * NJ;
      var v = vec4<f32>(0.0);
      if (pv && j < nk) { v = vc[(kb + j) * kv4 + kvh + d4]; }
      vr[i] = v;
    }
#endif
#endif
    var s: array<f32, G>;
    for (var g = 0u; g < G; g++) { s[g] = NEG; }
    var d: array<f32, G>;
    for (var g = 0u; g < G; g++) { d[g] = 0.0; }
#if PF
    if (kk < nk) {
      for (var i = 0u; i < HD4P; i++) {
        for (var g = 0u; g < G; g++) { d[g] += dot(qs[g * HD4 + i * KL + kp], tl.k[i]); }
      }
    }
    let kn = kb + KT;  // the next tile: its K rows now (this tile's are used)
    if (kn < k_end) { load_k(&tl, kn, min(KT, k_end - kn), kv4, kvh, kk, kp); }
#else
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
#endif
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
#if PF
        if (j < nk) { a += ps[g * KT + j] * tl.v[i]; }
#else
        if (j < nk) { a += ps[g * KT + j] * vr[i]; }
#endif
      }
      acc[g] = acc[g] * corr[g] + a;
    }
#if PF
    if (kn < k_end) { load_v(&tl, kn, min(KT, k_end - kn), kv4, kvh, jg, d4, pv); }  // the next tile's V rows
#endif
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
