// defines: NEOX
// rope: rotary position embedding (Su et al. 2021, RoFormer) applied in place to H heads of size
// HD for T tokens at positions pos0 .. pos0+T-1. cos/sin come from a table computed once on the
// CPU (kernels/rope_table.cpp), so the GPU and the CPU reference rotate by identical values.
// NEOX=0: pairs (2i, 2i+1) (GGUF llama layout, ggml ROPE_TYPE_NORM);
// NEOX=1: pairs (i, i + rot/2) (HF rotate_half layout, ggml ROPE_TYPE_NEOX).
struct P { T: u32, H: u32, HD: u32, rot: u32, pos0: u32, off: u32, stride: u32, table_pairs: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<storage, read> cs: array<vec2<f32>>;   // [pos][rot/2] (cos, sin)
@group(0) @binding(2) var<uniform> p: P;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3u) {
  let half = p.rot / 2u;
  let i = g.x % half;
  let h = g.x / half;
  let t = g.y;
  if (h >= p.H || t >= p.T) { return; }
  let c = cs[(p.pos0 + t) * p.table_pairs + i];
  let base = p.off + t * p.stride + h * p.HD;
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
}
