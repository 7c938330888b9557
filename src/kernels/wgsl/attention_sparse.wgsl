// defines: MASKED
// attention_sparse: gathered block-sparse attention (kernels/sparse_attention.h). Causal GQA
// attention of T query tokens at positions pos0 + t over only the key blocks listed for their query
// block in `index` (sparse_select.wgsl: rows of S ascending block ids, 0xFFFFFFFF after the last):
// query token t (position pos = pos0 + t, query block qb = pos / B) of head h (KV head
// hk = h / (Hq / Hkv)) attends to key j iff block j / B is in row ((qb - qb0) * Hkv + hk) and
// j <= pos. One workgroup per (query head, token), as attention.wgsl: the selected keys are taken
// as one virtual sequence, slot s's block giving virtual keys s * B .. s * B + B - 1, processed in
// tiles of BK with the same online softmax (Milakov & Gimelshein 2018); only the selected K and V
// rows are read. The loop covers all S * B virtual keys (a uniform bound; empty slots and the
// own block's future keys are masked and add exact zeros).
// MASKED (the test reference, "masked dense"): the same kernel over keys 0..pos in cache order,
// keys of unselected blocks masked: the full history is read. With every block 0..qb selected the
// two variants visit the same keys in the same tiles and give identical bits.
struct P { T: u32, pos0: u32, Hq: u32, Hkv: u32, HD: u32, q_off: u32, q_stride: u32, o_off: u32,
           o_stride: u32, kv_dim: u32, scale: f32, B: u32, S: u32, qb0: u32, pad0: u32, pad1: u32 }
@group(0) @binding(0) var<storage, read> q: array<f32>;
@group(0) @binding(1) var<storage, read> kc: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> vc: array<f32>;
@group(0) @binding(3) var<storage, read> index: array<u32>;
@group(0) @binding(4) var<storage, read_write> o: array<f32>;
@group(0) @binding(5) var<uniform> p: P;

const BK: u32 = 64u;     // keys per tile = threads per workgroup
const MAXD: u32 = 256u;  // largest head dim supported
const SMAX: u32 = 256u;  // most slots per index row
const NONE: u32 = 0xFFFFFFFFu;
var<workgroup> qs: array<vec4<f32>, MAXD / 4u>;
var<workgroup> ps: array<f32, BK>;
var<workgroup> red: array<f32, BK>;
var<workgroup> rows: array<u32, BK>;
var<workgroup> sel: array<u32, SMAX>;

@compute @workgroup_size(BK)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let h = wid.x;
  let t = wid.y;
  let l = lid.x;
  let hk = h / (p.Hq / p.Hkv);
  let pos = p.pos0 + t;
  let qb = pos / p.B;
  let ib = ((qb - p.qb0) * p.Hkv + hk) * p.S;
  let qbase = p.q_off + t * p.q_stride + h * p.HD;
  let d4 = p.HD / 4u;
  for (var i = l; i < d4; i += BK) {
    qs[i] = vec4<f32>(q[qbase + 4u * i], q[qbase + 4u * i + 1u], q[qbase + 4u * i + 2u], q[qbase + 4u * i + 3u]);
  }
  for (var i = l; i < p.S; i += BK) { sel[i] = index[ib + i]; }
  workgroupBarrier();
#if MASKED
  let n_virt = pos + 1u;
#else
  let n_virt = p.S * p.B;
#endif
  var m = -3.402823466e38;
  var lsum = 0.0;
  var acc = array<f32, 4>(0.0, 0.0, 0.0, 0.0);
  for (var kb = 0u; kb < n_virt; kb += BK) {
    let jv = kb + l;
    var j = 0u;
    var valid = false;
    if (jv < n_virt) {
#if MASKED
      j = jv;
      let b = j / p.B;
      for (var i = 0u; i < p.S; i++) {
        if (sel[i] == b) { valid = true; }
      }
#else
      let b = sel[jv / p.B];
      if (b != NONE) {
        j = b * p.B + jv % p.B;
        valid = j <= pos;
      }
#endif
    }
    rows[l] = j;
    var s = -3.402823466e38;
    if (valid) {
      let kbase = (j * p.kv_dim + hk * p.HD) / 4u;
      var d0 = 0.0;
      for (var i = 0u; i < d4; i++) { d0 += dot(qs[i], kc[kbase + i]); }
      s = d0 * p.scale;
    }
    red[l] = s;
    workgroupBarrier();
    for (var off = BK / 2u; off > 0u; off >>= 1u) {
      if (l < off) { red[l] = max(red[l], red[l + off]); }
      workgroupBarrier();
    }
    let m_new = max(m, red[0]);
    workgroupBarrier();
    var pj = 0.0;
    if (valid) { pj = exp(s - m_new); }
    ps[l] = pj;
    red[l] = pj;
    workgroupBarrier();
    for (var off = BK / 2u; off > 0u; off >>= 1u) {
      if (l < off) { red[l] += red[l + off]; }
      workgroupBarrier();
    }
    let corr = exp(m - m_new);
    lsum = lsum * corr + red[0];
    let nk = min(BK, n_virt - kb);
    for (var c = 0u; c < 4u; c++) {
      let d = l + c * BK;
      if (d < p.HD) {
        let vb = hk * p.HD + d;
        var a0 = 0.0;
        for (var jj = 0u; jj < nk; jj++) {
          if (ps[jj] != 0.0) { a0 += ps[jj] * vc[rows[jj] * p.kv_dim + vb]; }
        }
        acc[c] = acc[c] * corr + a0;
      }
    }
    m = m_new;
    workgroupBarrier();
  }
  for (var c = 0u; c < 4u; c++) {
    let d = l + c * BK;
    if (d < p.HD) { o[p.o_off + t * p.o_stride + h * p.HD + d] = acc[c] / lsum; }
  }
}
