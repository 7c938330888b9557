#include "gpu/recorder.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "gpu/context.h"

namespace wgllm::gpu {
namespace {
// Offset of the step's two timestamps after a read of `size` bytes in the staging buffer
// (the read rounded up to 4 bytes, then to 256).
uint64_t step_timestamps_offset(uint64_t size) { return (((size + 3) & ~uint64_t(3)) + 255) & ~uint64_t(255); }

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

const char* traffic_name(Traffic t) {
  switch (t) {
    case Traffic::Weights: return "weights";
    case Traffic::Activations: return "activations";
    case Traffic::KvCache: return "kv_cache";
    case Traffic::Recurrent: return "recurrent_state";
    case Traffic::Logits: return "logits";
    default: return "?";
  }
}

uint64_t TrafficBytes::total() const {
  uint64_t s = 0;
  for (size_t i = 0; i < size_t(Traffic::kCount); ++i) s += read[i] + written[i];
  return s;
}

Recorder::Recorder(Context& ctx, uint32_t max_dispatches)
    : ctx_(ctx),
      max_dispatches_(max_dispatches),
      params_(ctx, uint64_t(max_dispatches) * kParamSlot, BufferKind::Uniform, "kernel-params"),
      params_cpu_(size_t(max_dispatches) * kParamSlot, 0) {}

Recorder::~Recorder() {
  // A pending map's callback points into ring_: let it run before the slots go away.
  bool pending = false;
  for (const ReadSlot& r : ring_) pending = pending || (r.busy && !r.done);
  if (pending) {
    try {
      ctx_.poll_wait();
    } catch (...) {
    }
  }
  for (ReadSlot& r : ring_)
    if (r.busy && r.done && r.status == WGPUMapAsyncStatus_Success) wgpuBufferUnmap(r.buf.handle());
  if (pass_) wgpuComputePassEncoderRelease(pass_);
  if (enc_) wgpuCommandEncoderRelease(enc_);
  for (auto& [h, es] : bind_groups_)
    for (auto& e : es) wgpuBindGroupRelease(e.bg);
  if (queries_) wgpuQuerySetRelease(queries_);
  if (step_queries_) wgpuQuerySetRelease(step_queries_);
}

void Recorder::set_step_gpu_time(bool on) {
  ContextCall call(ctx_);
#ifdef __EMSCRIPTEN__
  step_gpu_ = false;  // encoder-level timestamps are a wgpu-native feature
  (void)on;
#else
  step_gpu_ = on && ctx_.has_feature(WGPUFeatureName(WGPUNativeFeature_TimestampQueryInsideEncoders));
#endif
  if (step_gpu_ && !step_queries_) {
    WGPUQuerySetDescriptor qd = WGPU_QUERY_SET_DESCRIPTOR_INIT;
    qd.type = WGPUQueryType_Timestamp;
    qd.count = 2;
    step_queries_ = wgpuDeviceCreateQuerySet(ctx_.device(), &qd);
    step_resolve_ = Buffer(ctx_, 256, BufferKind::QueryResolve, "step-ts-resolve");
  }
}

void Recorder::set_profiling(bool on) {
  ContextCall call(ctx_);
  // WebGPU caps a query set at 4096 queries: profile at most 2048 dispatches per submission.
  profiling_ = on && ctx_.timestamps_inside_passes();
  prof_cap_ = std::min<uint32_t>(max_dispatches_, 2048);
  if (profiling_ && !queries_) {
    WGPUQuerySetDescriptor qd = WGPU_QUERY_SET_DESCRIPTOR_INIT;
    qd.type = WGPUQueryType_Timestamp;
    qd.count = 2 * prof_cap_;
    queries_ = wgpuDeviceCreateQuerySet(ctx_.device(), &qd);
    query_resolve_ = Buffer(ctx_, uint64_t(qd.count) * 8, BufferKind::QueryResolve, "ts-resolve");
    query_read_ = Buffer(ctx_, uint64_t(qd.count) * 8, BufferKind::Readback, "ts-read");
  }
}

void Recorder::begin() {
  ContextCall call(ctx_);
  if (enc_) throw Error("Recorder::begin called twice without submit");
  t_begin_ns_ = now_ns();
  enc_ = wgpuDeviceCreateCommandEncoder(ctx_.device(), nullptr);
#ifndef __EMSCRIPTEN__
  if (step_gpu_) wgpuCommandEncoderWriteTimestamp(enc_, step_queries_, 0);
#endif
  for (const CopyRange& c : begin_copies_) copy(*c.src, c.src_off, *c.dst, c.dst_off, c.size);
  begin_copies_.clear();
  retired_scratch_.clear();
  n_dispatch_ = 0;
  chunk_start_ = 0;
  submissions_ = 0;
  read_pending_ = false;
  labels_.clear();
  cur_log_.clear();
}

const Buffer& Recorder::scratch(uint64_t bytes) {
  ContextCall call(ctx_);
  if (scratch_.size() < bytes) {
    if (scratch_) retired_scratch_.push_back(std::move(scratch_));
    scratch_ = Buffer(ctx_, std::max<uint64_t>(bytes, 1 << 20), BufferKind::Storage, "recorder_scratch");
  }
  return scratch_;
}

void Recorder::end_pass() {
  if (!pass_) return;
  wgpuComputePassEncoderEnd(pass_);
  wgpuComputePassEncoderRelease(pass_);
  pass_ = nullptr;
}

void Recorder::upload_params() {
  if (n_dispatch_ > chunk_start_) {
    const uint64_t off = uint64_t(chunk_start_) * kParamSlot, size = uint64_t(n_dispatch_ - chunk_start_) * kParamSlot;
#ifdef __EMSCRIPTEN__
    // Browser: read from params_cpu_ when the submit that follows at once replays the command list.
    wgllmQueueWriteBufferDeferred(ctx_.queue(), params_.handle(), off, params_cpu_.data() + off, size);
#else
    params_.write(ctx_, off, params_cpu_.data() + off, size);
#endif
  }
  chunk_start_ = n_dispatch_;
}

void Recorder::submit_encoder() {
  WGPUCommandBuffer cmd = wgpuCommandEncoderFinish(enc_, nullptr);
  wgpuCommandEncoderRelease(enc_);
  enc_ = nullptr;
#ifdef __EMSCRIPTEN__
  wgpuQueueSubmit(ctx_.queue(), 1, &cmd);
#else
  last_index_ = wgpuQueueSubmitForIndex(ctx_.queue(), 1, &cmd);
#endif
  wgpuCommandBufferRelease(cmd);
}

void Recorder::flush_chunk() {
  end_pass();
  upload_params();
  submit_encoder();
  ++submissions_;
  enc_ = wgpuDeviceCreateCommandEncoder(ctx_.device(), nullptr);
}

void Recorder::ensure_pass() {
  if (!enc_) throw Error("Recorder: dispatch outside begin()/submit()");
  if (!pass_) {
    pass_ = wgpuCommandEncoderBeginComputePass(enc_, nullptr);
    pass_pipeline_ = nullptr;
  }
}

WGPUBindGroup Recorder::bind_group(const Pipeline& p, std::span<const Binding> storage,
                                   uint32_t slot) {
  if (storage.size() > kMaxStorage) throw Error("kernel '" + p.key() + "': more than 16 storage bindings");
  uint64_t key[2 + 3 * kMaxStorage];
  size_t n = 0;
  key[n++] = reinterpret_cast<uintptr_t>(p.layout());
  key[n++] = slot;
  for (const Binding& b : storage) {
    key[n++] = b.buf->id();
    key[n++] = b.offset;
    key[n++] = b.size;
  }
  uint64_t h = 0x9E3779B97F4A7C15ull;
  for (size_t i = 0; i < n; ++i) {  // splitmix64-style mixing of each word
    uint64_t z = key[i] + 0x9E3779B97F4A7C15ull * (i + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    h = (h ^ z ^ (z >> 31)) * 0x100000001B3ull;
  }
  auto& bucket = bind_groups_[h];
  for (const BindGroupEntry& e : bucket)
    if (e.key.size() == n && std::memcmp(e.key.data(), key, n * sizeof(uint64_t)) == 0) return e.bg;
  WGPUBindGroupEntry es[kMaxStorage + 1];
  uint32_t i = 0;
  for (const Binding& b : storage) {
    WGPUBindGroupEntry e = WGPU_BIND_GROUP_ENTRY_INIT;
    e.binding = i;
    e.buffer = b.buf->handle();
    e.offset = b.offset;
    e.size = b.size ? b.size : b.buf->size() - b.offset;
    es[i++] = e;
  }
  WGPUBindGroupEntry u = WGPU_BIND_GROUP_ENTRY_INIT;
  u.binding = i;
  u.buffer = params_.handle();
  u.offset = uint64_t(slot) * kParamSlot;
  u.size = kParamSlot;
  es[i++] = u;
  WGPUBindGroupDescriptor d = WGPU_BIND_GROUP_DESCRIPTOR_INIT;
  d.layout = p.layout();
  d.entryCount = i;
  d.entries = es;
  WGPUBindGroup bg = wgpuDeviceCreateBindGroup(ctx_.device(), &d);
  if (n_bind_groups_ >= 65536) {  // bound the cache (e.g. many distinct prefill shapes)
    for (auto& [hh, es2] : bind_groups_)
      for (auto& e : es2) wgpuBindGroupRelease(e.bg);
    bind_groups_.clear();
    n_bind_groups_ = 0;
  }
  bind_groups_[h].push_back({std::vector<uint64_t>(key, key + n), bg});
  ++n_bind_groups_;
  return bg;
}

void Recorder::dispatch(const Pipeline& p, std::span<const Binding> storage, const void* params,
                        uint32_t params_size, uint32_t gx, uint32_t gy, uint32_t gz, const char* label) {
  ContextCall call(ctx_);
  if (storage.size() + 1 != p.n_bindings())
    throw Error("kernel '" + p.key() + "': expected " + std::to_string(p.n_bindings() - 1) +
                " storage bindings, got " + std::to_string(storage.size()));
  if (n_dispatch_ >= max_dispatches_) throw Error("Recorder: too many dispatches in one submission");
  if (params_size > kParamSlot) throw Error("kernel params too large");
  const uint32_t lim = ctx_.info().limits.maxComputeWorkgroupsPerDimension;
  if (gx > lim || gy > lim || gz > lim)
    throw Error("kernel '" + p.key() + "': grid " + std::to_string(gx) + "x" + std::to_string(gy) +
                "x" + std::to_string(gz) + " exceeds maxComputeWorkgroupsPerDimension");
  const bool declared = std::exchange(next_declared_, false);
  if (gx == 0 || gy == 0 || gz == 0) return;
  if (log_traffic_) cur_log_.push_back({label ? label : p.key(), 0.0, declared ? next_traffic_ : TrafficBytes{}, declared});
  ensure_pass();
  const uint32_t slot = n_dispatch_++;
  std::memcpy(params_cpu_.data() + size_t(slot) * kParamSlot, params, params_size);
  WGPUBindGroup bg = bind_group(p, storage, slot);
  const bool prof = profiling_ && slot < prof_cap_;
  if (prof) wgpuComputePassEncoderWriteTimestamp(pass_, queries_, 2 * slot);
  if (p.handle() != pass_pipeline_) {
    wgpuComputePassEncoderSetPipeline(pass_, p.handle());
    pass_pipeline_ = p.handle();
  }
  wgpuComputePassEncoderSetBindGroup(pass_, 0, bg, 0, nullptr);
  wgpuComputePassEncoderDispatchWorkgroups(pass_, gx, gy, gz);
  if (!repeat_label_.empty() && label && repeat_label_ == label) wgpuComputePassEncoderDispatchWorkgroups(pass_, gx, gy, gz);
  if (prof) {
    wgpuComputePassEncoderWriteTimestamp(pass_, queries_, 2 * slot + 1);
    labels_.push_back(label ? label : p.key());
  }
  if (chunk_ && n_dispatch_ - chunk_start_ >= chunk_) flush_chunk();
}

void Recorder::copy(const Buffer& src, uint64_t so, const Buffer& dst, uint64_t dof, uint64_t size) {
  ContextCall call(ctx_);
  if (!enc_) throw Error("Recorder: copy outside begin()/submit()");
  end_pass();
  if (so + size > src.size() || dof + size > dst.size()) throw Error("Recorder::copy out of range");
  wgpuCommandEncoderCopyBufferToBuffer(enc_, src.handle(), so, dst.handle(), dof, (size + 3) & ~uint64_t(3));
}

bool Recorder::copy_timed(const Buffer& src, uint64_t so, const Buffer& dst, uint64_t dof, uint64_t size,
                          const char* label) {
  const bool declared = std::exchange(next_declared_, false);
  const bool timed = profiling_ && n_dispatch_ < prof_cap_ &&
                     ctx_.has_feature(WGPUFeatureName(WGPUNativeFeature_TimestampQueryInsideEncoders));
  if (!timed) {
    copy(src, so, dst, dof, size);
    return false;
  }
  if (!enc_) throw Error("Recorder: copy outside begin()/submit()");
  if (n_dispatch_ >= max_dispatches_) throw Error("Recorder: too many dispatches in one submission");
  if (so + size > src.size() || dof + size > dst.size()) throw Error("Recorder::copy_timed out of range");
  const uint32_t slot = n_dispatch_++;  // a query pair (and an unused parameter slot)
  if (log_traffic_) cur_log_.push_back({label, 0.0, declared ? next_traffic_ : TrafficBytes{}, declared});
  labels_.push_back(label);
  end_pass();
  wgpuCommandEncoderWriteTimestamp(enc_, queries_, 2 * slot);
  copy(src, so, dst, dof, size);
  wgpuCommandEncoderWriteTimestamp(enc_, queries_, 2 * slot + 1);
  return true;
}

void Recorder::read_after(const Buffer& src, uint64_t off, uint64_t size) {
  ContextCall call(ctx_);
  if (!enc_) throw Error("Recorder: read_after outside begin()/submit()");
  if (off + ((size + 3) & ~uint64_t(3)) > src.size() || size > (16u << 20)) throw Error("Recorder::read_after out of range");
  read_pending_ = true;
  read_src_ = &src;
  read_off_ = off;
  read_size_ = size;
}

bool Recorder::record_read_and_timestamps(const Buffer& dst) {
  copy(*read_src_, read_off_, dst, 0, (read_size_ + 3) & ~uint64_t(3));
#ifndef __EMSCRIPTEN__
  if (step_gpu_) {  // the timestamps travel back with the scheduled read
    wgpuCommandEncoderWriteTimestamp(enc_, step_queries_, 1);
    wgpuCommandEncoderResolveQuerySet(enc_, step_queries_, 0, 2, step_resolve_.handle(), 0);
    wgpuCommandEncoderCopyBufferToBuffer(enc_, step_resolve_.handle(), 0, dst.handle(),
                                         step_timestamps_offset(read_size_), 16);
    return true;
  }
#endif
  (void)dst;
  return false;
}

void Recorder::finish_submission(int64_t t_submit) {
  upload_params();
  submit_encoder();
  last_submissions_ = submissions_ + 1;
  last_dispatches_ = n_dispatch_;
  dispatch_log_ = std::move(cur_log_);
  cur_log_.clear();
  ctx_.check();
  timing_.record_us = double(t_submit - t_begin_ns_) / 1e3;
  timing_.submit_us = double(now_ns() - t_submit) / 1e3;
}

uint64_t Recorder::submit_async() {
  ContextCall call(ctx_);
  if (!enc_) throw Error("Recorder::submit_async without begin()");
  if (!read_pending_) throw Error("Recorder::submit_async: no read scheduled (read_after)");
  if (profiling_) throw Error("Recorder::submit_async: per-dispatch profiling needs submit()");
  const int64_t t_submit = now_ns();
  ReadSlot* slot = nullptr;
  for (ReadSlot& r : ring_)
    if (!r.busy) {
      slot = &r;
      break;
    }
  if (!slot) throw Error("Recorder::submit_async: " + std::to_string(kReadRing) + " tickets unread");
  const uint64_t need = step_timestamps_offset(read_size_) + 16;
  if (!slot->buf || slot->buf.size() < need)
    slot->buf = Buffer(ctx_, std::max<uint64_t>(need, 256), BufferKind::Readback, "step-readback-ring");
  end_pass();
  slot->step_ts = record_read_and_timestamps(slot->buf);
  read_pending_ = false;
  finish_submission(t_submit);
  slot->ticket = next_ticket_++;
  slot->index = last_index_;
  slot->size = read_size_;
  slot->busy = true;
  slot->done = false;
  WGPUBufferMapCallbackInfo cb = WGPU_BUFFER_MAP_CALLBACK_INFO_INIT;
  cb.mode = WGPUCallbackMode_AllowProcessEvents;
  cb.callback = [](WGPUMapAsyncStatus s, WGPUStringView m, void* u1, void*) {
    auto* r = static_cast<ReadSlot*>(u1);
    r->done = true;
    r->status = s;
    r->msg = str(m);
  };
  cb.userdata1 = slot;
  wgpuBufferMapAsync(slot->buf.handle(), WGPUMapMode_Read, 0, slot->buf.size(), cb);
  return slot->ticket;
}

void Recorder::wait_read(uint64_t ticket, void* dst) {
  ContextCall call(ctx_);
  ReadSlot* slot = nullptr;
  for (ReadSlot& r : ring_)
    if (r.busy && r.ticket == ticket) slot = &r;
  if (!slot) throw Error("Recorder::wait_read: ticket " + std::to_string(ticket) + " is not pending");
  const int64_t t0 = now_ns();
  while (!slot->done) {
    ctx_.poll_wait_for(slot->index);
    ctx_.check();
  }
  slot->busy = false;
  if (slot->status != WGPUMapAsyncStatus_Success) throw Error("GPU readback failed: " + slot->msg);
  const uint64_t ts_off = step_timestamps_offset(slot->size);
  const uint64_t n = slot->step_ts ? ts_off + 16 : slot->size;
  const auto* p = static_cast<const uint8_t*>(wgpuBufferGetConstMappedRange(slot->buf.handle(), 0, slot->buf.size()));
  if (!p) {
    wgpuBufferUnmap(slot->buf.handle());
    throw Error("GPU readback: mapped range unavailable");
  }
  std::memcpy(dst, p, slot->size);
  timing_.gpu_us = -1;
  if (slot->step_ts && n <= slot->buf.size()) {
    uint64_t ts[2];
    std::memcpy(ts, p + ts_off, 16);
    if (ts[1] >= ts[0]) timing_.gpu_us = double(ts[1] - ts[0]) * wgpuQueueGetTimestampPeriod(ctx_.queue()) / 1e3;
  }
  wgpuBufferUnmap(slot->buf.handle());
  timing_.wait_us = double(now_ns() - t0) / 1e3;
}

void Recorder::submit(void* read_dst) {
  ContextCall call(ctx_);
  if (!enc_) throw Error("Recorder::submit without begin()");
  const int64_t t_submit = now_ns();
  end_pass();
  bool step_ts = false;  // the step's timestamps land in staging_ after the read
  if (read_pending_) {
    const uint64_t need = step_timestamps_offset(read_size_) + 16;  // room for the step's two timestamps
    if (!staging_ || staging_.size() < need)
      staging_ = Buffer(ctx_, std::max<uint64_t>(need, 4096), BufferKind::Readback, "step-readback");
    step_ts = record_read_and_timestamps(staging_);
  }
  const uint32_t n_prof = profiling_ ? std::min(n_dispatch_, prof_cap_) : 0;
  const bool prof = n_prof > 0;
  if (prof) {
    wgpuCommandEncoderResolveQuerySet(enc_, queries_, 0, 2 * n_prof, query_resolve_.handle(), 0);
    wgpuCommandEncoderCopyBufferToBuffer(enc_, query_resolve_.handle(), 0, query_read_.handle(), 0,
                                         uint64_t(2 * n_prof) * 8);
  }
  timing_ = StepTiming{};
  finish_submission(t_submit);
  const int64_t t_wait = now_ns();
  if (read_pending_) {
    read_pending_ = false;
    if (!read_dst) throw Error("Recorder::submit: a read was scheduled but no destination given");
    if (step_ts) {
      const uint64_t ts_off = step_timestamps_offset(read_size_);
      std::vector<uint8_t> tmp(ts_off + 16);
      map_read(ctx_, staging_, tmp.data(), tmp.size());
      std::memcpy(read_dst, tmp.data(), read_size_);
      uint64_t ts[2];
      std::memcpy(ts, tmp.data() + ts_off, 16);
      if (ts[1] >= ts[0]) timing_.gpu_us = double(ts[1] - ts[0]) * wgpuQueueGetTimestampPeriod(ctx_.queue()) / 1e3;
    } else {
      map_read(ctx_, staging_, read_dst, read_size_);
    }
  }
  timing_.wait_us = double(now_ns() - t_wait) / 1e3;
  profile_.clear();
  if (prof) {
    std::vector<uint64_t> ts(2 * n_prof);
    map_read(ctx_, query_read_, ts.data(), ts.size() * 8);
    const double period_ns = wgpuQueueGetTimestampPeriod(ctx_.queue());
    for (uint32_t i = 0; i < n_prof; ++i) {
      const double us = double(ts[2 * i + 1] - ts[2 * i]) * period_ns / 1000.0;
      profile_.push_back({labels_[i], us, {}, false});
      if (i < dispatch_log_.size()) dispatch_log_[i].us = us;
    }
  }
}

}  // namespace wgllm::gpu
