// defines: none
// copy_vec4: bandwidth probe. dst[i] = src[i] for i < n (vec4f elements), grid-stride loop with
// 256 threads per workgroup; moves 32 bytes per element (16 read + 16 written).
struct P { n: u32, stride: u32 }
@group(0) @binding(0) var<storage, read> src: array<vec4f>;
@group(0) @binding(1) var<storage, read_write> dst: array<vec4f>;
@group(0) @binding(2) var<uniform> p: P;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) g: vec3u) {
  for (var i = g.x; i < p.n; i += p.stride) {
    dst[i] = src[i];
  }
}
