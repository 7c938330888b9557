// TensorStore: one read-only view over the tensors of a GGUF file or a Hugging Face directory, so
// the model layer loads weights the same way from either.
//   - shape is ggml order (innermost/contiguous first) for both sources; for safetensors that is
//     the reverse of the file's shape (see SafetensorsTensor::hf_shape).
//   - names are the source's own names (GGUF "blk.0.attn_q.weight", HF
//     "model.layers.0.self_attn.q_proj.weight"); mapping between them is the model layer's job.
// Error policy: listing never throws. get()/find() throw wgllm::Error naming the tensor when a
// safetensors tensor has a dtype the engine has no DType for (U8, BOOL, F8_*, ...).
// dequantize_tensor() throws for any type dtype_supported() rejects (e.g. GGUF q5_K, I64).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "formats/dtype.h"
#include "formats/gguf.h"
#include "formats/hf_dir.h"

namespace wgllm {

struct TensorRef {
  std::string name;
  DType type = DType::F32;
  std::vector<uint64_t> shape;  // innermost first (ggml order)
  const uint8_t* data = nullptr;  // stored bytes; valid while the source file/dir lives; nullptr
                                  // for a streamed GGUF (GgufFile::open_streamed): use read()
  uint64_t nbytes = 0;
  const ByteReader* reader = nullptr;  // streamed source: the file, and where the data starts
  uint64_t file_offset = 0;
  uint64_t n_elements() const;
  /// Copies stored bytes [off, off + n) into dst (from the mapping, or through the reader).
  /// Throws wgllm::Error naming the tensor when the range is outside its data.
  void read(uint64_t off, uint64_t n, void* dst) const;
  /// All stored bytes, copied (a streamed tensor's bytes are fetched here).
  std::vector<uint8_t> bytes() const;
};

class TensorStore {
 public:
  /// The source must outlive the store (refs point into its mappings).
  explicit TensorStore(const GgufFile& f);
  explicit TensorStore(const HfDir& d);

  const std::string& source() const { return source_; }
  /// All tensor names, sorted.
  std::vector<std::string> names() const;
  bool has(const std::string& name) const;
  /// nullopt when absent; throws when present but of an unusable dtype.
  std::optional<TensorRef> find(const std::string& name) const;
  /// Throws wgllm::Error naming the tensor and source when absent or of an unusable dtype.
  TensorRef get(const std::string& name) const;

 private:
  struct Entry {
    TensorRef ref;
    std::string error;  // non-empty: why get()/find() refuse this tensor
  };
  const Entry* entry(const std::string& name) const;
  std::string source_;
  std::vector<Entry> entries_;  // sorted by name
};

/// Dequantizes a whole tensor to f32 (n_elements() floats, same element order as stored).
/// Throws wgllm::Error naming the tensor for unsupported types or inconsistent sizes.
std::vector<float> dequantize_tensor(const TensorRef& t);

/// "{a, b, ...}": a tensor shape as error messages print it.
std::string shape_string(const std::vector<uint64_t>& shape);

/// The tensor `name` of ts, whose shape must be one of `shapes` (GGUF order: the input dimension
/// first). Throws wgllm::Error "<source>: missing tensor '<name>'" or "<source>: tensor '<name>' has
/// shape {..}, expected {..}" (the first of shapes).
TensorRef require_tensor(const TensorStore& ts, const std::string& name,
                         const std::vector<std::vector<uint64_t>>& shapes);

}  // namespace wgllm
