// Buffer: a move-only RAII owner of one WebGPU buffer. Copies of GPU memory are always explicit
// (Recorder::copy), never a C++ copy constructor.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "gpu/webgpu.h"

namespace wgllm::gpu {

class Context;

enum class BufferKind {
  Storage,   // STORAGE | COPY_SRC | COPY_DST: kernel inputs/outputs, weights, KV cache, states
  Uniform,   // UNIFORM | COPY_DST: kernel parameters
  Readback,  // MAP_READ | COPY_DST: staging for GPU -> CPU reads
  QueryResolve,  // QUERY_RESOLVE | COPY_SRC: timestamp query results
};

class Buffer {
 public:
  Buffer() = default;
  /// size in bytes (rounded up to a multiple of 4). Throws wgllm::Error if creation fails or the
  /// size exceeds the device's maxBufferSize.
  Buffer(Context& ctx, uint64_t size, BufferKind kind, const std::string& label);
  ~Buffer();
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  WGPUBuffer handle() const { return buf_; }
  uint64_t size() const { return size_; }
  /// Process-unique id of this allocation (never reused, unlike the handle's address); caches
  /// keyed by buffers use it so a freed-and-reallocated handle cannot hit a stale entry.
  uint64_t id() const { return id_; }
  explicit operator bool() const { return buf_ != nullptr; }

  /// Queue a CPU -> GPU write (ordered before later submissions). offset and size multiples of 4.
  void write(Context& ctx, uint64_t offset, const void* data, uint64_t size) const;
  /// Blocking GPU -> CPU read (submits a copy into a staging buffer and waits). For tests/debug;
  /// the generation loop uses Recorder::read_after instead.
  void read(Context& ctx, uint64_t offset, void* dst, uint64_t size) const;

 private:
  WGPUBuffer buf_ = nullptr;
  uint64_t size_ = 0;
  uint64_t id_ = 0;
};

/// Maps a Readback buffer, copies `size` bytes to dst and unmaps (blocks until the GPU is done).
void map_read(Context& ctx, const Buffer& staging, void* dst, uint64_t size);

/// One buffer-to-buffer copy (byte offsets and size multiples of 4).
struct CopyRange {
  const Buffer* src;
  uint64_t src_off;
  const Buffer* dst;
  uint64_t dst_off;
  uint64_t size;
};
/// Records all copies into one command buffer and submits it without waiting: the GPU does them
/// in queue order (later submissions see the results). Errors surface at the next check().
void copy_buffers(Context& ctx, const std::vector<CopyRange>& copies);

}  // namespace wgllm::gpu
