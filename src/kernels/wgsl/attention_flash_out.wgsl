// defines: SPLIT
// attention_flash_out: the flash kernels' outputs (attention_flash.wgsl, attention_flash_sg.wgsl); included,
// never compiled alone. Uses the including kernel's P (Hq, HD, n_split, o_off, o_stride) and output
// binding o. Row i of KV head hk is token i / G, query head hk * G + i % G; SPLIT: the unnormalised partial
// (m, l, acc[HD]) of split z at ((t * Hq + h) * n_split + z) * (HD + 2) for attention_combine.wgsl.
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
