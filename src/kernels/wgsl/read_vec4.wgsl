// defines: none
// read_vec4: bandwidth probe. Thread t sums src[t], src[t + stride], ... (vec4f elements, i < n)
// and writes the sum of its four lanes to out[t]; reads 16 bytes per element, writes 4 per thread.
struct P { n: u32, stride: u32 }
@group(0) @binding(0) var<storage, read> src: array<vec4f>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<uniform> p: P;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3u) {
  var acc = vec4f(0.0);
  for (var i = g.x; i < p.n; i += p.stride) {
    acc += src[i];
  }
  if (g.x < p.stride) {
    out[g.x] = acc.x + acc.y + acc.z + acc.w;
  }
}
