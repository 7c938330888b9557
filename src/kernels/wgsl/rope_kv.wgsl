// defines: NEOX ROWS
// rope_kv: rope.wgsl on the query heads + rope.wgsl on the key heads + kv_store.wgsl in ONE
// dispatch (decode fusion, --fuse-rope-kv). For T tokens at positions pos0 .. pos0+T-1:
//   q (Hq heads of HD at q_off + t*q_stride): rotated in place (first rot dims), as rope.wgsl;
//   k (Hkv heads at k_off + t*kv_stride): rotated and written to the key cache row pos0 + t
//     (dims >= rot copied), as rope.wgsl then kv_store.wgsl. The k rows of src are NOT rotated in
//     place (each thread owns one output element and reads both elements of its pair: writing src
//     would race with the partner's read); nothing reads them after the cache store.
//   v (at v_off + t*kv_stride): copied to the value cache row pos0 + t.
// Each value is computed with rope.wgsl's expressions (a*cos - b*sin, a*sin + b*cos) from the same
// table: bit-identical to the three unfused dispatches.
// Threads (x, per token y): [0, Hq*rot/2) query pairs, then kv_dim key elements, then kv_dim value
// elements. Variant defines: NEOX (0: pairs (2i, 2i+1), GGUF llama; 1: pairs (i, i + rot/2));
// ROWS (continuous batching, --batch-rope-kv): 0: token t is row t of src at position pos0 + t,
// stored in cache row pos0 + t; 1: token t is entry tab[tab_off + t] = (src row, position, cache
// row, -) of a table, so that the rows of several sequences whose caches lie in one buffer (a KV
// pool) are rotated and stored by one dispatch (each value computed as in ROWS 0: bit-identical).
struct P { T: u32, Hq: u32, HD: u32, rot: u32, pos0: u32, q_off: u32, q_stride: u32, k_off: u32,
           v_off: u32, kv_stride: u32, kv_dim: u32, table_pairs: u32, tab_off: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read> cs: array<vec2<f32>>;   // [pos][rot/2] (cos, sin)
@group(0) @binding(2) var<storage, read_write> kc: array<f32>;
@group(0) @binding(3) var<storage, read_write> vc: array<f32>;
#if ROWS
@group(0) @binding(4) var<storage, read> tab: array<vec4<u32>>;
@group(0) @binding(5) var<uniform> p: P;
#else
@group(0) @binding(4) var<uniform> p: P;
#endif

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let half = p.rot / 2u;
  let nq = p.Hq * half;
  if (g.y >= p.T) { return; }
#if ROWS
  let e4 = tab[p.tab_off + g.y];
  let t = e4.x;       // the token's row of src
  let pos = e4.y;     // its position
  let crow = e4.z;    // its cache row
#else
  let t = g.y;
  let pos = p.pos0 + t;
  let crow = pos;
#endif
  let c0 = pos * p.table_pairs;
  if (g.x < nq) {
    let i = g.x % half;
    let h = g.x / half;
    let c = cs[c0 + i];
    let base = p.q_off + t * p.q_stride + h * p.HD;
#if NEOX
    let i0 = base + i;
    let i1 = base + i + half;
#else
    let i0 = base + 2u * i;
    let i1 = i0 + 1u;
#endif
    let a = x[i0];
    let b = x[i1];
    x[i0] = a * c.x - b * c.y;
    x[i1] = a * c.y + b * c.x;
    return;
  }
  let e = g.x - nq;
  let dst = crow * p.kv_dim;
  if (e < p.kv_dim) {
    let j = e % p.HD;
    let base = p.k_off + t * p.kv_stride + e - j;  // this key head's first element
    if (j >= p.rot) {
      kc[dst + e] = x[base + j];
      return;
    }
#if NEOX
    let i = j % half;
    let first = j < half;
    let i0 = base + i;
    let i1 = base + i + half;
#else
    let i = j / 2u;
    let first = (j & 1u) == 0u;
    let i0 = base + 2u * i;
    let i1 = i0 + 1u;
#endif
    let c = cs[c0 + i];
    let a = x[i0];
    let b = x[i1];
    if (first) {
      kc[dst + e] = a * c.x - b * c.y;
    } else {
      kc[dst + e] = a * c.y + b * c.x;
    }
    return;
  }
  let v = e - p.kv_dim;
  if (v < p.kv_dim) { vc[dst + v] = x[p.v_off + t * p.kv_stride + v]; }
}
