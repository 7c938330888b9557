// defines: AL STAGE_WHOLE|STAGE_PART|STAGE_FINAL
// argmax over x[off .. off+n): the index of the largest value; ties go to the lowest index and NaN
// never wins (same rule as the CPU sampler). A workgroup of WG threads scans its range: thread t
// visits indices start + t, start + t + WG, ... in increasing order (the first maximum it sees
// wins), then a tree over the threads picks the larger value, the lower index on ties.
//   STAGE_WHOLE  one workgroup scans all n and writes the index to out[0] (--argmax-workgroups 1).
//   STAGE_PART   workgroup g scans the chunk [g * chunk, min(n, (g + 1) * chunk)) and writes its
//                candidate (value bits, index; index 0xffffffff when the chunk holds only NaN) to
//                out[1 + 2g], out[2 + 2g] (--argmax-workgroups G > 1: G workgroups read the logits).
//   STAGE_FINAL  one workgroup reduces the `groups` candidates of STAGE_PART by the same rule into out[0].
// Every stage keeps the same winner: chunks are contiguous and in increasing index order, so the
// first maximum of the candidates is the first maximum of x (the result is the same for every G).
//   AL  loads of the thread's scan issued together before their comparisons (--argmax-loads): the
//       thread visits the same indices in the same order whatever AL, so the result is the same; AL > 1
//       keeps AL loads in flight where AL = 1 leaves a load, then a compare, per step (one workgroup
//       reading 600 KB of logits is bound by the latency of its loads, not by bandwidth).
struct P { n: u32, off: u32, chunk: u32, groups: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<uniform> p: P;
const WG: u32 = 256u;
const AL: u32 = {{AL}}u;
const NONE: u32 = 0xffffffffu;
var<workgroup> bv: array<f32, WG>;
var<workgroup> bi: array<u32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  var best = -3.402823466e38;
  var idx = NONE;
#if STAGE_FINAL
  // Candidates in increasing chunk order (their indices increase with g).
  for (var g = lid.x; g < p.groups; g += WG) {
    let v = bitcast<f32>(out[1u + 2u * g]);
    let i = out[2u + 2u * g];
    if (i != NONE && (v > best || (idx == NONE && v == best))) { best = v; idx = i; }
  }
#else
#if STAGE_PART
  let start = wid.x * p.chunk;
  let end = min(p.n, start + p.chunk);
#endif
#if STAGE_WHOLE
  let start = 0u;
  let end = p.n;
#endif
  for (var i0 = start + lid.x; i0 < end; i0 += WG * AL) {
    var v: array<f32, AL>;
    for (var u = 0u; u < AL; u++) {
      let i = i0 + u * WG;
      if (i < end) { v[u] = x[p.off + i]; }
    }
    for (var u = 0u; u < AL; u++) {
      let i = i0 + u * WG;
      if (i < end && (v[u] > best || (idx == NONE && v[u] == best))) { best = v[u]; idx = i; }
    }
  }
#endif
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
  if (lid.x == 0u) {
#if STAGE_PART
    out[1u + 2u * wid.x] = bitcast<u32>(bv[0]);
    out[2u + 2u * wid.x] = bi[0];
#else
    out[0] = select(bi[0], 0u, bi[0] == NONE);
#endif
  }
}
