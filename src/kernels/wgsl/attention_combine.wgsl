// defines: ROWS
// attention_combine: merges the per-split partials of attention.wgsl / attention_tiled.wgsl (SPLIT
// variants) for each (query head h, token t): M = max_s m_s, w_s = e^(m_s - M),
// out = sum_s w_s acc_s / sum_s w_s l_s (sums in split order). An empty split has m = -3.4e38,
// l = 0, acc = 0 and contributes nothing. One workgroup per (h, t): the split statistics (m_s, l_s)
// are loaded once, in parallel, into workgroup memory and reduced by one thread (n_split <= 64,
// checked by the caller), then every thread accumulates its output dims with 4 loads in flight.
// ROWS 1 (continuous batching, --batch-decode-attn; attention_decode.wgsl MULTI): t is the t-th
// sequence of a batched decode, entry tab[tab_off + t] = (output row, position, -, split length):
// its n_split = ceil((position + 1) / split length) of the n_split record slots per head are merged
// and written to its output row.
struct P { T: u32, Hq: u32, HD: u32, n_split: u32, o_off: u32, o_stride: u32, tab_off: u32 }
@group(0) @binding(0) var<storage, read> part: array<f32>;
@group(0) @binding(1) var<storage, read_write> o: array<f32>;
#if ROWS
@group(0) @binding(2) var<storage, read> tab: array<vec4<u32>>;
@group(0) @binding(3) var<uniform> p: P;
#else
@group(0) @binding(2) var<uniform> p: P;
#endif

var<workgroup> wm: array<f32, 64>;  // m_s, then w_s
var<workgroup> wl: array<f32, 64>;  // l_s
var<workgroup> den: f32;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let h = wid.x;
  let t = wid.y;
#if ROWS
  let e4 = tab[p.tab_off + t];
  let orow = e4.x;
  let ns = (e4.y + e4.w) / e4.w;  // ceil((pos + 1) / split_len)
#else
  let orow = t;
  let ns = p.n_split;
#endif
  let base = (t * p.Hq + h) * p.n_split;
  let stride = p.HD + 2u;
  if (lid.x < ns) {
    wm[lid.x] = part[(base + lid.x) * stride];
    wl[lid.x] = part[(base + lid.x) * stride + 1u];
  }
  workgroupBarrier();
  if (lid.x == 0u) {
    var mx = -3.402823466e38;
    for (var s = 0u; s < ns; s++) { mx = max(mx, wm[s]); }
    var d = 0.0;
    for (var s = 0u; s < ns; s++) {
      let w = exp(wm[s] - mx);
      wm[s] = w;
      d += w * wl[s];
    }
    den = d;
  }
  workgroupBarrier();
  for (var d = lid.x; d < p.HD; d += 64u) {
    var num = 0.0;
    var s = 0u;
    for (; s + 4u <= ns; s += 4u) {  // same order as one-by-one: bit-identical sums
      let a0 = part[(base + s) * stride + 2u + d];
      let a1 = part[(base + s + 1u) * stride + 2u + d];
      let a2 = part[(base + s + 2u) * stride + 2u + d];
      let a3 = part[(base + s + 3u) * stride + 2u + d];
      num += wm[s] * a0;
      num += wm[s + 1u] * a1;
      num += wm[s + 2u] * a2;
      num += wm[s + 3u] * a3;
    }
    for (; s < ns; s++) { num += wm[s] * part[(base + s) * stride + 2u + d]; }
    o[p.o_off + orow * p.o_stride + h * p.HD + d] = num / den;
  }
}
