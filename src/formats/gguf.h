// GGUF model file reader (memory-mapped).
// Format: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md (versions 2 and 3, little-endian).
// All parsing errors throw wgllm::Error naming the file, the field (key or tensor name) and the byte
// offset; a truncated, corrupt or unsupported file never crashes the process (fuzzed: fuzz/fuzz_gguf).
// Tensor type policy: an unknown ggml type id fails at open; a known type the engine cannot
// dequantize (q5_K, iq*, ...) opens fine with its size validated, and only dequantize() /
// dequantize_tensor() of that tensor throws (naming tensor and type).
// Validated at open: magic, version 2/3 (1, >=4 and big-endian are rejected), counts vs remaining
// bytes, unique keys, unique tensor names, n_dims <= 4, element count fits int64, innermost dim a
// multiple of the block size, general.alignment (uint32 power of two, default 32), offsets aligned,
// data inside the file, no two tensors' data overlapping, and the packed layout every writer
// produces (and ggml's reader requires): sorted by offset, each tensor starts where the previous
// one ends, padded to the alignment, the first at 0, and no bytes after the last one's padding; a
// gap means a tensor's type or shape does not match its data. Arrays of arrays are rejected.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "formats/byte_reader.h"
#include "formats/dtype.h"

namespace wgllm {

/// GGUF metadata value types (spec: gguf_metadata_value_type).
enum class GgufType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};

/// One metadata value. Scalars are widened: integers to int64/uint64, floats to double.
/// Arrays keep their element type in elem_type; storage: strings -> std::vector<std::string>,
/// integer and bool elements -> std::vector<int64_t> (a uint64 element > INT64_MAX is an error),
/// float32/float64 elements -> std::vector<double>.
struct GgufValue {
  GgufType type = GgufType::UINT8;
  GgufType elem_type = GgufType::UINT8;  // for ARRAY
  std::variant<uint64_t, int64_t, double, bool, std::string, std::vector<std::string>,
               std::vector<int64_t>, std::vector<double>>
      v;
};

/// A tensor as stored in the file. shape is in GGUF/ggml order: shape[0] is the innermost
/// (contiguous) dimension, i.e. a weight matrix W[out][in] has shape = {in, out}.
struct GgufTensor {
  std::string name;
  DType type = DType::F32;
  std::vector<uint64_t> shape;
  uint64_t offset = 0;      // relative to the start of the tensor data section
  uint64_t nbytes = 0;      // bytes of the stored (possibly quantized) data
  const uint8_t* data = nullptr;  // points into the mapping (aligned to alignment() relative to the
                                  // file start); valid while the GgufFile lives. nullptr when the
                                  // file was opened streamed (open_streamed): read via file_offset.
  uint64_t file_offset = 0;       // absolute byte offset of the data in the file
  uint64_t n_elements() const;
};

class GgufFile {
 public:
  /// Opens and validates the whole header and tensor table (names, types, shapes, offsets within
  /// the file, alignment). Throws wgllm::Error on any problem.
  static std::unique_ptr<GgufFile> open(const std::string& path);
  /// Parses from a caller-owned buffer (used by the fuzzer and tests); `data` must outlive the object.
  static std::unique_ptr<GgufFile> from_memory(const uint8_t* data, size_t size,
                                               const std::string& name = "<memory>");
  /// Opens a file that is read through `reader` instead of being mapped: only the header and
  /// tensor table are read (a growing prefix: 4 MiB, doubled until it holds the whole table) and
  /// validated exactly as open() does; tensor data stays in the file (GgufTensor::data is null,
  /// TensorRef::read fetches it). The reader must outlive the object.
  static std::unique_ptr<GgufFile> open_streamed(const ByteReader& reader);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  const std::map<std::string, GgufValue>& metadata() const { return kv_; }
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  /// The reader of a streamed file (open_streamed), else nullptr.
  const ByteReader* reader() const { return reader_; }

  bool has(const std::string& key) const { return kv_.count(key) != 0; }
  /// Typed getters: throw wgllm::Error naming the key if missing or of an incompatible type.
  uint64_t get_u64(const std::string& key) const;
  int64_t get_i64(const std::string& key) const;
  double get_f64(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  const std::string& get_str(const std::string& key) const;
  const std::vector<std::string>& get_str_array(const std::string& key) const;
  const std::vector<int64_t>& get_int_array(const std::string& key) const;  // any integer elem type
  const std::vector<double>& get_float_array(const std::string& key) const;
  /// Getters with a default when the key is absent (still throw on a type mismatch).
  uint64_t get_u64_or(const std::string& key, uint64_t def) const;
  double get_f64_or(const std::string& key, double def) const;
  bool get_bool_or(const std::string& key, bool def) const;
  std::string get_str_or(const std::string& key, const std::string& def) const;

  /// nullptr when absent.
  const GgufTensor* find(const std::string& name) const;
  /// Throws wgllm::Error naming the tensor when absent.
  const GgufTensor& tensor(const std::string& name) const;

 private:
  GgufFile() = default;
  // size: bytes at data; file_size: the whole file's (> size for a streamed header prefix: a read
  // past `size` throws NeedMore, the data section is checked against file_size).
  void parse(const uint8_t* data, size_t size, uint64_t file_size);
  std::string path_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::map<std::string, GgufValue> kv_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t> index_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  const ByteReader* reader_ = nullptr;
};

}  // namespace wgllm
