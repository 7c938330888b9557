// TensorStore over GGUF / Hugging Face sources; see tensor_store.h.
#include "formats/tensor_store.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"

namespace wgllm {

uint64_t TensorRef::n_elements() const {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

void TensorRef::read(uint64_t off, uint64_t n, void* dst) const {
  if (off > nbytes || n > nbytes - off)
    throw Error("tensor '" + name + "': read of bytes [" + std::to_string(off) + ", +" + std::to_string(n) +
                ") outside its " + std::to_string(nbytes) + " bytes");
  if (!n) return;
  if (data) {
    std::memcpy(dst, data + off, n);
  } else if (reader) {
    reader->read(file_offset + off, dst, n);
  } else {
    throw Error("tensor '" + name + "': no data");
  }
}

std::vector<uint8_t> TensorRef::bytes() const {
  std::vector<uint8_t> v(nbytes);
  read(0, nbytes, v.data());
  return v;
}

TensorStore::TensorStore(const GgufFile& f) : source_(f.path()) {
  for (const GgufTensor& t : f.tensors())
    entries_.push_back({TensorRef{t.name, t.type, t.shape, t.data, t.nbytes, f.reader(), t.file_offset}, {}});
  std::sort(entries_.begin(), entries_.end(),
            [](const Entry& a, const Entry& b) { return a.ref.name < b.ref.name; });
}

TensorStore::TensorStore(const HfDir& d) : source_(d.dir()) {
  for (const SafetensorsTensor* t : d.tensors()) {  // already sorted by name
    Entry e{TensorRef{t->name, t->type, t->shape, t->data, t->nbytes}, {}};
    if (!t->has_dtype)
      e.error = "tensor '" + t->name + "' in " + d.dir() + ": safetensors dtype " + t->dtype_str +
                " is not supported (supported: F32, F16, BF16)";
    entries_.push_back(std::move(e));
  }
}

std::vector<std::string> TensorStore::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const Entry& e : entries_) out.push_back(e.ref.name);
  return out;
}

const TensorStore::Entry* TensorStore::entry(const std::string& name) const {
  auto it = std::lower_bound(entries_.begin(), entries_.end(), name,
                             [](const Entry& e, const std::string& n) { return e.ref.name < n; });
  return it != entries_.end() && it->ref.name == name ? &*it : nullptr;
}

bool TensorStore::has(const std::string& name) const { return entry(name) != nullptr; }

std::optional<TensorRef> TensorStore::find(const std::string& name) const {
  const Entry* e = entry(name);
  if (!e) return std::nullopt;
  if (!e->error.empty()) throw Error(e->error);
  return e->ref;
}

TensorRef TensorStore::get(const std::string& name) const {
  std::optional<TensorRef> r = find(name);
  if (!r) throw Error("tensor '" + name + "' not found in " + source_);
  return *r;
}

std::string shape_string(const std::vector<uint64_t>& shape) {
  std::string r = "{";
  for (size_t i = 0; i < shape.size(); ++i) r += (i ? ", " : "") + std::to_string(shape[i]);
  return r + "}";
}

TensorRef require_tensor(const TensorStore& ts, const std::string& name,
                         const std::vector<std::vector<uint64_t>>& shapes) {
  std::optional<TensorRef> t = ts.find(name);
  if (!t) throw Error(ts.source() + ": missing tensor '" + name + "'");
  for (const auto& s : shapes)
    if (t->shape == s) return *t;
  throw Error(ts.source() + ": tensor '" + name + "' has shape " + shape_string(t->shape) + ", expected " +
              shape_string(shapes.at(0)));
}

std::vector<float> dequantize_tensor(const TensorRef& t) {
  if (!dtype_supported(t.type))
    throw Error("tensor '" + t.name + "': cannot dequantize type " + dtype_name(t.type) +
                " (supported: f32, f16, bf16, q8_0, q4_0, q4_1, q4_K, q6_K)");
  const uint64_t n = t.n_elements();
  uint64_t need = 0;
  try {
    need = dtype_row_bytes(t.type, n);
  } catch (const Error& e) {
    throw Error("tensor '" + t.name + "': " + e.what());
  }
  if (need != t.nbytes)
    throw Error("tensor '" + t.name + "': " + std::to_string(t.nbytes) + " bytes stored but " +
                std::to_string(need) + " needed for " + std::to_string(n) + " " + dtype_name(t.type) +
                " elements");
  std::vector<float> out(n);
  if (t.data) {
    dequantize(t.type, t.data, out.data(), n);
  } else {
    const std::vector<uint8_t> stored = t.bytes();  // a streamed tensor (norms, biases: small)
    dequantize(t.type, stored.data(), out.data(), n);
  }
  return out;
}

}  // namespace wgllm
