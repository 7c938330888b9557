// Safetensors file reader (memory-mapped).
// Format: https://github.com/huggingface/safetensors (README "Format"):
//   u64 little-endian N, then N bytes of UTF-8 JSON header, then the byte buffer.
//   header = { "<tensor name>": {"dtype": "F32", "shape": [d0, d1, ...], "data_offsets": [b, e]},
//              ..., "__metadata__": {"<str>": "<str>", ...} (optional) }
//   data_offsets are relative to the start of the byte buffer; data is row-major (C order),
//   little-endian.
// Validation at open: header length within the file (and <= 100 MiB), valid JSON object, each
// tensor entry well-formed, known dtype, shape product * element size without overflow equal to
// e - b, [b, e) inside the buffer, no two tensors overlapping, no duplicate names, and (as the
// spec and the reference reader require) no holes: sorted by offset the tensors cover the whole
// buffer back to back, so bytes outside every tensor (an entry whose dtype or shape was changed)
// are an error.
// All errors throw wgllm::Error naming the file, the tensor/field and the byte offset.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "formats/dtype.h"

namespace wgllm {

struct SafetensorsTensor {
  std::string name;
  std::string dtype_str;  // as written in the file: "F32", "F16", "BF16", "I64", "F8_E4M3", ...
  /// Engine dtype: F32/F16/BF16 (supported), I8/I16/I32/I64/F64 (known to DType, not
  /// dequantizable). Meaningless when has_dtype is false (U8, BOOL, U16..U64, F8_*).
  DType type = DType::F32;
  bool has_dtype = false;
  /// ggml order, innermost (contiguous) dimension first, like GgufTensor::shape: an HF Linear
  /// weight [out_features, in_features] has shape = {in_features, out_features}.
  std::vector<uint64_t> shape;
  /// The file's (PyTorch / Hugging Face) order, outermost first: hf_shape = reverse(shape).
  std::vector<uint64_t> hf_shape;
  uint64_t offset = 0;            // start within the data buffer (data_offsets[0])
  uint64_t nbytes = 0;            // data_offsets[1] - data_offsets[0]
  const uint8_t* data = nullptr;  // into the mapping; valid while the SafetensorsFile lives
  uint64_t n_elements() const;
  /// True for F32/F16/BF16, the dtypes the engine loads.
  bool supported() const { return has_dtype && dtype_supported(type); }
};

class SafetensorsFile {
 public:
  /// Maps and validates the file. Throws wgllm::Error (file, tensor/field, byte offset).
  static std::unique_ptr<SafetensorsFile> open(const std::string& path);
  /// Parses a caller-owned buffer (fuzzer, tests); `data` must outlive the object.
  static std::unique_ptr<SafetensorsFile> from_memory(const uint8_t* data, size_t size,
                                                      const std::string& name = "<memory>");
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  /// "__metadata__" string map (empty when absent).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  /// All tensors, sorted by name.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  /// nullptr when absent.
  const SafetensorsTensor* find(const std::string& name) const;
  /// Throws wgllm::Error naming the tensor and file when absent.
  const SafetensorsTensor& tensor(const std::string& name) const;

 private:
  SafetensorsFile() = default;
  void parse(const uint8_t* data, size_t size);
  std::string path_;
  std::map<std::string, std::string> metadata_;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, size_t> index_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
};

/// Maps a safetensors dtype string to (element bytes, DType, has_dtype). Returns false for
/// strings not in the safetensors spec.
bool safetensors_dtype(const std::string& s, size_t& elem_bytes, DType& type, bool& has_dtype);

}  // namespace wgllm
