// defines: none
// sparse_means: mean-pooled block keys for block-sparse attention (kernels/sparse_attention.h).
// For blocks b0 <= b < n_blocks of B key-cache rows and key-cache columns c < kv_dim (all KV heads):
//   kbar[b, c] = (sum_{r = 0..B-1} kc[(b * B + r) * kv_dim + c]) / B
// (MoBA, Lu et al. 2025, eq. 4: s_i = <q, mean_pool(K[I_i])>; InfLLM-v2 / MiniCPM4 2025 score blocks
// the same way). The sum runs r ascending in one invocation (the CPU twin ref::sparse_block_means
// keeps the order), so a block's mean has the same bits whichever range it is computed in (b0 > 0:
// the blocks completed since a SparseMeansCache was last valid). One invocation per (column,
// block), looping when there are more than 65535 blocks.
struct P { n_blocks: u32, B: u32, kv_dim: u32, grid_y: u32, b0: u32, pad0: u32, pad1: u32, pad2: u32 }
@group(0) @binding(0) var<storage, read> kc: array<f32>;
@group(0) @binding(1) var<storage, read_write> means: array<f32>;
@group(0) @binding(2) var<uniform> p: P;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3u) {
  let c = gid.x;
  if (c >= p.kv_dim) { return; }
  for (var b = p.b0 + gid.y; b < p.n_blocks; b += p.grid_y) {  // grid_y <= 65535 rows of workgroups
    var s = 0.0;
    for (var r = 0u; r < p.B; r++) { s += kc[(b * p.B + r) * p.kv_dim + c]; }
    means[b * p.kv_dim + c] = s / f32(p.B);
  }
}
