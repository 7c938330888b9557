// ByteReader: random-access reads of a model file that is not mapped into memory. The browser
// build's streaming load (web/wasm/engine.cpp) reads the GGUF header through it and each tensor's
// bytes only when the backend uploads that tensor, a window at a time, so the 32-bit wasm heap
// never holds the whole file (GgufFile::open_streamed, TensorRef::read).
#pragma once
#include <cstdint>
#include <string>

namespace wgllm {

class ByteReader {
 public:
  virtual ~ByteReader() = default;
  /// Total file size in bytes.
  virtual uint64_t size() const = 0;
  /// Copies bytes [offset, offset + n) into dst. Throws wgllm::Error naming the source on a short
  /// or failed read (callers never ask past size()).
  virtual void read(uint64_t offset, void* dst, uint64_t n) const = 0;
  /// A name for error messages (file name or URL).
  virtual std::string name() const = 0;
};

}  // namespace wgllm
