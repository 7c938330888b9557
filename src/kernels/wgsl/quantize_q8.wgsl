// defines: none
// quantize_q8: f32 activations -> int8 blocks of 32 with one f32 scale, the input of the int8
// prefill matmul (matmul_tiled_i8.wgsl; dispatch and CPU twin: kernels/matmul_int8.{h,cpp}).
// ggml's Q8_1 (quantize_row_q8_1_ref, ggml-quants.c): per block of 32 consecutive elements of a
// row, d = max|x| / 127, id = d != 0 ? 1 / d : 0, q[j] = round(x[j] * id) (WGSL round: ties to
// even, as ggml's AVX2 path _mm256_round_ps(_MM_ROUND_NEAREST); ggml's scalar reference uses roundf),
// s = d * sum_j q[j] (ggml keeps s for the weight formats with a min: Q4_1 . Q8_1 =
// d_w d_x sum q_w q_x + m_w s_x). Unlike Q8_1's f16 d and s, both stay f32 here.
// Output, one array<u32> `o` (one storage binding; the matmul binds its two regions apart):
//   words [0, T * nb * 8):           block b of row t: 8 words at (b * T + t) * 8 (block-major: a
//                                    K-step of the matmul reads its tokens' blocks contiguously),
//                                    each 4 int8 lanes, element 4 j + l in byte l of word j (pack4xI8)
//   words [p.soff + 2 (b * T + t)]:  f32 bits of d, then of s
// One thread per (block, row), rows fastest; grid: x * 256 + y * (gx * 256) threads (2D above 65535 workgroups).
// Requires x offset and row stride multiples of 4 (vec4 loads) and K a multiple of 32.
struct P { T: u32, nb: u32, x_off: u32, x_stride: u32, soff: u32, gx: u32 }
@group(0) @binding(0) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(1) var<storage, read_write> o: array<u32>;
@group(0) @binding(2) var<uniform> p: P;

fn q4(v: vec4<f32>, id: f32) -> u32 {
  return pack4xI8(vec4<i32>(round(v * id)));
}
fn isum(v: vec4<f32>, id: f32) -> i32 {
  let r = vec4<i32>(round(v * id));
  return r.x + r.y + r.z + r.w;
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3u) {
  let i = (wid.y * p.gx + wid.x) * 256u + lid;
  if (i >= p.T * p.nb) { return; }
  let b = i / p.T;
  let t = i % p.T;
  let base = (p.x_off + t * p.x_stride + b * 32u) / 4u;
  let v0 = x[base]; let v1 = x[base + 1u]; let v2 = x[base + 2u]; let v3 = x[base + 3u];
  let v4 = x[base + 4u]; let v5 = x[base + 5u]; let v6 = x[base + 6u]; let v7 = x[base + 7u];
  let m = max(max(max(abs(v0), abs(v1)), max(abs(v2), abs(v3))), max(max(abs(v4), abs(v5)), max(abs(v6), abs(v7))));
  let d = max(max(m.x, m.y), max(m.z, m.w)) / 127.0;
  let id = select(0.0, 1.0 / d, d > 0.0);
  let ob = i * 8u;
  o[ob] = q4(v0, id); o[ob + 1u] = q4(v1, id); o[ob + 2u] = q4(v2, id); o[ob + 3u] = q4(v3, id);
  o[ob + 4u] = q4(v4, id); o[ob + 5u] = q4(v5, id); o[ob + 6u] = q4(v6, id); o[ob + 7u] = q4(v7, id);
  let s = isum(v0, id) + isum(v1, id) + isum(v2, id) + isum(v3, id) + isum(v4, id) + isum(v5, id) + isum(v6, id) +
          isum(v7, id);
  o[p.soff + 2u * i] = bitcast<u32>(d);
  o[p.soff + 2u * i + 1u] = bitcast<u32>(d * f32(s));
}
