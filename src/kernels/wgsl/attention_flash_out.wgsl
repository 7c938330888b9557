// defines: SPLIT WINDOW
// attention_flash_out: what the flash kernels (attention_flash.wgsl, attention_flash_sg.wgsl) share: a
// block's key range and the outputs; included, never compiled alone. Uses the including kernel's P (Hq,
// HD, n_split, o_off, o_stride, split_len, window) and output binding o. Row i of KV head hk is token
// i / G, query head hk * G + i % G; SPLIT: the unnormalised partial (m, l, acc[HD]) of split z at
// ((t * Hq + h) * n_split + z) * (HD + 2) for attention_combine.wgsl.

// The keys [x, y) a block reads: up to n_keys (the keys visible to its last row), from 0 or, with WINDOW,
// from the window start of its first row (at position first_pos; later rows mask the keys below their
// own window); with SPLIT, split z's share of that range, split_len keys from its first key.
fn key_range(n_keys: u32, first_pos: u32, z: u32) -> vec2<u32> {
  var k_lo = 0u;
#if WINDOW
  if (p.window != 0u && first_pos + 1u > p.window) { k_lo = first_pos + 1u - p.window; }
#endif
#if SPLIT
  let b = min(k_lo + z * p.split_len, n_keys);
  return vec2<u32>(b, min(b + p.split_len, n_keys));
#else
  return vec2<u32>(k_lo, n_keys);
#endif
}

// Row i's statistics (SPLIT: m and l of split z at the head of its partial; else nothing).
fn store_stats(i: u32, hk: u32, G: u32, z: u32, m: f32, l: f32) {
#if SPLIT
  let pb = (((i / G) * p.Hq + hk * G + i % G) * p.n_split + z) * (p.HD + 2u);
  o[pb] = m;
  o[pb + 1u] = l;
#endif
}

// Output vec4 col of row i: the unnormalised partial of split z (SPLIT), else acc / l.
fn store_out(i: u32, hk: u32, G: u32, z: u32, col: u32, acc: vec4<f32>, l: f32) {
  let t = i / G;
  let h = hk * G + i % G;
#if SPLIT
  let b = ((t * p.Hq + h) * p.n_split + z) * (p.HD + 2u) + 2u + 4u * col;
  let v = acc;
#else
  let b = p.o_off + t * p.o_stride + h * p.HD + 4u * col;
  let v = acc / l;
#endif
  o[b] = v.x;
  o[b + 1u] = v.y;
  o[b + 2u] = v.z;
  o[b + 3u] = v.w;
}
