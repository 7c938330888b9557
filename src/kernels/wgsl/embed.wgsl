// defines: BE BE16 BE32
// embed: out[t, :] = dequant(table row tokens[t] - row0) (token embedding lookup), one thread per
// block, for the ids this table's rows [row0, row0 + N) hold; the other rows are left unwritten (a
// table split into row blocks is one dispatch per block: kernels::embed in ops.h).
struct P { K: u32, N: u32, T: u32, nb: u32, soff: u32, y_off: u32, row0: u32 }
@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> tokens: array<u32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: P;
const BE: u32 = {{BE}}u;

#include quant

fn put(i: u32, v: vec4<f32>) { y[i] = v.x; y[i + 1u] = v.y; y[i + 2u] = v.z; y[i + 3u] = v.w; }

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let b = g.x;
  let t = g.y;
  if (b >= p.nb || t >= p.T) { return; }
  let id = tokens[t];
  if (id < p.row0 || id - p.row0 >= p.N) { return; }  // another block's row (reads stay in bounds)
  let tok = id - p.row0;
  let v = load_block(tok * p.nb + b);
  let o = p.y_off + t * p.K + b * BE;
  put(o, v.v0);
#if BE16
  put(o + 4u, v.v1); put(o + 8u, v.v2); put(o + 12u, v.v3);
#endif
#if BE32
  put(o + 4u, v.v1); put(o + 8u, v.v2); put(o + 12u, v.v3);
  put(o + 16u, v.v4); put(o + 20u, v.v5); put(o + 24u, v.v6); put(o + 28u, v.v7);
#endif
}
