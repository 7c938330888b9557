// defines: none
// dispatch_probe: the smallest useful kernel, for measuring what one dispatch costs (see
// kernels/dispatch_probe.h). Thread i updates x[i] = x[i] * 0.5 + 1 for i < n (both operations
// exact in f32 for the values reached, so the CPU can check the result bit for bit).
struct P { n: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@group(0) @binding(1) var<uniform> p: P;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3u) {
  if (g.x < p.n) {
    x[g.x] = x[g.x] * 0.5 + 1.0;
  }
}
