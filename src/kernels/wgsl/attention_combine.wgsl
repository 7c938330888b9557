// attention_combine: merges the per-split partials of attention.wgsl (SPLIT variant) for each
// (query head h, token t): M = max_s m_s, out = sum_s e^(m_s - M) acc_s / sum_s e^(m_s - M) l_s.
// An empty split has m = -3.4e38, l = 0, acc = 0 and contributes nothing.
struct P { T: u32, Hq: u32, HD: u32, n_split: u32, o_off: u32, o_stride: u32 }
@group(0) @binding(0) var<storage, read> part: array<f32>;
@group(0) @binding(1) var<storage, read_write> o: array<f32>;
@group(0) @binding(2) var<uniform> p: P;

@compute @workgroup_size(64)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let h = wid.x;
  let t = wid.y;
  let base = (t * p.Hq + h) * p.n_split;
  let stride = p.HD + 2u;
  var mx = -3.402823466e38;
  for (var s = 0u; s < p.n_split; s++) { mx = max(mx, part[(base + s) * stride]); }
  var den = 0.0;
  for (var s = 0u; s < p.n_split; s++) {
    let b = (base + s) * stride;
    den += exp(part[b] - mx) * part[b + 1u];
  }
  for (var d = lid.x; d < p.HD; d += 64u) {
    var num = 0.0;
    for (var s = 0u; s < p.n_split; s++) {
      let b = (base + s) * stride;
      num += exp(part[b] - mx) * part[b + 2u + d];
    }
    o[p.o_off + t * p.o_stride + h * p.HD + d] = num / den;
  }
}
