// defines: none
// kv_store: copies the new tokens' keys and values ([T, kv_dim] rows at k_off/v_off with the given
// stride) into the layer's KV cache at positions pos0 .. pos0+T-1 (cache rows of kv_dim floats).
struct P { T: u32, kv_dim: u32, pos0: u32, k_off: u32, v_off: u32, stride: u32 }
@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> kc: array<f32>;
@group(0) @binding(2) var<storage, read_write> vc: array<f32>;
@group(0) @binding(3) var<uniform> p: P;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let i = g.x;
  let t = g.y;
  if (i >= p.kv_dim || t >= p.T) { return; }
  let dst = (p.pos0 + t) * p.kv_dim + i;
  kc[dst] = src[p.k_off + t * p.stride + i];
  vc[dst] = src[p.v_off + t * p.stride + i];
}
