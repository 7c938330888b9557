// embed: out[t, :] = dequant(table row tokens[t]) (token embedding lookup), one thread per block.
struct P { K: u32, N: u32, T: u32, nb: u32, soff: u32, y_off: u32 }
@group(0) @binding(0) var<storage, read> w: array<u32>;
@group(0) @binding(1) var<storage, read> tokens: array<u32>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<uniform> p: P;
const BE: u32 = {{BE}}u;

#include quant

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let b = g.x;
  let t = g.y;
  if (b >= p.nb || t >= p.T) { return; }
  let tok = min(tokens[t], p.N - 1u);  // ids are validated on the CPU; clamp keeps reads in bounds
  var v: array<f32, BE>;
  dequant_block(tok * p.nb + b, &v);
  for (var i = 0u; i < BE; i++) { y[p.y_off + t * p.K + b * BE + i] = v[i]; }
}
