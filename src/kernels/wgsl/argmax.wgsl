// defines: none
// argmax over x[off .. off+n): the index of the largest value; ties go to the lowest index and NaN
// never wins (same rule as the CPU sampler). One workgroup.
struct P { n: u32, off: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@group(0) @binding(2) var<uniform> p: P;
const WG: u32 = 256u;
var<workgroup> bv: array<f32, WG>;
var<workgroup> bi: array<u32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u) {
  var best = -3.402823466e38;
  var idx = 0xffffffffu;
  for (var i = lid.x; i < p.n; i += WG) {
    let v = x[p.off + i];
    if (v > best || (idx == 0xffffffffu && v == best)) { best = v; idx = i; }
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
