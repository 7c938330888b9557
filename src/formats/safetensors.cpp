// Safetensors reader; format and validation rules: see safetensors.h.
#include "formats/safetensors.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "formats/mapped_file.h"

namespace wgllm {
namespace {

using json = nlohmann::json;
constexpr uint64_t kMaxHeader = 100ull << 20;  // same cap as the reference implementation
constexpr int kMaxDepth = 16;                  // a valid header nests 3 levels deep

struct Ctx {
  const std::string& file;
  [[noreturn]] void fail(const std::string& field, const std::string& msg, uint64_t at) const {
    throw Error("safetensors " + file + ": " + field + ": " + msg + " (at byte offset " +
                std::to_string(at) + ")");
  }
};

/// Deepest [ / { nesting outside JSON strings (bounds the JSON parser's work before it runs).
int max_depth(const char* s, size_t n) {
  int depth = 0, best = 0;
  bool in_str = false;
  for (size_t i = 0; i < n; ++i) {
    const char c = s[i];
    if (in_str) {
      if (c == '\\') ++i;
      else if (c == '"') in_str = false;
    } else if (c == '"') {
      in_str = true;
    } else if (c == '[' || c == '{') {
      best = std::max(best, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return best;
}

bool get_u64(const json& j, uint64_t& out) {
  if (j.is_number_unsigned()) {
    out = j.get<uint64_t>();
    return true;
  }
  if (j.is_number_integer() && j.get<int64_t>() >= 0) {
    out = uint64_t(j.get<int64_t>());
    return true;
  }
  return false;
}

}  // namespace

bool safetensors_dtype(const std::string& s, size_t& elem_bytes, DType& type, bool& has_dtype) {
  struct E { const char* name; size_t bytes; DType type; bool has; };
  static const E table[] = {
      {"F32", 4, DType::F32, true},   {"F16", 2, DType::F16, true},
      {"BF16", 2, DType::BF16, true}, {"F64", 8, DType::F64, true},
      {"I8", 1, DType::I8, true},     {"I16", 2, DType::I16, true},
      {"I32", 4, DType::I32, true},   {"I64", 8, DType::I64, true},
      {"U8", 1, DType::F32, false},   {"U16", 2, DType::F32, false},
      {"U32", 4, DType::F32, false},  {"U64", 8, DType::F32, false},
      {"BOOL", 1, DType::F32, false}, {"F8_E4M3", 1, DType::F32, false},
      {"F8_E5M2", 1, DType::F32, false}, {"F8_E8M0", 1, DType::F32, false},
  };
  for (const E& e : table)
    if (s == e.name) {
      elem_bytes = e.bytes;
      type = e.type;
      has_dtype = e.has;
      return true;
    }
  return false;
}

uint64_t SafetensorsTensor::n_elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;  // validated at open: no overflow
  return n;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) munmap(map_, map_size_);
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  auto [m, size] = detail::map_file(path, "safetensors");
  f->map_ = m;
  f->map_size_ = size;
  f->parse(static_cast<const uint8_t*>(m), size);
  return f;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::from_memory(const uint8_t* data, size_t size,
                                                              const std::string& name) {
  std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = name;
  f->parse(data, size);
  return f;
}

void SafetensorsFile::parse(const uint8_t* data, size_t size) {
  const Ctx c{path_};
  if (!data || size < 8)
    c.fail("header length", "file too short for the 8-byte header length (" + std::to_string(size) +
                                " bytes)", 0);
  uint64_t n;
  std::memcpy(&n, data, 8);  // little-endian host
  if (n > size - 8)
    c.fail("header length", "header length " + std::to_string(n) + " exceeds the " +
                                std::to_string(size - 8) + " bytes after it", 0);
  if (n > kMaxHeader)
    c.fail("header length", "header length " + std::to_string(n) + " exceeds the 100 MiB limit", 0);
  const char* hdr = reinterpret_cast<const char*>(data + 8);
  if (max_depth(hdr, size_t(n)) > kMaxDepth)
    c.fail("header", "JSON nests deeper than " + std::to_string(kMaxDepth) + " levels", 8);

  // Parse, rejecting duplicate top-level keys (nlohmann would silently keep the last one).
  std::set<std::string> seen;
  std::string dup;
  json::parser_callback_t cb = [&](int depth, json::parse_event_t ev, json& parsed) {
    if (ev == json::parse_event_t::key && depth == 1 && dup.empty()) {
      const auto& k = parsed.get_ref<const std::string&>();
      if (!seen.insert(k).second) dup = k;
    }
    return true;
  };
  json h;
  try {
    h = json::parse(hdr, hdr + n, cb);
  } catch (const json::parse_error& e) {
    c.fail("header", std::string("invalid JSON: ") + e.what(), 8 + (e.byte ? e.byte - 1 : 0));
  } catch (const json::exception& e) {
    c.fail("header", std::string("invalid JSON: ") + e.what(), 8);
  }
  if (!h.is_object()) c.fail("header", "JSON header is not an object", 8);
  if (!dup.empty()) c.fail("tensor '" + dup + "'", "duplicate key in header", 8);

  const std::string htext(hdr, size_t(n));
  auto where = [&](const std::string& name) -> uint64_t {  // best-effort offset of the key
    const size_t p = htext.find("\"" + name + "\"");
    return 8 + (p == std::string::npos ? 0 : p);
  };
  const uint64_t buf_start = 8 + n, buf_size = size - buf_start;

  for (const auto& [name, e] : h.items()) {
    if (name == "__metadata__") {
      if (!e.is_object()) c.fail("__metadata__", "must be an object of strings", where(name));
      for (const auto& [k, v] : e.items()) {
        if (!v.is_string())
          c.fail("__metadata__." + k, "metadata values must be strings", where(k));
        metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string field = "tensor '" + name + "'";
    const uint64_t at = where(name);
    if (!e.is_object()) c.fail(field, "entry is not an object", at);
    SafetensorsTensor t;
    t.name = name;
    auto dt = e.find("dtype");
    if (dt == e.end() || !dt->is_string()) c.fail(field, "missing or non-string \"dtype\"", at);
    t.dtype_str = dt->get<std::string>();
    size_t esize = 0;
    if (!safetensors_dtype(t.dtype_str, esize, t.type, t.has_dtype))
      c.fail(field, "unknown dtype \"" + t.dtype_str + "\"", at);
    auto sh = e.find("shape");
    if (sh == e.end() || !sh->is_array()) c.fail(field, "missing or non-array \"shape\"", at);
    uint64_t count = 1;
    for (const json& d : *sh) {
      uint64_t v;
      if (!get_u64(d, v)) c.fail(field, "shape entries must be non-negative integers", at);
      if (v != 0 && count > std::numeric_limits<uint64_t>::max() / v)
        c.fail(field, "shape element count overflows", at);
      count *= v;
      t.hf_shape.push_back(v);
    }
    t.shape.assign(t.hf_shape.rbegin(), t.hf_shape.rend());
    auto off = e.find("data_offsets");
    uint64_t b = 0, en = 0;
    if (off == e.end() || !off->is_array() || off->size() != 2 || !get_u64((*off)[0], b) ||
        !get_u64((*off)[1], en))
      c.fail(field, "\"data_offsets\" must be [begin, end] of non-negative integers", at);
    if (b > en) c.fail(field, "data_offsets begin " + std::to_string(b) + " > end " + std::to_string(en), at);
    if (en > buf_size)
      c.fail(field, "data_offsets end " + std::to_string(en) + " is past the end of the " +
                        std::to_string(buf_size) + "-byte data buffer", buf_start + std::min(b, buf_size));
    if (count > std::numeric_limits<uint64_t>::max() / esize || count * esize != en - b)
      c.fail(field, "data size " + std::to_string(en - b) + " does not match shape x " +
                        t.dtype_str + " (" + std::to_string(esize) + " bytes/element)", buf_start + b);
    t.offset = b;
    t.nbytes = en - b;
    t.data = data + buf_start + b;
    tensors_.push_back(std::move(t));
  }
  // Entries come out of nlohmann's std::map sorted by name; check overlaps in offset order.
  std::vector<size_t> order(tensors_.size());
  for (size_t i = 0; i < order.size(); ++i) {
    order[i] = i;
    index_.emplace(tensors_[i].name, i);
  }
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const SafetensorsTensor &x = tensors_[a], &y = tensors_[b];
    return x.offset != y.offset ? x.offset < y.offset : x.nbytes < y.nbytes;
  });
  // Sorted by offset, a non-empty tensor overlaps an earlier one iff it starts before the largest
  // end seen so far (empty tensors can share offsets with anything).
  uint64_t max_end = 0;
  const SafetensorsTensor* last = nullptr;
  for (size_t k = 0; k < order.size(); ++k) {
    const SafetensorsTensor& b = tensors_[order[k]];
    if (!b.nbytes) continue;
    if (last && b.offset < max_end)
      c.fail("tensor '" + b.name + "'", "data overlaps tensor '" + last->name + "'", buf_start + b.offset);
    if (b.offset + b.nbytes > max_end) {
      max_end = b.offset + b.nbytes;
      last = &b;
    }
  }
  // No holes: the spec requires the byte buffer to be entirely indexed (the reference reader,
  // Metadata::validate, fails with InvalidOffset / MetadataIncompleteBuffer otherwise). Bytes that
  // belong to no tensor mean an entry's dtype or shape does not match the data it was written with.
  uint64_t end = 0;
  last = nullptr;
  for (size_t k = 0; k < order.size(); ++k) {
    const SafetensorsTensor& b = tensors_[order[k]];
    if (b.offset < end)
      c.fail("tensor '" + b.name + "'", "data_offsets begin " + std::to_string(b.offset) + " lies inside tensor '" +
                                            last->name + "'", buf_start + b.offset);
    if (b.offset != end)
      c.fail("tensor '" + b.name + "'",
             "data_offsets begin " + std::to_string(b.offset) + " leaves " + std::to_string(b.offset - end) +
                 " bytes after " + (last ? "tensor '" + last->name + "' (ends at " + std::to_string(end) + ")"
                                         : std::string("the start of the data buffer")) +
                 " that belong to no tensor (the buffer must be entirely indexed)",
             buf_start + end);
    end = b.offset + b.nbytes;
    last = &b;
  }
  if (end != buf_size)
    c.fail(last ? "tensor '" + last->name + "'" : std::string("data buffer"),
           "the " + std::to_string(buf_size) + "-byte data buffer has " + std::to_string(buf_size - end) +
               " bytes after the last tensor's data (ending at " + std::to_string(end) +
               ") that belong to no tensor (the buffer must be entirely indexed)",
           buf_start + end);
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const SafetensorsTensor& SafetensorsFile::tensor(const std::string& name) const {
  const SafetensorsTensor* t = find(name);
  if (!t) throw Error("safetensors " + path_ + ": tensor '" + name + "' not found");
  return *t;
}

}  // namespace wgllm
