// GGUF reader. Spec: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md; validation mirrors
// ggml/src/gguf.cpp (gguf_init_from_file_impl) with stricter bounds checks:
//   header: magic "GGUF", u32 version (2 or 3), u64 n_tensors, u64 n_kv
//   n_kv x { string key, u32 type, value }        string = u64 length + bytes (no NUL)
//   n_tensors x { string name, u32 n_dims, u64 ne[n_dims], u32 ggml_type, u64 offset }
//   padding to general.alignment (default 32), then the tensor data section.
// Every read is bounds-checked against the buffer; counts and lengths are capped by the bytes that
// remain, so a corrupt file costs at most O(file size) work and memory before it is rejected.
// Policy for tensor types: an unknown ggml type id is an error at open; a known type this engine
// cannot dequantize (e.g. q5_K, iq2_xs) opens fine (its size is validated) and only dequantize()
// of that tensor throws.
#include "formats/gguf.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "formats/mapped_file.h"

namespace wgllm {
namespace {

const char* type_name(GgufType t) {
  static const char* names[] = {"uint8", "int8",   "uint16", "int16", "uint32", "int32", "float32",
                                "bool",  "string", "array",  "uint64", "int64", "float64"};
  return uint32_t(t) < 13 ? names[uint32_t(t)] : "invalid";
}

std::string value_type_name(const GgufValue& v) {
  if (v.type != GgufType::ARRAY) return type_name(v.type);
  return std::string("array[") + type_name(v.elem_type) + "]";
}

/// Smallest encoded size of one value of type t (strings: the u64 length).
size_t min_size(GgufType t) {
  switch (t) {
    case GgufType::UINT8: case GgufType::INT8: case GgufType::BOOL: return 1;
    case GgufType::UINT16: case GgufType::INT16: return 2;
    case GgufType::UINT32: case GgufType::INT32: case GgufType::FLOAT32: return 4;
    default: return 8;  // STRING (length), ARRAY (type+count = 12, 8 is a safe lower bound), 64-bit
  }
}

/// Thrown when a streamed header prefix ends before the header does (open_streamed reads more).
struct NeedMore {};

/// Bounds-checked little-endian cursor over the file bytes: `size` bytes at p of a file of
/// `file_size` bytes (larger for a streamed header prefix; the checks against the file's end use
/// file_size, a read past the prefix throws NeedMore).
struct Reader {
  const uint8_t* p;
  size_t size;
  size_t pos = 0;
  const std::string& file;
  uint64_t file_size = 0;

  [[noreturn]] void fail(const std::string& field, const std::string& msg, size_t at) const {
    throw Error("gguf " + file + ": " + field + ": " + msg + " (at byte offset " +
                std::to_string(at) + ")");
  }
  uint64_t remaining() const { return file_size - pos; }
  void need(uint64_t n, const std::string& field, const char* what) const {
    if (n > remaining())
      fail(field, std::string("unexpected end of file reading ") + what + " (need " +
                      std::to_string(n) + " bytes, " + std::to_string(remaining()) + " left)",
           pos);
    if (n > size - pos) throw NeedMore{};
  }
  template <class T>
  T read(const std::string& field, const char* what) {
    need(sizeof(T), field, what);
    T v;
    std::memcpy(&v, p + pos, sizeof(T));  // GGUF is little-endian; so is every supported host
    pos += sizeof(T);
    return v;
  }
  /// Reads a GGUF string; `idx` >= 0 names an array element in errors ("key[idx]").
  std::string str(const std::string& field, const char* what, int64_t idx = -1) {
    const size_t at = pos;
    if (idx >= 0 && remaining() < 8) {
      need(8, field + "[" + std::to_string(idx) + "]", what);
    }
    const uint64_t len = read<uint64_t>(field, what);
    if (len > remaining())
      fail(idx >= 0 ? field + "[" + std::to_string(idx) + "]" : field, std::string(what) + " length " + std::to_string(len) + " exceeds the " +
                      std::to_string(remaining()) + " bytes left in the file",
           at);
    need(len, field, what);
    std::string s(reinterpret_cast<const char*>(p + pos), size_t(len));
    pos += size_t(len);
    return s;
  }
};

GgufType read_type(Reader& r, const std::string& field, const char* what) {
  const size_t at = r.pos;
  const uint32_t t = r.read<uint32_t>(field, what);
  if (t > uint32_t(GgufType::FLOAT64)) r.fail(field, "invalid value type id " + std::to_string(t), at);
  return GgufType(t);
}

/// Reads one scalar of type t (not ARRAY) and widens it into the GgufValue variant.
void read_scalar(Reader& r, GgufType t, GgufValue& out, const std::string& field) {
  switch (t) {
    case GgufType::UINT8: out.v = uint64_t(r.read<uint8_t>(field, "uint8")); break;
    case GgufType::UINT16: out.v = uint64_t(r.read<uint16_t>(field, "uint16")); break;
    case GgufType::UINT32: out.v = uint64_t(r.read<uint32_t>(field, "uint32")); break;
    case GgufType::UINT64: out.v = r.read<uint64_t>(field, "uint64"); break;
    case GgufType::INT8: out.v = int64_t(r.read<int8_t>(field, "int8")); break;
    case GgufType::INT16: out.v = int64_t(r.read<int16_t>(field, "int16")); break;
    case GgufType::INT32: out.v = int64_t(r.read<int32_t>(field, "int32")); break;
    case GgufType::INT64: out.v = r.read<int64_t>(field, "int64"); break;
    case GgufType::FLOAT32: out.v = double(r.read<float>(field, "float32")); break;
    case GgufType::FLOAT64: out.v = r.read<double>(field, "float64"); break;
    case GgufType::BOOL: out.v = r.read<uint8_t>(field, "bool") != 0; break;
    case GgufType::STRING: out.v = r.str(field, "string"); break;
    case GgufType::ARRAY: break;  // handled by the caller
  }
}

GgufValue read_value(Reader& r, GgufType t, const std::string& key) {
  GgufValue out;
  out.type = t;
  if (t != GgufType::ARRAY) {
    read_scalar(r, t, out, key);
    return out;
  }
  const size_t at = r.pos;
  out.elem_type = read_type(r, key, "array element type");
  if (out.elem_type == GgufType::ARRAY) r.fail(key, "arrays of arrays are not supported", at);
  const size_t count_at = r.pos;
  const uint64_t n = r.read<uint64_t>(key, "array length");
  if (n > r.remaining() / min_size(out.elem_type))
    r.fail(key, "array length " + std::to_string(n) + " of " + type_name(out.elem_type) +
                    " exceeds the " + std::to_string(r.remaining()) + " bytes left in the file",
           count_at);
  GgufValue e;
  switch (out.elem_type) {
    case GgufType::STRING: {
      std::vector<std::string> a;
      a.reserve(size_t(n));
      for (uint64_t i = 0; i < n; ++i) a.push_back(r.str(key, "string", int64_t(i)));
      out.v = std::move(a);
      break;
    }
    case GgufType::FLOAT32: case GgufType::FLOAT64: {
      std::vector<double> a(static_cast<size_t>(n));
      for (uint64_t i = 0; i < n; ++i) {
        read_scalar(r, out.elem_type, e, key);
        a[i] = std::get<double>(e.v);
      }
      out.v = std::move(a);
      break;
    }
    default: {  // integers and bool
      std::vector<int64_t> a(static_cast<size_t>(n));
      for (uint64_t i = 0; i < n; ++i) {
        const size_t eat = r.pos;
        read_scalar(r, out.elem_type, e, key);
        if (auto* u = std::get_if<uint64_t>(&e.v)) {
          if (*u > uint64_t(std::numeric_limits<int64_t>::max()))
            r.fail(key + "[" + std::to_string(i) + "]", "uint64 array element exceeds int64 range", eat);
          a[i] = int64_t(*u);
        } else if (auto* s = std::get_if<int64_t>(&e.v)) {
          a[i] = *s;
        } else {
          a[i] = std::get<bool>(e.v) ? 1 : 0;
        }
      }
      out.v = std::move(a);
      break;
    }
  }
  return out;
}

}  // namespace

uint64_t GgufTensor::n_elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;  // validated at open: no overflow
  return n;
}

GgufFile::~GgufFile() {
  if (map_) munmap(map_, map_size_);
}

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  auto [m, size] = detail::map_file(path, "gguf");
  f->map_ = m;
  f->map_size_ = size;
  f->parse(static_cast<const uint8_t*>(m), f->map_size_, f->map_size_);
  return f;
}

std::unique_ptr<GgufFile> GgufFile::open_streamed(const ByteReader& reader) {
  const uint64_t file_size = reader.size();
  uint64_t want = std::min<uint64_t>(file_size, uint64_t(4) << 20);
  for (;;) {
    std::unique_ptr<GgufFile> f(new GgufFile());
    f->path_ = reader.name();
    f->reader_ = &reader;
    std::vector<uint8_t> head(static_cast<size_t>(want));
    if (want) reader.read(0, head.data(), want);
    try {
      f->parse(head.data(), head.size(), file_size);
      return f;
    } catch (const NeedMore&) {
      want = std::min<uint64_t>(file_size, want * 2);  // the header is longer than this prefix
    }
  }
}

std::unique_ptr<GgufFile> GgufFile::from_memory(const uint8_t* data, size_t size,
                                                const std::string& name) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = name;
  f->parse(data, size, size);
  return f;
}

void GgufFile::parse(const uint8_t* data, size_t avail, uint64_t size) {
  static const uint8_t empty = 0;
  Reader r{data ? data : &empty, data ? avail : 0, 0, path_, data ? size : 0};

  // ---- header
  r.need(4, "header", "magic");
  if (std::memcmp(r.p, "GGUF", 4) != 0) r.fail("header", "bad magic (not a GGUF file)", 0);
  r.pos = 4;
  version_ = r.read<uint32_t>("header.version", "version");
  if (version_ != 2 && version_ != 3) {
    const uint32_t swapped = __builtin_bswap32(version_);
    if (swapped == 2 || swapped == 3) r.fail("header.version", "big-endian GGUF is not supported", 4);
    r.fail("header.version",
           "unsupported GGUF version " + std::to_string(version_) + " (supported: 2, 3)", 4);
  }
  const uint64_t n_tensors = r.read<uint64_t>("header.tensor_count", "tensor count");
  const uint64_t n_kv = r.read<uint64_t>("header.metadata_kv_count", "metadata count");
  // Smallest possible entries: kv = key length(8) + type(4) + 1-byte value; tensor info =
  // name length(8) + n_dims(4) + type(4) + offset(8).
  if (n_kv > r.remaining() / 13)
    r.fail("header.metadata_kv_count", "metadata count " + std::to_string(n_kv) +
                                          " cannot fit in the remaining " +
                                          std::to_string(r.remaining()) + " bytes", 16);
  if (n_tensors > r.remaining() / 24)
    r.fail("header.tensor_count", "tensor count " + std::to_string(n_tensors) +
                                     " cannot fit in the remaining " +
                                     std::to_string(r.remaining()) + " bytes", 8);

  // ---- metadata
  size_t alignment_at = 0;
  for (uint64_t i = 0; i < n_kv; ++i) {
    const size_t at = r.pos;
    const std::string field = "metadata[" + std::to_string(i) + "]";
    std::string key = r.str(field, "key");
    const GgufType t = read_type(r, "metadata '" + key + "'", "value type");
    if (kv_.count(key)) r.fail("metadata '" + key + "'", "duplicate metadata key", at);
    if (key == "general.alignment") alignment_at = r.pos;
    GgufValue v = read_value(r, t, "metadata '" + key + "'");
    kv_.emplace(std::move(key), std::move(v));
  }
  if (auto it = kv_.find("general.alignment"); it != kv_.end()) {
    const GgufValue& v = it->second;
    if (v.type != GgufType::UINT32)
      r.fail("metadata 'general.alignment'", "must be uint32, got " + value_type_name(v), alignment_at);
    const uint64_t a = std::get<uint64_t>(v.v);
    if (a == 0 || (a & (a - 1)) != 0)
      r.fail("metadata 'general.alignment'", "alignment " + std::to_string(a) + " is not a power of two",
             alignment_at);
    alignment_ = a;
  }

  // ---- tensor infos
  std::vector<size_t> info_at;
  tensors_.reserve(size_t(n_tensors));
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const size_t at = r.pos;
    GgufTensor t;
    t.name = r.str("tensor[" + std::to_string(i) + "]", "tensor name");
    const std::string field = "tensor '" + t.name + "'";
    if (index_.count(t.name)) r.fail(field, "duplicate tensor name", at);
    const size_t dims_at = r.pos;
    const uint32_t n_dims = r.read<uint32_t>(field, "n_dims");
    if (n_dims > 4) r.fail(field, "n_dims " + std::to_string(n_dims) + " > 4", dims_at);
    uint64_t n = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const size_t dat = r.pos;
      const uint64_t ne = r.read<uint64_t>(field, "dimension");
      if (ne > uint64_t(std::numeric_limits<int64_t>::max()) ||
          (ne != 0 && n > uint64_t(std::numeric_limits<int64_t>::max()) / ne))
        r.fail(field, "shape element count overflows int64 at dimension " + std::to_string(d), dat);
      n *= ne;
      t.shape.push_back(ne);
    }
    const size_t type_at = r.pos;
    const uint32_t type_id = r.read<uint32_t>(field, "type");
    t.type = DType(type_id);
    if (!dtype_known(t.type)) r.fail(field, "unknown ggml type id " + std::to_string(type_id), type_at);
    const uint64_t be = dtype_block_elems(t.type), bb = dtype_block_bytes(t.type);
    const uint64_t row = n_dims ? t.shape[0] : 1;
    if (row % be != 0)
      r.fail(field, "innermost dimension " + std::to_string(row) + " is not a multiple of the " +
                        dtype_name(t.type) + " block size " + std::to_string(be), dims_at);
    if (n / be > std::numeric_limits<uint64_t>::max() / bb)
      r.fail(field, "byte size overflows", dims_at);
    t.nbytes = n / be * bb;
    const size_t off_at = r.pos;
    t.offset = r.read<uint64_t>(field, "offset");
    if (t.offset % alignment_ != 0)
      r.fail(field, "data offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                        std::to_string(alignment_), off_at);
    index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
    info_at.push_back(at);
  }

  // ---- data section
  const uint64_t data_start = (uint64_t(r.pos) + alignment_ - 1) / alignment_ * alignment_;
  for (size_t i = 0; i < tensors_.size(); ++i) {
    GgufTensor& t = tensors_[i];
    const std::string field = "tensor '" + t.name + "'";
    if (data_start > size)
      r.fail(field, "tensor data section (aligned start " + std::to_string(data_start) +
                        ") begins past the end of the file (size " + std::to_string(size) + ")",
             r.pos);
    const uint64_t avail = size - data_start;
    if (t.offset > avail || t.nbytes > avail - t.offset)
      r.fail(field, "data [" + std::to_string(t.offset) + ", +" + std::to_string(t.nbytes) +
                        ") relative to the data section at " + std::to_string(data_start) +
                        " extends past the end of the file (size " + std::to_string(size) + ")",
             info_at[i]);
    t.file_offset = data_start + t.offset;
    t.data = reader_ ? nullptr : r.p + t.file_offset;
  }
  std::vector<size_t> order(tensors_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return tensors_[a].offset < tensors_[b].offset; });
  // Sorted by offset, a non-empty tensor overlaps an earlier one iff it starts before the largest
  // end seen so far (empty tensors can share offsets with anything).
  uint64_t max_end = 0;
  const GgufTensor* last = nullptr;
  for (size_t k = 0; k < order.size(); ++k) {
    const GgufTensor& b = tensors_[order[k]];
    if (!b.nbytes) continue;
    if (last && b.offset < max_end)
      r.fail("tensor '" + b.name + "'", "data overlaps tensor '" + last->name + "'", info_at[order[k]]);
    if (b.offset + b.nbytes > max_end) {
      max_end = b.offset + b.nbytes;
      last = &b;
    }
  }
  // Packed layout. Every GGUF writer (ggml gguf_write, gguf-py GGUFWriter) places each tensor at the
  // previous one's end rounded up to the alignment, starting at 0, and pads the last one; ggml's
  // reader requires exactly that (gguf_init_from_file_impl: "tensor has offset X, expected Y").
  // So bytes that belong to no tensor (a gap of a whole alignment unit or more, before, between
  // or after the tensors) mean a tensor's type or shape disagrees with the data it was written
  // with, e.g. an f32 tensor relabelled f16: refuse instead of reading the wrong bytes.
  auto pad = [&](uint64_t x) { return (x + alignment_ - 1) / alignment_ * alignment_; };
  auto desc = [&](const GgufTensor& t) {
    std::string s = std::string(dtype_name(t.type)) + " {";
    for (size_t d = 0; d < t.shape.size(); ++d) s += (d ? ", " : "") + std::to_string(t.shape[d]);
    return s + "}, " + std::to_string(t.nbytes) + " bytes";
  };
  uint64_t end = 0;  // padded end of the tensors seen so far
  last = nullptr;
  for (size_t k = 0; k < order.size(); ++k) {
    const GgufTensor& b = tensors_[order[k]];
    if (!b.nbytes) continue;
    if (b.offset != end)
      r.fail("tensor '" + b.name + "'",
             "data starts at offset " + std::to_string(b.offset) + " but " +
                 (last ? "the previous tensor '" + last->name + "' (" + desc(*last) + ") ends at " +
                             std::to_string(end) + " with padding"
                       : std::string("the data section starts at offset 0")) +
                 ": " + std::to_string(b.offset - end) +
                 " bytes belong to no tensor (a tensor's type or shape does not match its data)",
             info_at[order[k]]);
    end = pad(b.offset + b.nbytes);
    last = &b;
  }
  if (last && size - data_start > end)
    r.fail("tensor '" + last->name + "'",
           "the file has " + std::to_string(size - data_start - end) + " bytes after the last tensor's data (" +
               desc(*last) + ", ending at data offset " + std::to_string(end) +
               " with padding) that belong to no tensor (a tensor's type or shape does not match its data)",
           info_at[size_t(last - tensors_.data())]);
}

// ---- metadata getters

namespace {
[[noreturn]] void bad_type(const std::string& file, const std::string& key, const GgufValue& v,
                           const char* want) {
  throw Error("gguf " + file + ": metadata '" + key + "' has type " + value_type_name(v) +
              ", expected " + want);
}
}  // namespace

#define WGLLM_GGUF_LOOKUP(key)                                                  \
  auto it_ = kv_.find(key);                                                     \
  if (it_ == kv_.end()) throw Error("gguf " + path_ + ": metadata key '" + key + "' not found"); \
  const GgufValue& v = it_->second

uint64_t GgufFile::get_u64(const std::string& key) const {
  WGLLM_GGUF_LOOKUP(key);
  if (v.type != GgufType::ARRAY) {
    if (auto* u = std::get_if<uint64_t>(&v.v)) return *u;
    if (auto* s = std::get_if<int64_t>(&v.v); s && *s >= 0) return uint64_t(*s);
  }
  bad_type(path_, key, v, "a non-negative integer");
}

int64_t GgufFile::get_i64(const std::string& key) const {
  WGLLM_GGUF_LOOKUP(key);
  if (v.type != GgufType::ARRAY) {
    if (auto* s = std::get_if<int64_t>(&v.v)) return *s;
    if (auto* u = std::get_if<uint64_t>(&v.v); u && *u <= uint64_t(std::numeric_limits<int64_t>::max()))
      return int64_t(*u);
  }
  bad_type(path_, key, v, "an integer in int64 range");
}

double GgufFile::get_f64(const std::string& key) const {
  WGLLM_GGUF_LOOKUP(key);
  if (v.type != GgufType::ARRAY) {
    if (auto* d = std::get_if<double>(&v.v)) return *d;
    if (auto* u = std::get_if<uint64_t>(&v.v)) return double(*u);
    if (auto* s = std::get_if<int64_t>(&v.v)) return double(*s);
  }
  bad_type(path_, key, v, "a number");
}

bool GgufFile::get_bool(const std::string& key) const {
  WGLLM_GGUF_LOOKUP(key);
  if (auto* b = std::get_if<bool>(&v.v)) return *b;
  bad_type(path_, key, v, "bool");
}

const std::string& GgufFile::get_str(const std::string& key) const {
  WGLLM_GGUF_LOOKUP(key);
  if (auto* s = std::get_if<std::string>(&v.v)) return *s;
  bad_type(path_, key, v, "string");
}

const std::vector<std::string>& GgufFile::get_str_array(const std::string& key) const {
  WGLLM_GGUF_LOOKUP(key);
  if (auto* s = std::get_if<std::vector<std::string>>(&v.v)) return *s;
  bad_type(path_, key, v, "array[string]");
}

const std::vector<int64_t>& GgufFile::get_int_array(const std::string& key) const {
  WGLLM_GGUF_LOOKUP(key);
  if (auto* s = std::get_if<std::vector<int64_t>>(&v.v)) return *s;
  bad_type(path_, key, v, "an array of integers");
}

const std::vector<double>& GgufFile::get_float_array(const std::string& key) const {
  WGLLM_GGUF_LOOKUP(key);
  if (auto* s = std::get_if<std::vector<double>>(&v.v)) return *s;
  bad_type(path_, key, v, "an array of floats");
}

#undef WGLLM_GGUF_LOOKUP

uint64_t GgufFile::get_u64_or(const std::string& key, uint64_t def) const {
  return has(key) ? get_u64(key) : def;
}
double GgufFile::get_f64_or(const std::string& key, double def) const {
  return has(key) ? get_f64(key) : def;
}
bool GgufFile::get_bool_or(const std::string& key, bool def) const {
  return has(key) ? get_bool(key) : def;
}
std::string GgufFile::get_str_or(const std::string& key, const std::string& def) const {
  return has(key) ? get_str(key) : def;
}

const GgufTensor* GgufFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensor& GgufFile::tensor(const std::string& name) const {
  const GgufTensor* t = find(name);
  if (!t) throw Error("gguf " + path_ + ": tensor '" + name + "' not found");
  return *t;
}

}  // namespace wgllm
