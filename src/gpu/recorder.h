// Recorder: records a whole forward pass (many dispatches) into one command encoder and one
// compute pass, then submits once and optionally reads back one small result — the "one decode
// step = one submission + one small readback" rule. Kernel parameters go into one uniform buffer
// (256-byte slot per dispatch, written once per submission); bind groups are cached by
// (layout, buffers, offsets, slot), so a decode step after the first creates no WebGPU objects.
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpu/buffer.h"
#include "gpu/pipeline.h"

namespace wgllm::gpu {

class Context;

/// A storage binding: a buffer range (size 0 = to the end of the buffer).
struct Binding {
  const Buffer* buf = nullptr;
  uint64_t offset = 0;
  uint64_t size = 0;
  Binding() = default;  // no buffer (an optional binding left unset)
  Binding(const Buffer& b, uint64_t off = 0, uint64_t sz = 0) : buf(&b), offset(off), size(sz) {}
};

/// Bytes a dispatch moves, by what they are (declared by the op that records it; the minimum
/// traffic: each input read once, each output written once).
enum class Traffic : uint8_t { Weights, Activations, KvCache, Recurrent, Logits, kCount };
const char* traffic_name(Traffic t);
struct TrafficBytes {
  uint64_t read[size_t(Traffic::kCount)] = {};
  uint64_t written[size_t(Traffic::kCount)] = {};
  TrafficBytes& r(Traffic t, uint64_t b) { read[size_t(t)] += b; return *this; }
  TrafficBytes& w(Traffic t, uint64_t b) { written[size_t(t)] += b; return *this; }
  /// Adds another dispatch part's bytes, kind by kind.
  TrafficBytes& operator+=(const TrafficBytes& o) {
    for (size_t k = 0; k < size_t(Traffic::kCount); ++k) read[k] += o.read[k], written[k] += o.written[k];
    return *this;
  }
  uint64_t total() const;
};

/// One recorded dispatch: label, declared traffic and (when profiling) GPU time.
struct KernelTime {
  std::string label;
  double us = 0;
  TrafficBytes traffic;
  bool declared = false;  // false: the op declared no traffic
};

/// Where the wall time of one submission went (host clock, microseconds), and its GPU execution
/// time when step timing is on (Recorder::set_step_gpu_time). record_us: begin() to submit()
/// (recording the dispatches); submit_us: inside submit() before the wait (parameter upload,
/// encoder finish, queue submit); wait_us: the wait for the scheduled read (GPU execution plus
/// the map round trip); gpu_us: encoder-level timestamps at the start and end of the submission's
/// commands (-1 when not measured: step timing off, no read scheduled, or the device lacks
/// native:timestamp-query-inside-encoders).
/// Pipelined submissions (Recorder::submit_async / wait_read) fill it in two halves: submit_async()
/// sets record_us and submit_us of the submission it makes, wait_read() sets wait_us (the time
/// blocked on that ticket) and gpu_us (of the ticket's submission). A pipelined decode step (submit
/// step i+1, then read step i) thus reads as: the host cost of the step it submitted, the wait for
/// the token it returned.
struct StepTiming {
  double record_us = 0, submit_us = 0, wait_us = 0, gpu_us = -1;
};

class Recorder {
 public:
  static constexpr uint32_t kParamSlot = 256;  // bytes; >= minUniformBufferOffsetAlignment
  explicit Recorder(Context& ctx, uint32_t max_dispatches = 4096);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  /// Dispatches per submission (0: the whole recording is one submission, the default). With N >
  /// 0, every N dispatches the recording so far is submitted (its parameter slots uploaded first)
  /// and recording goes on in a new command encoder: the GPU starts on the first dispatches of a
  /// forward while the host still records the rest (the host's recording and submission cost
  /// ~0.7 ms of a 2.2 ms SmolLM2 decode step on the H200). Queue order keeps every result the same
  /// (bit-identical; tests/e2e/fusion_switches_test.cpp). ModelOptions::submit_chunk, --submit-chunk.
  void set_submit_chunk(uint32_t n) { chunk_ = n; }
  uint32_t submit_chunk() const { return chunk_; }
  /// Submissions made by the last begin()..submit() (1 when chunking is off).
  uint32_t last_submission_count() const { return last_submissions_; }

  /// Starts a new command encoder + compute pass. Must be called before dispatch().
  void begin();
  /// Records one dispatch. `storage` are bindings 0..n-2 (n = pipeline bindings); the parameter
  /// block (<= 256 bytes) is bound last as a uniform. `label` names it in profiles.
  void dispatch(const Pipeline& p, std::span<const Binding> storage, const void* params,
                uint32_t params_size, uint32_t gx, uint32_t gy = 1, uint32_t gz = 1,
                const char* label = nullptr);
  /// As above, with the storage bindings of a list built at run time.
  template <class P>
  void dispatch(const Pipeline& p, std::span<const Binding> storage, const P& params, uint32_t gx, uint32_t gy = 1,
                uint32_t gz = 1, const char* label = nullptr) {
    static_assert(sizeof(P) <= kParamSlot && sizeof(P) % 4 == 0);
    dispatch(p, storage, &params, sizeof(P), gx, gy, gz, label);
  }
  template <class P>
  void dispatch(const Pipeline& p, std::initializer_list<Binding> storage, const P& params,
                uint32_t gx, uint32_t gy = 1, uint32_t gz = 1, const char* label = nullptr) {
    dispatch(p, std::span<const Binding>(storage.begin(), storage.size()), params, gx, gy, gz, label);
  }
  /// Declares the traffic of the next dispatch (ops call this right before dispatch()).
  void declare(const TrafficBytes& t) { next_traffic_ = t; next_declared_ = true; }
  /// Keeps per-dispatch labels and declared traffic of each submission (see last_dispatches()).
  void set_traffic_log(bool on) { log_traffic_ = on; }
  /// Measurement only (bench --repeat-kernel): every dispatch labelled `label` is recorded twice, with
  /// the same pipeline, bindings and parameters, so that the step time grows by that kernel's
  /// marginal cost in place. Outputs of accumulating kernels (y +=) change; "" turns it off.
  void set_repeat_label(std::string label) { repeat_label_ = std::move(label); }
  /// Dispatches of the last submission with declared traffic (times filled when profiling).
  const std::vector<KernelTime>& last_dispatches() const { return dispatch_log_; }
  /// Buffer-to-buffer copy inside the same submission (ends and restarts the compute pass).
  void copy(const Buffer& src, uint64_t src_off, const Buffer& dst, uint64_t dst_off, uint64_t size);
  /// As copy(), and when profiling on a device with encoder-level timestamps
  /// (native:timestamp-query-inside-encoders) the copy is timed and listed under `label` in
  /// last_profile()/last_dispatches() like a dispatch (traffic from declare()); otherwise a plain
  /// copy. Returns whether it was timed. Used by the copy-bandwidth probe.
  bool copy_timed(const Buffer& src, uint64_t src_off, const Buffer& dst, uint64_t dst_off, uint64_t size,
                  const char* label);
  /// Schedules a read of src[off, off+size) at the end of this submission (size <= 16 MiB): the
  /// copy into the staging buffer is recorded by submit() / submit_async(), after everything else.
  void read_after(const Buffer& src, uint64_t off, uint64_t size);
  /// Ends recording and submits once. If a read was scheduled, waits and copies it to read_dst.
  /// Throws wgllm::Error on any captured validation error or device loss.
  void submit(void* read_dst = nullptr);

  /// Staging buffers of submit_async(): at most this many tickets unread at once.
  static constexpr uint32_t kReadRing = 4;
  /// As submit(), without waiting: the read scheduled by read_after() (required) goes to one of
  /// kReadRing staging buffers, mapped asynchronously; returns a ticket for wait_read(). Throws
  /// wgllm::Error when kReadRing tickets are unread or per-dispatch profiling is on (its timestamps
  /// are read back synchronously: use submit()). The pipelined greedy decode (Model::
  /// forward_argmax_async) submits step i+1 before it reads step i's token this way.
  uint64_t submit_async();
  /// The ticket of the last submit_async() (0 before the first).
  uint64_t last_ticket() const { return next_ticket_ - 1; }
  /// Waits until the submission of `ticket` has completed (not the later ones: the host goes on
  /// while the GPU runs them), copies its read (the size given to read_after) to dst and frees the
  /// ticket's staging buffer. Tickets may be read in any order, each once.
  void wait_read(uint64_t ticket, void* dst);
  /// A storage buffer of at least `bytes` for data one dispatch of this recording writes and a
  /// later one reads (the int8 prefill matmul's quantized activations, kernels/matmul_int8.h): one
  /// grow-only buffer shared by every caller, contents undefined between callers (queue order keeps
  /// a writer, its readers and the next writer apart). When it grows, the smaller buffer stays
  /// alive until the next begin() (dispatches recorded before still bind it).
  const Buffer& scratch(uint64_t bytes);
  /// Copies recorded at the start of the next begin()'s encoder, before its first dispatch (a
  /// sequence's one-step undo copies, Sequence::prepare_undo()); consumed by that begin().
  void copy_on_begin(std::vector<CopyRange> copies) { begin_copies_ = std::move(copies); }

  /// Per-dispatch timestamps for later submissions (no-op if the device lacks the feature).
  void set_profiling(bool on);
  bool profiling() const { return profiling_; }
  /// Times of the last submitted recording (empty when profiling is off).
  const std::vector<KernelTime>& last_profile() const { return profile_; }
  uint32_t last_dispatch_count() const { return last_dispatches_; }
  /// Timestamps at the start and end of every submission that schedules a read, returned with
  /// that read (one map per step, as without it): StepTiming::gpu_us. No-op without
  /// native:timestamp-query-inside-encoders. Off by default (two timestamps and a 16-byte copy
  /// per submission: `wgllm bench --step-gpu-times` labels its results non-product).
  void set_step_gpu_time(bool on);
  /// Host-side split of the last submission (always measured: three clock reads) and, when
  /// set_step_gpu_time is on, its GPU time.
  const StepTiming& last_step_timing() const { return timing_; }

 private:
  WGPUBindGroup bind_group(const Pipeline& p, std::span<const Binding> storage, uint32_t slot);
  void ensure_pass();
  void end_pass();
  void upload_params();   // parameter slots [chunk_start_, n_dispatch_) to the GPU, before their submission
  void submit_encoder();  // finishes enc_ and submits it (enc_ = nullptr; last_index_ = its submission index)
  // The end of submit()/submit_async(): the scheduled read's copy into dst at offset 0 and, with
  // step timing, the step's timestamps after it; returns whether the timestamps were recorded.
  bool record_read_and_timestamps(const Buffer& dst);
  void finish_submission(int64_t t_submit);  // params upload, submit, bookkeeping, record/submit times
  uint64_t last_index_ = 0;  // submission index of the last submit_encoder() (native)
  void flush_chunk();     // submits the recording so far and opens a new encoder (chunked submission)
  Context& ctx_;
  uint32_t chunk_ = 0, chunk_start_ = 0, submissions_ = 0, last_submissions_ = 0;
  uint32_t max_dispatches_;
  Buffer params_;
  std::vector<uint8_t> params_cpu_;
  uint32_t n_dispatch_ = 0, last_dispatches_ = 0;
  WGPUCommandEncoder enc_ = nullptr;
  WGPUComputePassEncoder pass_ = nullptr;
  // Bind groups by a 64-bit hash of their key (layout, parameter slot, then each storage binding's
  // buffer id, offset and size), the key built on the stack: no allocation for a cached lookup.
  // Entries keep the whole key (collisions share a bucket).
  static constexpr size_t kMaxStorage = 16;  // storage bindings per kernel
  struct BindGroupEntry {
    std::vector<uint64_t> key;
    WGPUBindGroup bg;
  };
  std::unordered_map<uint64_t, std::vector<BindGroupEntry>> bind_groups_;
  size_t n_bind_groups_ = 0;
  WGPUComputePipeline pass_pipeline_ = nullptr;  // last pipeline set in pass_ (setPipeline skipped when equal)
  Buffer staging_;
  bool read_pending_ = false;
  const Buffer* read_src_ = nullptr;
  uint64_t read_off_ = 0, read_size_ = 0;
  std::vector<CopyRange> begin_copies_;
  Buffer scratch_;
  std::vector<Buffer> retired_scratch_;  // replaced by a larger scratch_ during this recording
  // submit_async(): one staging buffer per unread ticket, mapped asynchronously
  struct ReadSlot {
    Buffer buf;
    uint64_t ticket = 0, index = 0, size = 0;
    bool busy = false, done = false, step_ts = false;
    WGPUMapAsyncStatus status{};
    std::string msg;
  };
  std::array<ReadSlot, kReadRing> ring_;
  uint64_t next_ticket_ = 1;
  // profiling
  bool profiling_ = false;
  uint32_t prof_cap_ = 0;
  WGPUQuerySet queries_ = nullptr;
  Buffer query_resolve_, query_read_;
  std::vector<std::string> labels_;
  std::vector<KernelTime> profile_;
  TrafficBytes next_traffic_;
  bool next_declared_ = false, log_traffic_ = false;
  std::string repeat_label_;
  // step timing
  bool step_gpu_ = false;
  WGPUQuerySet step_queries_ = nullptr;
  Buffer step_resolve_;
  int64_t t_begin_ns_ = 0;
  StepTiming timing_;
  std::vector<KernelTime> cur_log_, dispatch_log_;
};

}  // namespace wgllm::gpu
