// attention_tiled: causal GQA attention for T > 1 query tokens (prefill chunks, the new tokens of a
// turn), multi-query flash attention (FlashAttention, Dao et al. 2022; online softmax, Milakov &
// Gimelshein 2018). The rows of KV head hk are i = t * G + g (token t, query head h = hk * G + g,
// G = Hq / Hkv): one workgroup per (tile of RW consecutive rows, KV head, key split), so a tile holds
// every query head of the group for about RW / G consecutive tokens (the last tile is ragged). Each
// tile of BK keys is loaded once into workgroup memory (K, then V into the same array) and reused by
// all RW rows: the K/V reads of attention.wgsl (one workgroup per row) are divided by up to RW.
// Key j is visible to token t iff j <= pos0 + t (causal mask per row). Every sum runs in a fixed
// order (keys ascending, one thread per sum), so results are deterministic.
// Phases per key tile (4 barriers): load K; scores S[r][j] (one thread per entry); online softmax
// (one thread per row: running max m, running sum l, rescale factor); load V; acc[r] = acc[r] * corr
// + sum_j P[r][j] V[j] (one thread per vec4 of a row's output).
// Variants (ops.cpp picks them, keeping workgroup memory under 16 KiB, WebGPU's default limit):
//   HD4  head dim / 4 (compile time);  RW  rows per workgroup;  BK  keys per tile;  NT  threads.
//   SPLIT as attention.wgsl: workgroup z handles keys [z * split_len, (z+1) * split_len) only and
//   writes its unnormalised partial (m, l, acc[HD]) to `o` at ((t * Hq + h) * n_split + z) * (HD + 2)
//   for attention_combine.wgsl. A row with no visible key in its split writes m = -3.4e38, l = 0.
struct P { T: u32, pos0: u32, Hq: u32, Hkv: u32, HD: u32, q_off: u32, q_stride: u32, o_off: u32,
           o_stride: u32, kv_dim: u32, scale: f32, split_len: u32, n_split: u32 }
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
const NEG: f32 = -3.402823466e38;              // score of a masked key
var<workgroup> qs: array<vec4<f32>, RW * HS>;
var<workgroup> kvs: array<vec4<f32>, BK * HS>;
var<workgroup> ss: array<f32, RW * BK>;  // scores, then probabilities, [row][key]
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
#if SPLIT
  let k_begin = min(wid.z * p.split_len, n_keys);
  let k_end = min(k_begin + p.split_len, n_keys);
#else
  let k_begin = 0u;
  let k_end = n_keys;
#endif
  var m = NEG;     // thread r < RW: running max of row r
  var lsum = 0.0;  // thread r < RW: running sum of row r
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
    for (var e = l; e < RW * BK; e += NT) {
      let r = e / BK;
      let j = e % BK;
      var s = NEG;
      if (r < n_rows && j < nk && kb + j <= p.pos0 + (i0 + r) / G) {
        var d = 0.0;
        for (var c = 0u; c < HD4; c++) { d += dot(qs[r * HS + c], kvs[j * HS + c]); }
        s = d * p.scale;
      }
      ss[e] = s;
    }
    workgroupBarrier();
    if (l < RW) {
      var mx = m;
      for (var j = 0u; j < nk; j++) { mx = max(mx, ss[l * BK + j]); }
      var sum = 0.0;
      for (var j = 0u; j < nk; j++) {
        let s = ss[l * BK + j];
        var pj = 0.0;
        if (s > NEG) { pj = exp(s - mx); }
        ss[l * BK + j] = pj;
        sum += pj;
      }
      let corr = exp(m - mx);
      lsum = lsum * corr + sum;
      m = mx;
      rs[l] = corr;
    }
    for (var e = l; e < BK * HD4; e += NT) {
      let j = e / HD4;
      let c = e % HD4;
      var v = vec4<f32>(0.0);
      if (j < nk) { v = vc[(kb + j) * kv4 + kv_base + c]; }
      kvs[j * HS + c] = v;
    }
    workgroupBarrier();
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
  if (l < n_rows) {
    let i = i0 + l;
    let pb = (((i / G) * p.Hq + hk * G + i % G) * p.n_split + wid.z) * (p.HD + 2u);
    o[pb] = m;
    o[pb + 1u] = lsum;
  }
#else
  if (l < RW) { rs[l] = lsum; }
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
