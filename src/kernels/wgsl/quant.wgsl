// Weight block decoding shared by matmul and embed. The weight buffer `w` (array<u32>) holds, for a
// matrix of N rows x K columns in blocks of BE elements (nb = K / BE blocks per row, block index
// bi = row * nb + block): packed quants first, then a scale region starting at word p.soff.
// Formats (GPU layouts made at upload by kernels/weights.cpp from the GGUF blocks):
//   FMT_F32    : w[row*K + k] = f32 bits (F32, F16, BF16 upcast exactly)
//   FMT_Q4_0   : 4 words of nibbles per block, f16 d packed 2 blocks/word; y = (q - 8) * d
//   FMT_Q4_1   : 4 words of nibbles, one word (f16 d | f16 m << 16) per block; y = q * d + m
//   FMT_Q4_AF32: 4 words of nibbles, 2 f32 words (s, b) per block; y = q * s + b (Q4_K sub-blocks)
//   FMT_Q8_0   : 8 words of int8 per block, f16 d packed 2 blocks/word; y = q * d
//   FMT_Q8_F32 : BE/4 words of int8 per block, 1 f32 word per block; y = q * s (Q6_K, BE = 16)
// Nibble order follows ggml Q4_0/Q4_1: byte j holds element j (low) and element j + 16 (high).

// Signed byte k of a word (sign-extended by an arithmetic shift).
fn i8_at(word: u32, k: u32) -> i32 { return bitcast<i32>(word << (24u - 8u * k)) >> 24u; }

fn dequant_block(bi: u32, o: ptr<function, array<f32, BE>>) {
#if FMT_F32
  for (var i = 0u; i < BE; i++) { (*o)[i] = bitcast<f32>(w[bi * BE + i]); }
#endif
#if FMT_Q4_0
  let d = unpack2x16float(w[p.soff + bi / 2u])[bi & 1u];
  for (var j = 0u; j < 4u; j++) {
    let q = w[bi * 4u + j];
    for (var k = 0u; k < 4u; k++) {
      let byte = (q >> (8u * k)) & 0xffu;
      (*o)[j * 4u + k] = (f32(byte & 0xfu) - 8.0) * d;
      (*o)[j * 4u + k + 16u] = (f32(byte >> 4u) - 8.0) * d;
    }
  }
#endif
#if FMT_Q4_1
  let dm = unpack2x16float(w[p.soff + bi]);
  for (var j = 0u; j < 4u; j++) {
    let q = w[bi * 4u + j];
    for (var k = 0u; k < 4u; k++) {
      let byte = (q >> (8u * k)) & 0xffu;
      (*o)[j * 4u + k] = f32(byte & 0xfu) * dm.x + dm.y;
      (*o)[j * 4u + k + 16u] = f32(byte >> 4u) * dm.x + dm.y;
    }
  }
#endif
#if FMT_Q4_AF32
  let s = bitcast<f32>(w[p.soff + 2u * bi]);
  let b = bitcast<f32>(w[p.soff + 2u * bi + 1u]);
  for (var j = 0u; j < 4u; j++) {
    let q = w[bi * 4u + j];
    for (var k = 0u; k < 4u; k++) {
      let byte = (q >> (8u * k)) & 0xffu;
      (*o)[j * 4u + k] = f32(byte & 0xfu) * s + b;
      (*o)[j * 4u + k + 16u] = f32(byte >> 4u) * s + b;
    }
  }
#endif
#if FMT_Q8_0
  let d = unpack2x16float(w[p.soff + bi / 2u])[bi & 1u];
  for (var j = 0u; j < 8u; j++) {
    let q = w[bi * 8u + j];
    for (var k = 0u; k < 4u; k++) { (*o)[j * 4u + k] = f32(i8_at(q, k)) * d; }
  }
#endif
#if FMT_Q8_F32
  let s = bitcast<f32>(w[p.soff + bi]);
  for (var j = 0u; j < BE / 4u; j++) {
    let q = w[bi * (BE / 4u) + j];
    for (var k = 0u; k < 4u; k++) { (*o)[j * 4u + k] = f32(i8_at(q, k)) * s; }
  }
#endif
}
