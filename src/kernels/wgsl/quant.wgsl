// defines: FMT_F32|FMT_Q4_0|FMT_Q4_1|FMT_Q4_K|FMT_Q8_0|FMT_Q8_F32|FMT_Q6_K BE32 MAGIC
// Weight block decoding shared by matmul and embed. The weight buffer `w` (array<u32>) holds, for a
// matrix of N rows x K columns in blocks of BE elements (nb = K / BE blocks per row, block index
// bi = row * nb + block): packed quants first, then a scale region starting at word p.soff.
// Formats (GPU layouts made at upload by kernels/weights.cpp from the GGUF blocks):
//   FMT_F32    : w[row*K + k] = f32 bits (F32, F16, BF16 upcast exactly); BE = 32 or 4
//   FMT_Q4_0   : 4 words of nibbles per block, f16 d packed 2 blocks/word; y = (q - 8) * d
//   FMT_Q4_1   : 4 words of nibbles, one word (f16 d | f16 m << 16) per block; y = q * d + m
//   FMT_Q4_K   : 4 words of nibbles per 32-element sub-block; per 256-element super-block 4 scale
//                words as stored in the GGUF block (f16 d | f16 dmin << 16, then 12 bytes of 6-bit
//                sub-block scales and mins); y = q * (d * sc) - dmin * m (ggml dequantize_row_q4_K;
//                4.5 bits per weight, as in the file)
//   FMT_Q8_0   : 8 words of int8 per block, f16 d packed 2 blocks/word; y = q * d
//   FMT_Q8_F32 : BE/4 words of int8 per block, 1 f32 word per block; y = q * s (Q6_K widened,
//                BE = 16, 10 bits per weight; ModelOptions::q6k_packed off)
//   FMT_Q6_K   : Q6_K at its own 6.5625 bits per weight (BE = 16, ModelOptions::q6k_packed): per
//                16-element block 3 words: w0 / w1 the low 4 bits (w0: elements 0..3 low nibbles,
//                8..11 high; w1: 4..7 low, 12..15 high), w2 the high 2 bits (byte b, bits 2g..2g+1:
//                element 4g + b); per 256-element super-block 5 scale words: the 16 int8 sub-block
//                scales sc as stored, then f16 d. y = (q - 32) * (d * sc) (ggml dequantize_row_q6_K):
//                the same integers q - 32 and the same f32 scales as FMT_Q8_F32, so every kernel
//                gives the same bits with either layout (q6_words / q6k_scale below).
// Nibble order follows ggml Q4_0/Q4_1: byte j holds element j (low) and element j + 16 (high).
// A block is returned as named vec4 members (v0 = elements 0..3, ...), not an array: dynamically
// indexed private arrays spill to scratch memory on some compilers (SwiftShader: ~100x slower).

struct Blk { v0: vec4<f32>, v1: vec4<f32>, v2: vec4<f32>, v3: vec4<f32>,
             v4: vec4<f32>, v5: vec4<f32>, v6: vec4<f32>, v7: vec4<f32> }

// Integer quants to f32 (KernelOptions::dequant_magic, --dequant-magic). MAGIC 1: the integer is
// OR-ed into the mantissa of 2^23 (bits 0x4B000000) and 2^23 subtracted: for 0 <= u < 2^23 the
// float with bits 0x4B000000 | u is exactly 2^23 + u and the subtraction is exact, so the values
// are bit-identical to the int -> float conversions of MAGIC 0, which NVIDIA GPUs run at a quarter
// of the FP32 rate (the decode matrix-vector kernel is bound by this dequantization arithmetic,
// not by memory, on an H200). Signed bytes: b ^ 0x80 = b + 128 in 0..255, minus 2^23 + 128.
const Q_MAGIC_BITS: vec4<u32> = vec4<u32>(0x4B000000u);
const Q_MAGIC_F: vec4<f32> = vec4<f32>(8388608.0);
fn lo4(word: u32) -> vec4<f32> {
#if MAGIC
  let u = (vec4<u32>(word, word >> 8u, word >> 16u, word >> 24u) & vec4<u32>(0xfu)) | Q_MAGIC_BITS;
  return bitcast<vec4<f32>>(u) - Q_MAGIC_F;
#else
  return vec4<f32>(f32(word & 0xfu), f32((word >> 8u) & 0xfu), f32((word >> 16u) & 0xfu), f32((word >> 24u) & 0xfu));
#endif
}
fn hi4(word: u32) -> vec4<f32> {
#if MAGIC
  let u = (vec4<u32>(word >> 4u, word >> 12u, word >> 20u, word >> 28u) & vec4<u32>(0xfu)) | Q_MAGIC_BITS;
  return bitcast<vec4<f32>>(u) - Q_MAGIC_F;
#else
  return vec4<f32>(f32((word >> 4u) & 0xfu), f32((word >> 12u) & 0xfu), f32((word >> 20u) & 0xfu), f32(word >> 28u));
#endif
}
// The four signed bytes of a word (sign-extended by arithmetic shifts).
fn i8x4(word: u32) -> vec4<f32> {
#if MAGIC
  let b = word ^ 0x80808080u;
  let u = (vec4<u32>(b, b >> 8u, b >> 16u, b >> 24u) & vec4<u32>(0xffu)) | Q_MAGIC_BITS;
  return bitcast<vec4<f32>>(u) - vec4<f32>(8388736.0);
#else
  let s = bitcast<i32>(word);
  return vec4<f32>(f32((s << 24u) >> 24u), f32((s << 16u) >> 24u), f32((s << 8u) >> 24u), f32(s >> 24u));
#endif
}
// Q4_K sub-block j (0..7) of a super-block whose 4 header words are h: (scale, offset) =
// (d * sc, -(dmin * m)) with ggml's get_scale_min_k4 6-bit unpacking of the 12 bytes h.y..h.w
// (bytes q[0..11]: j < 4: sc = q[j] & 63, m = q[j + 4] & 63; else sc = (q[j + 4] & 15) |
// (q[j - 4] >> 6) << 4, m = (q[j + 4] >> 4) | (q[j] >> 6) << 4). f32 products as ggml's.
fn q4k_scale_min(h: vec4<u32>, j: u32) -> vec2<f32> {
  let dm = unpack2x16float(h.x);
  let sh = 8u * (j & 3u);
  let by = (h.y >> sh) & 0xffu;
  let bz = (h.z >> sh) & 0xffu;
  let bw = (h.w >> sh) & 0xffu;
  var sc = by & 63u;
  var m = bz & 63u;
  if (j >= 4u) {
    sc = (bw & 0xfu) | ((by >> 6u) << 4u);
    m = (bw >> 4u) | ((bz >> 6u) << 4u);
  }
  return vec2<f32>(dm.x * f32(sc), -(dm.y * f32(m)));
}
#if FMT_Q6_K
// The 4 words of signed bytes q - 32 (elements 0..3, 4..7, 8..11, 12..15) of FMT_Q6_K block bi:
// the 6-bit q = low nibble | high 2 bits << 4 in 0..63, then q - 32 as a two's-complement byte by
// bit operations within each byte (x = q ^ 32 has bit 5 set exactly when q < 32, which then sets
// bits 6 and 7: x | 192 = q + 224 = q - 32 mod 256).
fn q6_signed(q: u32) -> u32 {
  let x = q ^ 0x20202020u;
  let m = x & 0x20202020u;
  return x | (m << 1u) | (m << 2u);
}
// Half h (0: elements 0..7, 1: 8..15) of a block: groups 2h (w0's nibbles) and 2h + 1 (w1's), their
// high bits at bits 4h and 4h + 2 of each byte of w2.
fn q6_half(w0: u32, w1: u32, w2: u32, h: u32) -> vec2<u32> {
  let m = 0x0f0f0f0fu;
  let hm = 0x03030303u;
  let sh = 4u * h;
  return vec2<u32>(q6_signed(((w0 >> sh) & m) | (((w2 >> sh) & hm) << 4u)),
                   q6_signed(((w1 >> sh) & m) | (((w2 >> (sh + 2u)) & hm) << 4u)));
}
fn q6_words_of(w0: u32, w1: u32, w2: u32) -> vec4<u32> {
  return vec4<u32>(q6_half(w0, w1, w2, 0u), q6_half(w0, w1, w2, 1u));
}
// Loads only (no arithmetic, so fetch-ahead kernels can issue them early): block bi's 3 quant words,
// and its super-block's (scale word holding bi's sc, d word).
fn q6_raw(bi: u32) -> vec3<u32> { return vec3<u32>(w[3u * bi], w[3u * bi + 1u], w[3u * bi + 2u]); }
fn q6k_scale_raw(bi: u32) -> vec2<u32> {
  let s0 = p.soff + 5u * (bi >> 4u);
  return vec2<u32>(w[s0 + ((bi & 15u) >> 2u)], w[s0 + 4u]);
}
fn q6_words(bi: u32) -> vec4<u32> {
  let r = q6_raw(bi);
  return q6_words_of(r.x, r.y, r.z);
}
// The f16 in the low half of h as f32, exact for subnormals too: Q6_K's d is often below the
// smallest normal f16 (6.1e-5), and a driver may flush f16 subnormals in unpack2x16float; the
// widened layout's scales are formed on the host, exactly (core/half.h).
fn f16_exact(h: u32) -> f32 {
  let m = f32(h & 0x3ffu) * 5.9604644775390625e-8;  // a subnormal: mantissa x 2^-24
  return select(unpack2x16float(h & 0xffffu).x, select(m, -m, (h & 0x8000u) != 0u), (h & 0x7c00u) == 0u);
}
// Sub-block scale d * sc of block bi from its super-block's scale word (sc byte) and d word.
fn q6k_scale_of(scw: u32, dw: u32, bi: u32) -> f32 {
  let sc = bitcast<i32>(scw << (24u - 8u * (bi & 3u))) >> 24u;
  return f16_exact(dw) * f32(sc);
}
fn q6k_scale(bi: u32) -> f32 {
  let s = q6k_scale_raw(bi);
  return q6k_scale_of(s.x, s.y, bi);
}
#endif
fn wf4(i: u32) -> vec4<f32> {
  return vec4<f32>(bitcast<f32>(w[i]), bitcast<f32>(w[i + 1u]), bitcast<f32>(w[i + 2u]), bitcast<f32>(w[i + 3u]));
}

fn load_block(bi: u32) -> Blk {
  var b: Blk;
#if FMT_F32
  let base = bi * BE;
  b.v0 = wf4(base);
#if BE32
  b.v1 = wf4(base + 4u); b.v2 = wf4(base + 8u); b.v3 = wf4(base + 12u);
  b.v4 = wf4(base + 16u); b.v5 = wf4(base + 20u); b.v6 = wf4(base + 24u); b.v7 = wf4(base + 28u);
#endif
#endif
#if FMT_Q4_0
  let d = unpack2x16float(w[p.soff + bi / 2u])[bi & 1u];
  let q0 = w[bi * 4u]; let q1 = w[bi * 4u + 1u]; let q2 = w[bi * 4u + 2u]; let q3 = w[bi * 4u + 3u];
  b.v0 = (lo4(q0) - 8.0) * d; b.v1 = (lo4(q1) - 8.0) * d; b.v2 = (lo4(q2) - 8.0) * d; b.v3 = (lo4(q3) - 8.0) * d;
  b.v4 = (hi4(q0) - 8.0) * d; b.v5 = (hi4(q1) - 8.0) * d; b.v6 = (hi4(q2) - 8.0) * d; b.v7 = (hi4(q3) - 8.0) * d;
#endif
#if FMT_Q4_1
  let dm = unpack2x16float(w[p.soff + bi]);
  let q0 = w[bi * 4u]; let q1 = w[bi * 4u + 1u]; let q2 = w[bi * 4u + 2u]; let q3 = w[bi * 4u + 3u];
  b.v0 = lo4(q0) * dm.x + dm.y; b.v1 = lo4(q1) * dm.x + dm.y; b.v2 = lo4(q2) * dm.x + dm.y; b.v3 = lo4(q3) * dm.x + dm.y;
  b.v4 = hi4(q0) * dm.x + dm.y; b.v5 = hi4(q1) * dm.x + dm.y; b.v6 = hi4(q2) * dm.x + dm.y; b.v7 = hi4(q3) * dm.x + dm.y;
#endif
#if FMT_Q4_K
  let h = vec4<u32>(w[p.soff + (bi >> 3u) * 4u], w[p.soff + (bi >> 3u) * 4u + 1u], w[p.soff + (bi >> 3u) * 4u + 2u],
                    w[p.soff + (bi >> 3u) * 4u + 3u]);
  let so = q4k_scale_min(h, bi & 7u);
  let s = so.x;
  let o = so.y;
  let q0 = w[bi * 4u]; let q1 = w[bi * 4u + 1u]; let q2 = w[bi * 4u + 2u]; let q3 = w[bi * 4u + 3u];
  b.v0 = lo4(q0) * s + o; b.v1 = lo4(q1) * s + o; b.v2 = lo4(q2) * s + o; b.v3 = lo4(q3) * s + o;
  b.v4 = hi4(q0) * s + o; b.v5 = hi4(q1) * s + o; b.v6 = hi4(q2) * s + o; b.v7 = hi4(q3) * s + o;
#endif
#if FMT_Q8_0
  let d = unpack2x16float(w[p.soff + bi / 2u])[bi & 1u];
  let base = bi * 8u;
  b.v0 = i8x4(w[base]) * d; b.v1 = i8x4(w[base + 1u]) * d; b.v2 = i8x4(w[base + 2u]) * d; b.v3 = i8x4(w[base + 3u]) * d;
  b.v4 = i8x4(w[base + 4u]) * d; b.v5 = i8x4(w[base + 5u]) * d; b.v6 = i8x4(w[base + 6u]) * d; b.v7 = i8x4(w[base + 7u]) * d;
#endif
#if FMT_Q8_F32
  let s = bitcast<f32>(w[p.soff + bi]);
  let base = bi * 4u;
  b.v0 = i8x4(w[base]) * s; b.v1 = i8x4(w[base + 1u]) * s; b.v2 = i8x4(w[base + 2u]) * s; b.v3 = i8x4(w[base + 3u]) * s;
#endif
#if FMT_Q6_K
  let s = q6k_scale(bi);
  let q = q6_words(bi);
  b.v0 = i8x4(q.x) * s; b.v1 = i8x4(q.y) * s; b.v2 = i8x4(q.z) * s; b.v3 = i8x4(q.w) * s;
#endif
  return b;
}
