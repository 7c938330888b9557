// defines: none
// sparse_select: the key blocks each query block attends to (kernels/sparse_attention.h). One
// workgroup per (query block i of the chunk, KV head hk); query block qb = qb0 + i holds the chunk
// rows t with (pos0 + t) / B == qb. With lo = max(0, qb + 1 - W):
//   always: block 0 (attention sink; InfLLM-v2 "initial tokens") and the local window lo..qb
//   (the query's own block included, causal-masked later by the attention kernel);
//   top-k: the top_k blocks c in 1..lo-1 with the largest
//     score(c) = sum_d qsum[d] * kbar[c, hk * HD + d],
//     qsum[d]  = sum_{t in qb} sum_{g < G} q[t, hk * G + g, d]   (t ascending, then g)
//   i.e. MoBA's gate <q, mean_pool(K_block)> (Lu et al. 2025, eq. 4-5) with the scores of all rows
//   of the query block and all G query heads of the KV group summed (NSA, Yuan et al. 2025, eq. 10:
//   shared selection across a GQA group; summing the rows makes one selection per query block as
//   in InfLLM-v2). Ties: the lower block id. NaN scores are never selected.
// Output row index[(i * Hkv + hk) * S ..]: the selected block ids ascending, then 0xFFFFFFFF up to
// S = 1 + top_k + W slots. scores: scratch, n_cap floats per (i, hk).
struct P { T: u32, pos0: u32, Hq: u32, Hkv: u32, HD: u32, q_off: u32, q_stride: u32, kv_dim: u32,
           B: u32, top_k: u32, window: u32, S: u32, qb0: u32, n_cap: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> means: array<f32>;
@group(0) @binding(2) var<storage, read_write> scores: array<f32>;
@group(0) @binding(3) var<storage, read_write> index: array<u32>;
@group(0) @binding(4) var<uniform> p: P;

const NT: u32 = 64u;
const MAXD: u32 = 256u;
const SMAX: u32 = 256u;
const NONE: u32 = 0xFFFFFFFFu;
const MARK: f32 = -3.402823466e38;  // a picked candidate's score (lower than any finite score)
var<workgroup> qs: array<f32, MAXD>;
var<workgroup> bs: array<f32, NT>;
var<workgroup> bi: array<u32, NT>;
var<workgroup> picked: array<u32, SMAX>;
var<workgroup> n_picked: u32;

@compute @workgroup_size(NT)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let i = wid.x;
  let hk = wid.y;
  let l = lid.x;
  let qb = p.qb0 + i;
  let G = p.Hq / p.Hkv;
  let t_lo = max(qb * p.B, p.pos0) - p.pos0;
  let t_hi = min((qb + 1u) * p.B, p.pos0 + p.T) - p.pos0;
  for (var d = l; d < p.HD; d += NT) {
    var s = 0.0;
    for (var t = t_lo; t < t_hi; t++) {
      let qr = p.q_off + t * p.q_stride + hk * G * p.HD + d;
      for (var g = 0u; g < G; g++) { s += q[qr + g * p.HD]; }
    }
    qs[d] = s;
  }
  if (l == 0u) { n_picked = 0u; }
  workgroupBarrier();
  var lo = 0u;
  if (qb + 1u >= p.window) { lo = qb + 1u - p.window; }
  let sb = (i * p.Hkv + hk) * p.n_cap;
  for (var c = 1u + l; c < lo; c += NT) {
    let mb = c * p.kv_dim + hk * p.HD;
    var s = 0.0;
    for (var d = 0u; d < p.HD; d++) { s += qs[d] * means[mb + d]; }
    scores[sb + c] = s;
  }
  storageBarrier();
  workgroupBarrier();
  var n_cand = 0u;
  if (lo > 1u) { n_cand = lo - 1u; }
  let kk = min(p.top_k, n_cand);
  for (var k = 0u; k < kk; k++) {
    var best = MARK;
    var bid = NONE;
    for (var c = 1u + l; c < lo; c += NT) {  // ascending c: a tie keeps the lower id
      let v = scores[sb + c];
      if (v > MARK && (bid == NONE || v > best)) { best = v; bid = c; }
    }
    bs[l] = best;
    bi[l] = bid;
    workgroupBarrier();
    for (var off = NT / 2u; off > 0u; off >>= 1u) {
      if (l < off) {
        let ob = bi[l + off];
        let os = bs[l + off];
        if (ob != NONE && (bi[l] == NONE || os > bs[l] || (os == bs[l] && ob < bi[l]))) {
          bs[l] = os;
          bi[l] = ob;
        }
      }
      workgroupBarrier();
    }
    if (l == 0u && bi[0] != NONE) {
      picked[n_picked] = bi[0];
      n_picked = n_picked + 1u;
      scores[sb + bi[0]] = MARK;
    }
    storageBarrier();
    workgroupBarrier();
  }
  if (l == 0u) {
    let np = n_picked;
    for (var a = 1u; a < np; a++) {  // insertion sort, ascending ids
      let v = picked[a];
      var b = a;
      while (b > 0u && picked[b - 1u] > v) {
        picked[b] = picked[b - 1u];
        b--;
      }
      picked[b] = v;
    }
    let ib = (i * p.Hkv + hk) * p.S;
    var n = 0u;
    if (lo > 0u) {
      index[ib] = 0u;
      n = 1u;
    }
    for (var a = 0u; a < np; a++) {
      index[ib + n] = picked[a];
      n++;
    }
    for (var b = lo; b <= qb; b++) {
      index[ib + n] = b;
      n++;
    }
    for (; n < p.S; n++) { index[ib + n] = NONE; }
  }
}
