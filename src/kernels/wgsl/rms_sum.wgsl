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
