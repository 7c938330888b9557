// defines: BK HD4 NT RW SPLIT
// attention_tiled: causal GQA attention for T > 1 query tokens (prefill chunks, the new tokens of a
// turn), multi-query flash attention (FlashAttention, Dao et al. 2022; online softmax, Milakov &
// Gimelshein 2018). The rows of KV head hk are i = t * G + g (token t, query head h = hk * G + g,
// G = Hq / Hkv): one workgroup per (tile of RW consecutive rows, KV head, key split), so a tile holds
// every query head of the group for about RW / G consecutive tokens (the last tile is ragged). Each
// tile of BK keys is loaded once into workgroup memory (K, then V into the same array) and reused by
// all RW rows: the K/V reads of attention.wgsl (one workgroup per row) are divided by up to RW.
// Key j is visible to token t iff j <= pos0 + t (causal mask per row) and, with a sliding window
// W != 0, pos0 + t - j < W (the tile starts at its first row's window; later rows mask theirs). Every sum runs in a fixed
// order (keys ascending, one thread per sum), so results are deterministic.
// Phases per key tile (4 barriers): load K; scores (NT / RW threads per row, each KPT keys) and
// their partial maxes; online softmax (each thread of a row forms the row's new max m from the
// partials, its probabilities and their partial sum; the row's running sum l is summed in order
// by its first thread) while V is loaded; acc[r] = acc[r] * corr + sum_j P[r][j] V[j] (one thread
// per vec4 of a row's output).
// Variants (ops.cpp picks them, keeping workgroup memory under 16 KiB, WebGPU's default limit):
//   HD4  head dim / 4 (compile time);  RW  rows per workgroup;  BK  keys per tile;  NT  threads.
//   SPLIT as attention.wgsl: workgroup z handles keys [k_lo + z * split_len, k_lo + (z+1) * split_len) only and
//   writes its unnormalised partial (m, l, acc[HD]) to `o` at ((t * Hq + h) * n_split + z) * (HD + 2)
//   for attention_combine.wgsl. A row with no visible key in its split writes m = -3.4e38, l = 0.
struct P { T: u32, pos0: u32, Hq: u32, Hkv: u32, HD: u32, q_off: u32, q_stride: u32, o_off: u32,
           o_stride: u32, kv_dim: u32, scale: f32, split_len: u32, n_split: u32,
           window: u32 }
@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> kc: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> vc: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> o: array<f32>;
@group(0) @binding(4) var<uniform> p: P;

const HD4: u32 = {{HD4}}u;
const HS: u32 = HD4 + 1u;  // padded row stride (vec4) of the Q and K/V tiles: fewer bank conflicts
const RW: u32 = {{RW}}u;
const BK: u32 = {{BK}}u;
const NT: u32 = {{NT}}u;
const ACC: u32 = (RW * HD4 + NT - 1u) / NT;  // output vec4s per thread
const TPR: u32 = NT / RW;                    // threads per row in the score and softmax phase
const KPT: u32 = (BK + TPR - 1u) / TPR;      // keys per thread in that phase
const NEG: f32 = -3.402823466e38;              // score of a masked key
var<workgroup> qs: array<vec4<f32>, RW * HS>;
var<workgroup> kvs: array<vec4<f32>, BK * HS>;
var<workgroup> ss: array<f32, RW * BK>;  // probabilities [row][key]
var<workgroup> part_max: array<f32, NT>; // per thread: max of its scores in the tile
var<workgroup> part_sum: array<f32, NT>; // per thread: sum of its probabilities in the tile
var<workgroup> rs: array<f32, RW>;       // per row: rescale factor of the tile, at the end l

@compute @workgroup_size(NT)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let l = lid.x;
  let G = p.Hq / p.Hkv;
  let hk = wid.y;
  let i0 = wid.x * RW;
  let n_rows = min(RW, p.T * G - i0);  // rows in this tile
  let kv_base = hk * HD4;              // vec4 offset of KV head hk in a cache row
  let kv4 = p.kv_dim / 4u;
  for (var e = l; e < RW * HD4; e += NT) {
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
  let n_keys = p.pos0 + (i0 + n_rows - 1u) / G + 1u;  // keys visible to the tile's last row
  // Sliding window W != 0: the tile's first row (lowest position) sees keys from k_lo on; later rows
  // mask their own window's start below.
  var k_lo = 0u;
  let first_pos = p.pos0 + i0 / G;
  if (p.window != 0u && first_pos + 1u > p.window) { k_lo = first_pos + 1u - p.window; }
#if SPLIT
  let k_begin = min(k_lo + wid.z * p.split_len, n_keys);
  let k_end = min(k_begin + p.split_len, n_keys);
#else
  let k_begin = k_lo;
  let k_end = n_keys;
#endif
  let r_own = l / TPR;  // score/softmax phase: this thread's row and its lane within the row
  let sub = l % TPR;
  let last_key = p.pos0 + (i0 + min(r_own, n_rows - 1u)) / G;  // last key visible to row r_own
  var first_key = 0u;                                           // first key visible to row r_own
  if (p.window != 0u && last_key + 1u > p.window) { first_key = last_key + 1u - p.window; }
  var m = NEG;     // running max of row r_own (the same in all TPR threads of the row)
  var lsum = 0.0;  // running sum of row r_own (kept by its sub == 0 thread)
  var acc: array<vec4<f32>, ACC>;
  for (var a = 0u; a < ACC; a++) { acc[a] = vec4<f32>(0.0); }
  for (var kb = k_begin; kb < k_end; kb += BK) {
    let nk = min(BK, k_end - kb);
    for (var e = l; e < BK * HD4; e += NT) {
      let j = e / HD4;
      let c = e % HD4;
      var v = vec4<f32>(0.0);
      if (j < nk) { v = kc[(kb + j) * kv4 + kv_base + c]; }
      kvs[j * HS + c] = v;
    }
    workgroupBarrier();
    // Scores of row r_own for keys j = sub + TPR * k (KPT independent dot products, each summed
    // over the head dim in order), and their max.
    var sc: array<f32, KPT>;
    for (var k = 0u; k < KPT; k++) { sc[k] = 0.0; }
    if (r_own < n_rows) {
      for (var c = 0u; c < HD4; c++) {
        let qv = qs[r_own * HS + c];
        for (var k = 0u; k < KPT; k++) { sc[k] += dot(qv, kvs[min(sub + TPR * k, BK - 1u) * HS + c]); }
      }
    }
    var pm = NEG;
    for (var k = 0u; k < KPT; k++) {
      let j = sub + TPR * k;
      if (r_own < n_rows && j < nk && kb + j <= last_key && kb + j >= first_key) { sc[k] = sc[k] * p.scale; } else { sc[k] = NEG; }
      pm = max(pm, sc[k]);
    }
    part_max[l] = pm;
    workgroupBarrier();
    // Online softmax: every thread of the row forms the same new max from the TPR partial maxes.
    var mx = m;
    for (var u = 0u; u < TPR; u++) { mx = max(mx, part_max[r_own * TPR + u]); }
    var ps = 0.0;
    for (var k = 0u; k < KPT; k++) {
      let j = sub + TPR * k;
      if (j < BK) {
        var pj = 0.0;
        if (sc[k] > NEG) { pj = exp(sc[k] - mx); }
        ss[r_own * BK + j] = pj;
        ps += pj;
      }
    }
    part_sum[l] = ps;
    let corr = exp(m - mx);
    m = mx;
    if (sub == 0u) { rs[r_own] = corr; }
    for (var e = l; e < BK * HD4; e += NT) {  // V tile into the same array (K reads are done)
      let j = e / HD4;
      let c = e % HD4;
      var v = vec4<f32>(0.0);
      if (j < nk) { v = vc[(kb + j) * kv4 + kv_base + c]; }
      kvs[j * HS + c] = v;
    }
    workgroupBarrier();
    if (sub == 0u) {
      var su = 0.0;
      for (var u = 0u; u < TPR; u++) { su += part_sum[r_own * TPR + u]; }
      lsum = lsum * corr + su;
    }
    for (var a = 0u; a < ACC; a++) {
      let e = l + a * NT;
      if (e < RW * HD4) {
        let r = e / HD4;
        let c = e % HD4;
        var s = vec4<f32>(0.0);
        for (var j = 0u; j < nk; j++) { s += ss[r * BK + j] * kvs[j * HS + c]; }
        acc[a] = acc[a] * rs[r] + s;
      }
    }
    workgroupBarrier();
  }
#if SPLIT
  if (sub == 0u && r_own < n_rows) {
    let i = i0 + r_own;
    let pb = (((i / G) * p.Hq + hk * G + i % G) * p.n_split + wid.z) * (p.HD + 2u);
    o[pb] = m;
    o[pb + 1u] = lsum;
  }
#else
  if (sub == 0u) { rs[r_own] = lsum; }
  workgroupBarrier();
#endif
  for (var a = 0u; a < ACC; a++) {
    let e = l + a * NT;
    let r = e / HD4;
    if (e < RW * HD4 && r < n_rows) {
      let c = e % HD4;
      let i = i0 + r;
      let t = i / G;
      let h = hk * G + i % G;
#if SPLIT
      let b = ((t * p.Hq + h) * p.n_split + wid.z) * (p.HD + 2u) + 2u + 4u * c;
      let v = acc[a];
#else
      let b = p.o_off + t * p.o_stride + h * p.HD + 4u * c;
      let v = acc[a] / rs[r];
#endif
      o[b] = v.x;
      o[b + 1u] = v.y;
      o[b + 2u] = v.z;
      o[b + 3u] = v.w;
    }
  }
}
