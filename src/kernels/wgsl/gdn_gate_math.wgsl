// defines: none
// gdn_gate_math: the Gated DeltaNet gate formulas shared by gdn_gates and gdn_decode_prep
// (included, never compiled alone), so that both give the same bits.
//   g    = -exp(A_log) * softplus(a + dt_bias)   (log-space decay, <= 0)
//   beta = sigmoid(b)
// softplus as torch (threshold 20): x for x > 20, else log1p(exp(x)); WGSL has no log1p, so
// tiny exp(x) use its series e - e^2/2 (|error| < e^3/3).
fn softplus(x: f32) -> f32 {
  if (x > 20.0) { return x; }
  let e = exp(x);
  if (e < 1e-4) { return e - 0.5 * e * e; }
  return log(1.0 + e);
}
fn gdn_decay(a: f32, a_log: f32, dt_bias: f32) -> f32 { return -exp(a_log) * softplus(a + dt_bias); }
fn gdn_beta(b: f32) -> f32 { return 1.0 / (1.0 + exp(-b)); }
