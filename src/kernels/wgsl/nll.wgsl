// defines: none
// Negative log-likelihood of one target id per row of logits (perplexity, runtime/perplexity.h):
//   y[y_off + r] = log(sum_j exp(x[r, j] - m_r)) + m_r - x[r, target_r],  m_r = max_j x[r, j],
// for rows r < rows of n logits each (row r at x_off + r * x_stride), target_r = targets[t_off + r];
// rows whose target is < 0 (not scored) or >= n get 0. One workgroup per row: a max pass and a
// sum-of-exp pass over the row, each reduced in workgroup memory (tree order), f32 throughout.
// CPU twin: ref::nll_rows (kernels/nll.h), the same formula in double.
struct P { n: u32, rows: u32, x_off: u32, x_stride: u32, t_off: u32, y_off: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> targets: array<i32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: P;
const WG: u32 = 256u;
var<workgroup> red: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3u, @builtin(local_invocation_id) lid: vec3u) {
  let r = wid.x;
  if (r >= p.rows) { return; }  // uniform per workgroup
  let base = p.x_off + r * p.x_stride;
  var m = -3.402823466e38;
  for (var i = lid.x; i < p.n; i += WG) { m = max(m, x[base + i]); }
  red[lid.x] = m;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid.x < s) { red[lid.x] = max(red[lid.x], red[lid.x + s]); }
    workgroupBarrier();
  }
  let mx = red[0];
  workgroupBarrier();
  var z = 0.0;
  for (var i = lid.x; i < p.n; i += WG) { z += exp(x[base + i] - mx); }
  red[lid.x] = z;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (lid.x < s) { red[lid.x] += red[lid.x + s]; }
    workgroupBarrier();
  }
  if (lid.x == 0u) {
    let t = targets[p.t_off + r];
    var v = 0.0;
    if (t >= 0 && u32(t) < p.n) { v = log(red[0]) + mx - x[base + u32(t)]; }
    y[p.y_off + r] = v;
  }
}
