// defines: ILP SPLIT
// attention: causal scaled-dot-product attention with grouped-query heads (GQA, Ainslie et al.
// 2023) over the KV cache, for T query tokens at positions pos0..pos0+T-1. One workgroup per
// (query head, token); keys are processed in tiles of BK with an online softmax (Milakov &
// Gimelshein 2018; as in FlashAttention), so any context length works with fixed shared memory.
// Query head h reads KV head h / (Hq / Hkv). Key j is visible to token t iff j <= pos0 + t (and,
// with a sliding window W != 0, pos0 + t - j < W: the loop starts at the window's first key).
// SPLIT (flash-decoding, Dao et al. 2023): workgroup z handles keys [k_lo + z * split_len, k_lo + (z+1) *
// split_len) only and writes its unnormalised partial (m, l, acc[HD]) to `o` at
// ((t * Hq + h) * n_split + z) * (HD + 2); attention_combine.wgsl merges the partials. Used when
// (heads x tokens) alone would leave most of the GPU idle (decode).
// ILP: independent partial sums in the QK and PV loops (more loads in flight).
struct P { T: u32, pos0: u32, Hq: u32, Hkv: u32, HD: u32, q_off: u32, q_stride: u32, o_off: u32,
           o_stride: u32, kv_dim: u32, scale: f32, split_len: u32, n_split: u32,
           window: u32 }
@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> kc: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> vc: array<f32>;
@group(0) @binding(3) var<storage, read_write> o: array<f32>;
@group(0) @binding(4) var<uniform> p: P;

const BK: u32 = 64u;     // keys per tile = threads per workgroup
const MAXD: u32 = 256u;  // largest head dim supported
var<workgroup> qs: array<vec4<f32>, MAXD / 4u>;
var<workgroup> ps: array<f32, BK>;
var<workgroup> red: array<f32, BK>;

@compute @workgroup_size(BK)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let h = wid.x;
  let t = wid.y;
  let l = lid.x;
  let hk = h / (p.Hq / p.Hkv);
  let qb = p.q_off + t * p.q_stride + h * p.HD;
  let d4 = p.HD / 4u;
  for (var i = l; i < d4; i += BK) {
    qs[i] = vec4<f32>(q[qb + 4u * i], q[qb + 4u * i + 1u], q[qb + 4u * i + 2u], q[qb + 4u * i + 3u]);
  }
  workgroupBarrier();
  let n_keys = p.pos0 + t + 1u;
  var k_lo = 0u;  // first visible key: the sliding window's start (window 0: key 0)
  if (p.window != 0u && n_keys > p.window) { k_lo = n_keys - p.window; }
#if SPLIT
  let k_begin = min(k_lo + wid.z * p.split_len, n_keys);
  let k_end = min(k_begin + p.split_len, n_keys);
#else
  let k_begin = k_lo;
  let k_end = n_keys;
#endif
  var m = -3.402823466e38;
  var lsum = 0.0;
  var acc = array<f32, 4>(0.0, 0.0, 0.0, 0.0);
  for (var kb = k_begin; kb < k_end; kb += BK) {
    let j = kb + l;
    var s = -3.402823466e38;
    if (j < k_end) {
      let kbase = (j * p.kv_dim + hk * p.HD) / 4u;
      var d0 = 0.0;
      var d1 = 0.0;
      var i = 0u;
#if ILP
      for (; i + 2u <= d4; i += 2u) {
        d0 += dot(qs[i], kc[kbase + i]);
        d1 += dot(qs[i + 1u], kc[kbase + i + 1u]);
      }
#endif
      for (; i < d4; i++) { d0 += dot(qs[i], kc[kbase + i]); }
      s = (d0 + d1) * p.scale;
    }
    red[l] = s;
    workgroupBarrier();
    for (var off = BK / 2u; off > 0u; off >>= 1u) {
      if (l < off) { red[l] = max(red[l], red[l + off]); }
      workgroupBarrier();
    }
    let m_new = max(m, red[0]);
    workgroupBarrier();
    var pj = 0.0;
    if (j < k_end) { pj = exp(s - m_new); }
    ps[l] = pj;
    red[l] = pj;
    workgroupBarrier();
    for (var off = BK / 2u; off > 0u; off >>= 1u) {
      if (l < off) { red[l] += red[l + off]; }
      workgroupBarrier();
    }
    let corr = exp(m - m_new);
    lsum = lsum * corr + red[0];
    let nk = min(BK, k_end - kb);
    for (var c = 0u; c < 4u; c++) {
      let d = l + c * BK;
      if (d < p.HD) {
        // ILP: four independent partial sums keep four V loads in flight (the loop is latency
        // bound); without it, one running sum in key order.
        let vb = kb * p.kv_dim + hk * p.HD + d;
        let kv = p.kv_dim;
        var a0 = 0.0;
        var a1 = 0.0;
        var a2 = 0.0;
        var a3 = 0.0;
        var jj = 0u;
#if ILP
        for (; jj + 4u <= nk; jj += 4u) {
          let v = vb + jj * kv;
          a0 += ps[jj] * vc[v];
          a1 += ps[jj + 1u] * vc[v + kv];
          a2 += ps[jj + 2u] * vc[v + 2u * kv];
          a3 += ps[jj + 3u] * vc[v + 3u * kv];
        }
#endif
        for (; jj < nk; jj++) { a0 += ps[jj] * vc[vb + jj * kv]; }
        acc[c] = acc[c] * corr + ((a0 + a1) + (a2 + a3));
      }
    }
    m = m_new;
    workgroupBarrier();
  }
#if SPLIT
  let pb = ((t * p.Hq + h) * p.n_split + wid.z) * (p.HD + 2u);
  if (l == 0u) { o[pb] = m; o[pb + 1u] = lsum; }
  for (var c = 0u; c < 4u; c++) {
    let d = l + c * BK;
    if (d < p.HD) { o[pb + 2u + d] = acc[c]; }
  }
#else
  for (var c = 0u; c < 4u; c++) {
    let d = l + c * BK;
    if (d < p.HD) { o[p.o_off + t * p.o_stride + h * p.HD + d] = acc[c] / lsum; }
  }
#endif
}
