#include "gpu/buffer.h"

#include <atomic>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "gpu/context.h"

namespace wgllm::gpu {

Buffer::Buffer(Context& ctx, uint64_t size, BufferKind kind, const std::string& label) {
  ContextCall call(ctx);
  size = (std::max<uint64_t>(size, 4) + 3) & ~uint64_t(3);
  if (size > ctx.info().limits.maxBufferSize)
    throw Error("GPU buffer '" + label + "' of " + std::to_string(size) +
                " bytes exceeds the device limit maxBufferSize=" +
                std::to_string(ctx.info().limits.maxBufferSize));
  WGPUBufferDescriptor d = WGPU_BUFFER_DESCRIPTOR_INIT;
  d.label = sv(label);
  d.size = size;
  switch (kind) {
    case BufferKind::Storage:
      d.usage = WGPUBufferUsage_Storage | WGPUBufferUsage_CopySrc | WGPUBufferUsage_CopyDst;
      break;
    case BufferKind::Uniform: d.usage = WGPUBufferUsage_Uniform | WGPUBufferUsage_CopyDst; break;
    case BufferKind::Readback: d.usage = WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst; break;
    case BufferKind::QueryResolve: d.usage = WGPUBufferUsage_QueryResolve | WGPUBufferUsage_CopySrc; break;
  }
  buf_ = wgpuDeviceCreateBuffer(ctx.device(), &d);
  if (!buf_) throw Error("GPU buffer '" + label + "': creation failed (" + std::to_string(size) + " bytes)");
  size_ = size;
  static std::atomic<uint64_t> next_id{1};
  id_ = next_id++;
  ctx.check();
}

Buffer::~Buffer() {
  if (buf_) {
    wgpuBufferDestroy(buf_);
    wgpuBufferRelease(buf_);
  }
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    if (buf_) {
      wgpuBufferDestroy(buf_);
      wgpuBufferRelease(buf_);
    }
    buf_ = std::exchange(o.buf_, nullptr);
    size_ = std::exchange(o.size_, 0);
    id_ = std::exchange(o.id_, 0);
  }
  return *this;
}

void Buffer::write(Context& ctx, uint64_t offset, const void* data, uint64_t size) const {
  ContextCall call(ctx);
  if (offset + size > size_) throw Error("GPU buffer write out of range");
  if (size % 4 == 0) {
    wgpuQueueWriteBuffer(ctx.queue(), buf_, offset, data, size);
  } else {  // WebGPU requires multiples of 4 bytes: pad the tail with zeros
    std::string tmp(static_cast<const char*>(data), size);
    tmp.resize((size + 3) & ~uint64_t(3), '\0');
    wgpuQueueWriteBuffer(ctx.queue(), buf_, offset, tmp.data(), tmp.size());
  }
}

void map_read(Context& ctx, const Buffer& staging, void* dst, uint64_t size) {
  ContextCall call(ctx);
  struct St { bool done = false; WGPUMapAsyncStatus status{}; std::string msg; } st;
  WGPUBufferMapCallbackInfo cb = WGPU_BUFFER_MAP_CALLBACK_INFO_INIT;
  cb.mode = WGPUCallbackMode_AllowProcessEvents;
  cb.callback = [](WGPUMapAsyncStatus s, WGPUStringView m, void* u1, void*) {
    auto* p = static_cast<St*>(u1);
    p->done = true;
    p->status = s;
    p->msg = str(m);
  };
  cb.userdata1 = &st;
  uint64_t sz = (size + 3) & ~uint64_t(3);
  wgpuBufferMapAsync(staging.handle(), WGPUMapMode_Read, 0, sz, cb);
  while (!st.done) {
    ctx.poll_wait();
    ctx.check();
  }
  if (st.status != WGPUMapAsyncStatus_Success) throw Error("GPU readback failed: " + st.msg);
  const void* p = wgpuBufferGetConstMappedRange(staging.handle(), 0, sz);
  if (!p) throw Error("GPU readback: mapped range unavailable");
  std::memcpy(dst, p, size);
  wgpuBufferUnmap(staging.handle());
}

void Buffer::read(Context& ctx, uint64_t offset, void* dst, uint64_t size) const {
  ContextCall call(ctx);
  uint64_t sz = (size + 3) & ~uint64_t(3);
  Buffer staging(ctx, sz, BufferKind::Readback, "readback");
  WGPUCommandEncoder enc = wgpuDeviceCreateCommandEncoder(ctx.device(), nullptr);
  wgpuCommandEncoderCopyBufferToBuffer(enc, buf_, offset, staging.handle(), 0, sz);
  WGPUCommandBuffer cmd = wgpuCommandEncoderFinish(enc, nullptr);
  wgpuQueueSubmit(ctx.queue(), 1, &cmd);
  wgpuCommandBufferRelease(cmd);
  wgpuCommandEncoderRelease(enc);
  map_read(ctx, staging, dst, size);
}

void copy_buffers(Context& ctx, const std::vector<CopyRange>& copies) {
  ContextCall call(ctx);
  if (copies.empty()) return;
  WGPUCommandEncoder enc = wgpuDeviceCreateCommandEncoder(ctx.device(), nullptr);
  for (const CopyRange& c : copies) {
    if (c.src_off + c.size > c.src->size() || c.dst_off + c.size > c.dst->size() || c.size % 4 || c.src_off % 4 ||
        c.dst_off % 4) {
      wgpuCommandEncoderRelease(enc);
      throw Error("GPU copy out of range or unaligned");
    }
    wgpuCommandEncoderCopyBufferToBuffer(enc, c.src->handle(), c.src_off, c.dst->handle(), c.dst_off, c.size);
  }
  WGPUCommandBuffer cmd = wgpuCommandEncoderFinish(enc, nullptr);
  wgpuQueueSubmit(ctx.queue(), 1, &cmd);
  wgpuCommandBufferRelease(cmd);
  wgpuCommandEncoderRelease(enc);
}

}  // namespace wgllm::gpu
