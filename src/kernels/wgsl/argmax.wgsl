// defines: AL
// argmax over x[off .. off+n): the index of the largest value; ties go to the lowest index and NaN
// never wins (same rule as the CPU sampler). One workgroup of WG threads: thread t scans indices
// t, t + WG, t + 2 WG, ... in increasing order (the first maximum it sees wins), then a tree over the
// threads picks the larger value, the lower index on ties.
//   AL  loads of the thread's scan issued together before their comparisons (--argmax-loads): the
//       thread visits the same indices in the same order whatever AL, so the result is the same; AL > 1
//       keeps AL loads in flight where AL = 1 leaves a load, then a compare, per step (one workgroup
//       reading 600 KB of logits is bound by the latency of its loads, not by bandwidth).
struct P { n: u32, off: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<uniform> p: P;
const WG: u32 = 256u;
const AL: u32 = {{AL}}u;
var<workgroup> bv: array<f32, WG>;
var<workgroup> bi: array<u32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u) {
  var best = -3.402823466e38;
  var idx = 0xffffffffu;
  for (var i0 = lid.x; i0 < p.n; i0 += WG * AL) {
    var v: array<f32, AL>;
    for (var u = 0u; u < AL; u++) {
      let i = i0 + u * WG;
      if (i < p.n) { v[u] = x[p.off + i]; }
    }
    for (var u = 0u; u < AL; u++) {
      let i = i0 + u * WG;
      if (i < p.n && (v[u] > best || (idx == 0xffffffffu && v[u] == best))) { best = v[u]; idx = i; }
    }
  }
  bv[lid.x] = best;
  bi[lid.x] = idx;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid.x < s) {
      let ov = bv[lid.x + s];
      let oi = bi[lid.x + s];
      if (ov > bv[lid.x] || (ov == bv[lid.x] && oi < bi[lid.x])) { bv[lid.x] = ov; bi[lid.x] = oi; }
    }
    workgroupBarrier();
  }
  if (lid.x == 0u) { out[0] = select(bi[0], 0u, bi[0] == 0xffffffffu); }
}
