// defines: none
// rms_sum: the sum of squares of one row of D floats in a FIXED order, shared (via #include) by
// rmsnorm.wgsl and the RMSNorm prologue of matmul.wgsl (NORM variant) so that both compute
// bit-identical inverse RMS values. The order: RMS_SLOTS = 256 partial sums, slot j summing
// elements j, j + 256, j + 512, ... in increasing order; then a binary tree over the slots
// (slot i += slot i + off for off = 128, 64, ..., 1). A workgroup of NT threads (any NT) fills
// slot j from thread j % NT, so the order does not depend on the workgroup size.
// The includer defines `fn rms_x(i: u32) -> f32` (element i of its activation buffer).
// Must be called from uniform control flow (it has barriers); returns the sum in every thread.
const RMS_SLOTS: u32 = 256u;
var<workgroup> rms_red: array<f32, RMS_SLOTS>;

fn rms_sum_squares(tid: u32, NT: u32, xb: u32, D: u32) -> f32 {
  for (var j = tid; j < RMS_SLOTS; j += NT) {
    var s = 0.0;
    for (var i = j; i < D; i += RMS_SLOTS) { let v = rms_x(xb + i); s += v * v; }
    rms_red[j] = s;
  }
  workgroupBarrier();
  for (var off = RMS_SLOTS / 2u; off > 0u; off >>= 1u) {
    for (var j = tid; j < off; j += NT) { rms_red[j] += rms_red[j + off]; }
    workgroupBarrier();
  }
  let r = rms_red[0];
  workgroupBarrier();  // rms_red may be refilled right after (next row)
  return r;
}

// The same sum in ONE thread without barriers (for workgroups that avoid barriers: matmul with
// LANES = 1, the software-adapter default, where emulated barriers cost more than this loop).
// The tree above adds slot i to slot i + off for off = 128 .. 1, i.e. it is the pairwise
// (adjacent) tree over the slots in bit-reversed order; a binary-counter stack of 9 partial sums
// evaluates that tree leaf by leaf with the same additions: bit-identical to rms_sum_squares.
fn rms_sum_squares_serial(xb: u32, D: u32) -> f32 {
  var stack: array<f32, 9>;
  for (var m = 0u; m < RMS_SLOTS; m++) {
    let j = reverseBits(m) >> 24u;  // slot of the m-th leaf (8-bit reversal; RMS_SLOTS = 256)
    var v = 0.0;
    for (var i = j; i < D; i += RMS_SLOTS) { let e = rms_x(xb + i); v += e * e; }
    var level = 0u;
    while (((m >> level) & 1u) == 1u) {
      v = stack[level] + v;
      level++;
    }
    stack[level] = v;
  }
  return stack[8];
}
