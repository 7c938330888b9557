// defines: NEOX
// qk_norm_rope_kv: the per-head RMSNorm of the query and key heads (QK-norm: head_norm.wgsl L2=0),
// RoPE of both (rope_kv.wgsl) and the KV-cache store in ONE dispatch (decode fusion,
// --fuse-qk-norm; LFM2 and Qwen3.5 attention layers). One workgroup of 64 threads per (head slot,
// token t at position pos0 + t); head slots [0, Hq) are query heads, [Hq, Hq + Hkv) key heads
// (each also copies its value head):
//   query head h (HD floats at q_off + t*q_stride + h*HD): normed with qw and rotated in place
//     (first rot dims; the rest normed only);
//   key head h (at k_off + t*kv_stride + h*HD): normed with kw, rotated, written to the key cache
//     row pos0 + t (src's k rows are left as they were: only the cache is read afterwards);
//   value head h (at v_off + t*kv_stride + h*HD): copied to the value cache row pos0 + t.
// Bit-identical to head_norm (q) + head_norm (k) + rope_kv: the sum of squares is head_norm.wgsl's
// (64 lane sums over i, i + 64, ..., then the same tree), the scale and the normed value
// (x * scale) * w are its expressions, and the rotation is rope.wgsl's (a*cos - b*sin,
// a*sin + b*cos) on the normed values.
// Variant defines: NEOX (0: pairs (2i, 2i+1), GGUF llama layout; 1: pairs (i, i + rot/2)).
struct P { T: u32, Hq: u32, Hkv: u32, HD: u32, rot: u32, pos0: u32, q_off: u32, q_stride: u32, k_off: u32,
           v_off: u32, kv_stride: u32, table_pairs: u32, eps: f32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read> qw: array<f32>;         // [HD] query norm weight
@group(0) @binding(2) var<storage, read> kw: array<f32>;         // [HD] key norm weight
@group(0) @binding(3) var<storage, read> cs: array<vec2<f32>>;   // [pos][rot/2] (cos, sin)
@group(0) @binding(4) var<storage, read_write> kc: array<f32>;
@group(0) @binding(5) var<storage, read_write> vc: array<f32>;
@group(0) @binding(6) var<uniform> p: P;
const WG: u32 = 64u;
var<workgroup> red: array<f32, WG>;

// head_norm.wgsl's sum of squares of the HD floats at b (same loop, same tree).
fn head_sum(lid: u32, b: u32) -> f32 {
  var s = 0.0;
  for (var i = lid; i < p.HD; i += WG) { let v = x[b + i]; s += v * v; }
  red[lid] = s;
  workgroupBarrier();
  for (var o = WG / 2u; o > 0u; o >>= 1u) {
    if (lid < o) { red[lid] += red[lid + o]; }
    workgroupBarrier();
  }
  return red[0];
}

// Normed element j of the head at b (query weights when q, else key weights).
fn normed(b: u32, j: u32, scale: f32, q: bool) -> f32 {
  if (q) { return (x[b + j] * scale) * qw[j]; }
  return (x[b + j] * scale) * kw[j];
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let t = wid.y;
  let h = wid.x;
  let q = h < p.Hq;
  let kh = h - p.Hq;  // key head (when !q)
  var b = p.k_off + t * p.kv_stride + kh * p.HD;
  if (q) { b = p.q_off + t * p.q_stride + h * p.HD; }
  // head_sum's reads of x all precede its first barrier: the in-place writes below are safe.
  let scale = 1.0 / sqrt(head_sum(lid.x, b) / f32(p.HD) + p.eps);
  let half = p.rot / 2u;
  let c0 = (p.pos0 + t) * p.table_pairs;
  if (q) {
    for (var i = lid.x; i < half; i += WG) {
      let c = cs[c0 + i];
#if NEOX
      let j0 = i;
      let j1 = i + half;
#else
      let j0 = 2u * i;
      let j1 = j0 + 1u;
#endif
      let a = normed(b, j0, scale, true);
      let bb = normed(b, j1, scale, true);
      x[b + j0] = a * c.x - bb * c.y;
      x[b + j1] = a * c.y + bb * c.x;
    }
    for (var j = p.rot + lid.x; j < p.HD; j += WG) { x[b + j] = normed(b, j, scale, true); }
    return;
  }
  let dst = (p.pos0 + t) * p.Hkv * p.HD + kh * p.HD;
  for (var j = lid.x; j < p.HD; j += WG) {
    if (j >= p.rot) {
      kc[dst + j] = normed(b, j, scale, false);
      continue;
    }
#if NEOX
    let i = j % half;
    let first = j < half;
    let j0 = i;
    let j1 = i + half;
#else
    let i = j / 2u;
    let first = (j & 1u) == 0u;
    let j0 = 2u * i;
    let j1 = j0 + 1u;
#endif
    let c = cs[c0 + i];
    let a = normed(b, j0, scale, false);
    let bb = normed(b, j1, scale, false);
    if (first) {
      kc[dst + j] = a * c.x - bb * c.y;
    } else {
      kc[dst + j] = a * c.y + bb * c.x;
    }
  }
  let vb = p.v_off + t * p.kv_stride + kh * p.HD;
  for (var j = lid.x; j < p.HD; j += WG) { vc[dst + j] = x[vb + j]; }
}
