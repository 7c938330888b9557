// defines: DK R RDV WG RS ROWSPLIT
// gdn_decode: the whole recurrent core of a Gated DeltaNet decode step (T = 1) in one dispatch
// (KernelOptions::gdn_fuse_decode): what gdn_decode_prep + gdn_step (NORM=1) do in two, or
// causal_conv + l2norm_heads + gdn_gates + gdn_step + gated_rmsnorm in six, with the same operations
// in the same order (same bits). transformers models/qwen3_5/modeling_qwen3_5.py,
// Qwen3_5GatedDeltaNet.forward with torch_recurrent_gated_delta_rule, one token:
//   [q | k | v] = silu(conv1d(x)) (rolling conv state shifted in place); q, k <- l2norm(q), l2norm(k)
//   g = -exp(A_log) * softplus(a + dt_bias), beta = sigmoid(b)          (gdn_gate_math.wgsl)
//   S <- exp(g) S;  u = beta (v - S^T k);  S <- S + k u^T;  o = S^T (scale q)   (per value head)
//   out = rmsnorm(o) * w * silu(z)                                     (Qwen3_5RMSNormGated)
// One workgroup of WG threads per KEY head hk: it owns the conv channels of q and k of hk and of the
// v of its R = NV / NK value heads (value head of slot s: hk*R + s, or hk + s*NK when TILED), so
// every conv-state channel, state column and output belongs to exactly one workgroup (no
// cross-workgroup hazard). q, k, v, gates and o stay in workgroup memory. The reductions are
// those of head_norm.wgsl / gated_rmsnorm.wgsl: threads 0..63 sum squares over i = lid, lid + 64,
// ..., then the same 64-wide tree. Defines: WG (multiple of 64, <= 256), DK, R (<= 64), RDV = R * DV,
// RS (threads per state column, KernelOptions::gdn_decode_row_split, --gdn-decode-row-split; a
// divisor of DK) and ROWSPLIT (RS > 1):
//   ROWSPLIT 0: one thread per state column walks its DK rows twice (S^T k, then the update and S^T q):
//            the same operations in the same order as gdn_step.wgsl (same bits).
//   ROWSPLIT 1: the RS threads of a column each own DK / RS consecutive rows, held in registers
//            between the two passes (the state is read once, not twice); the partial sums of S^T k
//            and of S^T q are added across the RS threads in row-block order through workgroup memory
//            (`part`). Each element's expressions are ROWSPLIT 0's; the sums run in another order: not
//            bit-identical to it (a tolerance test against the CPU twin, kernels/gdn_ops_test.cpp).
//            RS x more threads work on the columns of a key head at once (a decode step has only NK
//            workgroups: 16 for Qwen3.5-0.8B / 2B on a GPU of 132 SMs).
// Layouts: proj row x (q, k, v at x_off + channel, conv channel order [q (NK*DK) | k | v (NV*DV)];
// z of value head h at z_off + h*DV; a, b at a_off + h, b_off + h); conv weights [C][L], conv state
// [L-1][C] (C = 2*NK*DK + NV*DV); DeltaNet state [NV][DK][DV]; out at o_off + h*DV.
#include gdn_gate_math
struct P { NK: u32, NV: u32, DV: u32, L: u32, C: u32, x_off: u32, z_off: u32, a_off: u32, b_off: u32,
           o_off: u32, TILED: u32, scale: f32, l2_eps: f32, norm_eps: f32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> w: array<f32>;
@group(0) @binding(2) var<storage, read> a_log: array<f32>;
@group(0) @binding(3) var<storage, read> dt_bias: array<f32>;
@group(0) @binding(4) var<storage, read> nw: array<f32>;
@group(0) @binding(5) var<storage, read_write> cst: array<f32>;
@group(0) @binding(6) var<storage, read_write> st: array<f32>;
@group(0) @binding(7) var<storage, read_write> out: array<f32>;
@group(0) @binding(8) var<uniform> p: P;
const WG: u32 = {{WG}}u;
const DK: u32 = {{DK}}u;
const R: u32 = {{R}}u;
const RDV: u32 = {{RDV}}u;
var<workgroup> qs: array<f32, DK>;
var<workgroup> ks: array<f32, DK>;
var<workgroup> vs: array<f32, RDV>;  // v, then o (each element rewritten by the thread that read it)
var<workgroup> gs: array<f32, 2u * R>;  // [g (R) | beta (R)]
var<workgroup> redq: array<f32, 64>;
var<workgroup> redk: array<f32, 64>;
const RS: u32 = {{RS}}u;
#if ROWSPLIT
const RPT: u32 = DK / RS;  // state rows per thread
var<workgroup> part: array<f32, WG>;  // [thread] partial sums of its column's rows
#endif

fn value_head(hk: u32, s: u32) -> u32 { return select(hk * R + s, hk + s * p.NK, p.TILED != 0u); }

// causal_conv.wgsl ext() with T = 1 and no input gate: state rows, then the new input.
fn ext(e: u32, c: u32) -> f32 {
  if (e < p.L - 1u) { return cst[e * p.C + c]; }
  return x[p.x_off + c];
}

// Conv + SiLU of channel c (as causal_conv.wgsl SILU=1), then the shift of its state.
fn conv_channel(c: u32) -> f32 {
  var a = 0.0;
  for (var j = 0u; j < p.L; j++) { a += w[c * p.L + j] * ext(j, c); }
  a = a / (1.0 + exp(-a));
  for (var i = 0u; i + 1u < p.L; i++) { cst[i * p.C + c] = ext(1u + i, c); }
  return a;
}

// gdn_step.wgsl column() with q, k, v and the gates from workgroup memory.
fn column(h: u32, s: u32, j: u32, v: f32) -> f32 {
  let decay = exp(gs[s]);
  let beta = gs[R + s];
  let sb = h * DK * p.DV + j;
  var m = 0.0;
  for (var i = 0u; i < DK; i++) { m += (st[sb + i * p.DV] * decay) * ks[i]; }
  let u = (v - m) * beta;
  var acc = 0.0;
  for (var i = 0u; i < DK; i++) {
    let sv = st[sb + i * p.DV] * decay + ks[i] * u;
    st[sb + i * p.DV] = sv;
    acc += sv * (qs[i] * p.scale);
  }
  return acc;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_id) lid: vec3u, @builtin(workgroup_id) wid: vec3u) {
  let hk = wid.x;
  let KD = p.NK * DK;
  // 1. conv + SiLU of the workgroup's channels; gates of its value heads.
  for (var n = lid.x; n < 2u * DK + RDV; n += WG) {
    if (n < DK) {
      qs[n] = conv_channel(hk * DK + n);
    } else if (n < 2u * DK) {
      ks[n - DK] = conv_channel(KD + hk * DK + n - DK);
    } else {
      let m = n - 2u * DK;
      vs[m] = conv_channel(2u * KD + value_head(hk, m / p.DV) * p.DV + m % p.DV);
    }
  }
  if (lid.x < R) {
    let h = value_head(hk, lid.x);
    gs[lid.x] = gdn_decay(x[p.a_off + h], a_log[h], dt_bias[h]);
    gs[R + lid.x] = gdn_beta(x[p.b_off + h]);
  }
  workgroupBarrier();
  // 2. L2 norms of q and k (head_norm.wgsl L2=1 order).
  if (lid.x < 64u) {
    var sq = 0.0;
    var sk = 0.0;
    for (var i = lid.x; i < DK; i += 64u) {
      let a = qs[i];
      sq += a * a;
      let b = ks[i];
      sk += b * b;
    }
    redq[lid.x] = sq;
    redk[lid.x] = sk;
  }
  workgroupBarrier();
  for (var o = 32u; o > 0u; o >>= 1u) {
    if (lid.x < o) {
      redq[lid.x] += redq[lid.x + o];
      redk[lid.x] += redk[lid.x + o];
    }
    workgroupBarrier();
  }
  let nq = 1.0 / sqrt(redq[0] + p.l2_eps);
  let nk = 1.0 / sqrt(redk[0] + p.l2_eps);
  workgroupBarrier();  // every thread has read redq[0] / redk[0] before step 4 reuses redq
  for (var i = lid.x; i < DK; i += WG) {
    qs[i] = qs[i] * nq;
    ks[i] = ks[i] * nk;
  }
  workgroupBarrier();
  // 3. the delta rule, one state column per thread (and loop), or per RS threads (ROWSPLIT).
#if ROWSPLIT
  // Columns base .. base + WG / RS - 1 per pass; thread (c, r) = (lid / RS, lid % RS) owns rows
  // r * RPT .. r * RPT + RPT - 1 of column base + c. The passes are uniform (barriers inside).
  let r = lid.x % RS;
  let lead = lid.x - r;  // the column's first thread
  for (var base = 0u; base < RDV; base += WG / RS) {
    let n = base + lid.x / RS;
    let live = n < RDV;
    var sv: array<f32, RPT>;
    var m = 0.0;
    var sb = 0u;
    if (live) {
      let s = n / p.DV;
      sb = value_head(hk, s) * DK * p.DV + n % p.DV;
      let decay = exp(gs[s]);
      for (var e = 0u; e < RPT; e++) {
        let i = r * RPT + e;
        sv[e] = st[sb + i * p.DV] * decay;
        m += sv[e] * ks[i];
      }
    }
    part[lid.x] = m;
    workgroupBarrier();
    var acc = 0.0;
    if (live) {
      var mt = 0.0;
      for (var q2 = 0u; q2 < RS; q2++) { mt += part[lead + q2]; }
      let u = (vs[n] - mt) * gs[R + n / p.DV];
      for (var e = 0u; e < RPT; e++) {
        let i = r * RPT + e;
        let x = sv[e] + ks[i] * u;
        st[sb + i * p.DV] = x;
        acc += x * (qs[i] * p.scale);
      }
    }
    workgroupBarrier();  // every thread has read part and vs[n]
    part[lid.x] = acc;
    workgroupBarrier();
    if (live && r == 0u) {
      var ot = 0.0;
      for (var q2 = 0u; q2 < RS; q2++) { ot += part[lid.x + q2]; }
      vs[n] = ot;
    }
    workgroupBarrier();  // part is rewritten by the next pass
  }
#else
  for (var n = lid.x; n < RDV; n += WG) { vs[n] = column(value_head(hk, n / p.DV), n / p.DV, n % p.DV, vs[n]); }
  workgroupBarrier();
#endif
  // 4. gated RMSNorm of each value head (gated_rmsnorm.wgsl order).
  for (var s = 0u; s < R; s++) {
    if (lid.x < 64u) {
      var t = 0.0;
      for (var i = lid.x; i < p.DV; i += 64u) { let v = vs[s * p.DV + i]; t += v * v; }
      redq[lid.x] = t;
    }
    workgroupBarrier();
    for (var o = 32u; o > 0u; o >>= 1u) {
      if (lid.x < o) { redq[lid.x] += redq[lid.x + o]; }
      workgroupBarrier();
    }
    let scale = 1.0 / sqrt(redq[0] / f32(p.DV) + p.norm_eps);
    let h = value_head(hk, s);
    for (var j = lid.x; j < p.DV; j += WG) {
      let g = x[p.z_off + h * p.DV + j];
      out[p.o_off + h * p.DV + j] = (vs[s * p.DV + j] * scale) * nw[j] * (g / (1.0 + exp(-g)));
    }
    workgroupBarrier();  // redq is reused by the next head
  }
}
