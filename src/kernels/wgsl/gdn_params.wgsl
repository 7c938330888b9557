// defines: none
// gdn_params: parameters shared by the Gated DeltaNet kernels (gdn_step, gdn_chunk_prep,
// gdn_chunk_scan); included, never compiled alone. Offsets/strides in f32 elements.
//   q/k of token t, key head hk = key_head(h): qkv[q_off|k_off + t*qkv_stride + hk*DK + i] (L2-normalised; q is
//   scaled by `scale` here); v of value head h: qkv[v_off + t*qkv_stride + h*DV + j];
//   g/beta: gates[g_off + t*gb_stride + h] / gates[g_off + t*gb_stride + NV + h];
//   state S of head h: st[s_off + (h*DK + i)*DV + j]; output: out[o_off + t*o_stride + h*DV + j];
//   chunk work buffer (per chunk c and head h): A, P at a_off/p_off + (c*NV + h)*C*C + t*C + s,
//   G at gc_off + (c*NV + h)*C + t, W at w_off + (t_abs*NV + h)*DK + i, U at u_off + (t_abs*NV + h)*DV + j.
//   gdn_step NORM=1 only: gated RMSNorm epsilon norm_eps, z gate of head h at z[z_off + h*DV + j].
struct P { T: u32, NK: u32, NV: u32, DK: u32, DV: u32, C: u32, q_off: u32, k_off: u32, v_off: u32,
           qkv_stride: u32, g_off: u32, gb_stride: u32, s_off: u32, o_off: u32, o_stride: u32,
           a_off: u32, p_off: u32, gc_off: u32, w_off: u32, u_off: u32, scale: f32, TILED: u32,
           norm_eps: f32, z_off: u32 }
// Key head of value head h: h / (NV / NK) (transformers' repeat_interleave order), or h % NK when
// TILED != 0 (the "tiled" value-head order llama.cpp's converter writes into qwen35 GGUF files).
fn key_head(h: u32) -> u32 { return select(h / (p.NV / p.NK), h % p.NK, p.TILED != 0u); }
