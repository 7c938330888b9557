// defines: ROWS LANES REDUCE TT ADD BE BE16 BE32 NORM ROPE
// matmul: y[t, n] (+)= sum_k W[n, k] * x[t, k] for a quantized/float weight W (N x K) and f32
// activations x (T x K). Variants (each its own define, see kernels/matmul.cpp):
//   ROWS  rows per workgroup, LANES threads per row (LANES a power of two; lanes stride over
//         blocks and are reduced in a fixed tree order, so results are run-to-run deterministic)
//   REDUCE  LANES > 1: the cross-lane reduction (LANES = 1 needs no barrier: one thread per row,
//         the fast choice on CPU-emulated GPUs where barriers are expensive)
//   TT    tokens per workgroup: each dequantized weight block is reused for TT tokens (prefill)
//   VEC4  read activations as vec4<f32>
//   ADD   accumulate into y (fused residual add) instead of overwriting
//   NORM  RMSNorm prologue (decode fusion, --fuse-norm): the activations are x[t, k] * inv[t] * nw[k]
//         with inv[t] = 1 / sqrt(sum_k x[t, k]^2 / K + eps) computed by every workgroup itself with
//         rms_sum.wgsl (the function rmsnorm.wgsl uses; with REDUCE = 0 its barrier-free serial
//         form, one thread per token, same additions) and applied in rmsnorm.wgsl's operation
//         order: bit-identical to rmsnorm followed by this matmul. Binding 3: nw (K floats).
//   SILU  SwiGLU activation load (decode fusion, --fuse-silu): the activations are
//         silu(x[t, k]) * x[t, u_off + k] with silu(a) = a / (1 + exp(-a)), the expression of
//         silu_mul.wgsl: bit-identical to silu_mul followed by this matmul.
//   ROPE  RoPE + KV-cache store epilogue of the fused QKV projection (decode fusion,
//         --fuse-qkv-rope-kv): rows [0, q_rows) are query heads and [q_rows, q_rows + kv_rows) key
//         heads of HD, rotated (first rot dims) with the pair layout NEOX (0: (2i, 2i+1); 1:
//         (i, i + rot/2)) by the table cs at position pos0 + t, as rope.wgsl does; the key rows
//         are also stored to the key cache kc and the value rows (the rest) to vc, as kv_store.wgsl:
//         bit-identical to matmul, rope, rope, kv_store. Workgroup row r handles "virtual" row
//         wid.x * ROWS + r, permuted so that the two rows of a rotated pair are virtual rows 2p and
//         2p + 1 of their head (ROWS must be even): each thread reads its partner's sum from
//         workgroup memory. Needs ADD = 0. Bindings B_NW, B_CS, B_KC, B_VC, B_P are numbered by
//         the caller (NORM adds one before them).
#include matmul_io

const BE: u32 = {{BE}}u;
const ROWS: u32 = {{ROWS}}u;
const LANES: u32 = {{LANES}}u;
const TT: u32 = {{TT}}u;
// Per-thread partial sums live in workgroup memory (slot (r * TT + tt) * LANES + lane, written by
// one thread only) so no private array is indexed dynamically.
var<workgroup> red: array<f32, ROWS * LANES * TT>;

#include quant

#if NORM
var<workgroup> inv_rms: array<f32, TT>;
#endif

// Activations k .. k+3 of the token (slot tt of this workgroup) whose row starts at element xb.
fn xs(xb: u32, k: u32, tt: u32) -> vec4<f32> {
#if NORM
  return act4(xb, k, inv_rms[tt]);
#else
  return act4(xb, k, 1.0);
#endif
}

fn block_dot(b: Blk, xb: u32, k: u32, tt: u32) -> f32 {
  var s = dot(b.v0, xs(xb, k, tt));
#if BE16
  s += dot(b.v1, xs(xb, k + 4u, tt)) + dot(b.v2, xs(xb, k + 8u, tt)) + dot(b.v3, xs(xb, k + 12u, tt));
#endif
#if BE32
  s += dot(b.v1, xs(xb, k + 4u, tt)) + dot(b.v2, xs(xb, k + 8u, tt)) + dot(b.v3, xs(xb, k + 12u, tt));
  s += dot(b.v4, xs(xb, k + 16u, tt)) + dot(b.v5, xs(xb, k + 20u, tt)) + dot(b.v6, xs(xb, k + 24u, tt)) + dot(b.v7, xs(xb, k + 28u, tt));
#endif
  return s;
}


@compute @workgroup_size(ROWS * LANES)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let lane = lid.x % LANES;
  let r = lid.x / LANES;
  let vrow = wid.x * ROWS + r;
  let n = row_of(vrow);
  let t0 = wid.y * TT;
  let slot = r * TT * LANES + lane;
  for (var tt = 0u; tt < TT; tt++) { red[slot + tt * LANES] = 0.0; }
#if NORM
#if REDUCE
  for (var tt = 0u; tt < TT; tt++) {
    if (t0 + tt < p.T) {  // uniform: workgroup id and uniform buffer only
      let ss = rms_sum_squares(lid.x, ROWS * LANES, p.x_off + (t0 + tt) * p.x_stride, p.K);
      if (lid.x == 0u) { inv_rms[tt] = 1.0 / sqrt(ss / f32(p.K) + p.eps); }
    }
  }
#else
  // LANES = 1 avoids barriers: one thread sums each token's squares (same order, no tree barriers).
  for (var tt = lid.x; tt < TT; tt += ROWS * LANES) {
    if (t0 + tt < p.T) {
      let ss = rms_sum_squares_serial(p.x_off + (t0 + tt) * p.x_stride, p.K);
      inv_rms[tt] = 1.0 / sqrt(ss / f32(p.K) + p.eps);
    }
  }
#endif
  workgroupBarrier();
#endif
  if (n < p.N) {
    for (var b = lane; b < p.nb; b += LANES) {
      let blk = load_block(n * p.nb + b);
      for (var tt = 0u; tt < TT; tt++) {
        let t = t0 + tt;
        if (t < p.T) { red[slot + tt * LANES] += block_dot(blk, p.x_off + t * p.x_stride, b * BE, tt); }
      }
    }
  }
#if REDUCE
  workgroupBarrier();
  for (var off = LANES / 2u; off > 0u; off >>= 1u) {
    if (lane < off) {
      for (var tt = 0u; tt < TT; tt++) {
        let i = slot + tt * LANES;
        red[i] += red[i + off];
      }
    }
    workgroupBarrier();
  }
#endif
#if ROPE
  workgroupBarrier();  // the partner row's sum (LANES = 1 has no tree barrier above)
  if (lane == 0u && n < p.N) {
    for (var tt = 0u; tt < TT; tt++) {
      let t = t0 + tt;
      if (t < p.T) { rope_store(vrow, n, t, red[slot + tt * LANES], red[(r ^ 1u) * TT * LANES + tt * LANES]); }
    }
  }
#else
  if (lane == 0u && n < p.N) {
    for (var tt = 0u; tt < TT; tt++) {
      let t = t0 + tt;
      if (t < p.T) {
        let yi = p.y_off + t * p.y_stride + n;
#if ADD
        y[yi] = y[yi] + red[slot + tt * LANES];
#else
        y[yi] = red[slot + tt * LANES];
#endif
      }
    }
  }
#endif
}
