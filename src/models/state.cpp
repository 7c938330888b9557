#include "models/state.h"

#include <cstring>

#include "core/error.h"
#include "gpu/context.h"
#include "kernels/sparse_attention.h"

namespace wgllm {

StateArray::StateArray(gpu::Context* ctx, std::string name, uint64_t rows, uint64_t row_floats)
    : ctx_(ctx), name_(std::move(name)), rows_(rows), row_floats_(row_floats) {
  if (ctx_) {
    // WebGPU zero-initialises buffers: an empty state, as the host vector.
    if (bytes()) buf_ = gpu::Buffer(*ctx_, bytes(), gpu::BufferKind::Storage, name_);
  } else {
    host_.assign(rows_ * row_floats_, 0.0f);
  }
}

StateArray::StateArray(gpu::Context* ctx, std::string name, std::shared_ptr<const gpu::Buffer> pool, uint64_t offset,
                       uint64_t rows, uint64_t row_floats)
    : ctx_(ctx), name_(std::move(name)), rows_(rows), row_floats_(row_floats), pool_(std::move(pool)), offset_(offset) {
  if (!ctx_ || !pool_ || offset_ + bytes() > pool_->size()) throw Error("state '" + name_ + "': pooled range out of its buffer");
}

float* StateArray::host() {
  if (ctx_) throw Error("state '" + name_ + "' lives on the GPU, not on the host");
  return host_.data();
}

const float* StateArray::host() const {
  if (ctx_) throw Error("state '" + name_ + "' lives on the GPU, not on the host");
  return host_.data();
}

const gpu::Buffer& StateArray::buffer() const {
  if (!ctx_) throw Error("state '" + name_ + "' lives on the host, not on the GPU");
  return pool_ ? *pool_ : buf_;
}

std::vector<uint8_t> StateArray::read(uint64_t n) const {
  if (n > bytes()) throw Error("state '" + name_ + "': read past the end");
  std::vector<uint8_t> out(n);
  if (!n) return out;
  if (ctx_)
    buffer().read(*ctx_, offset_, out.data(), n);
  else
    std::memcpy(out.data(), host_.data(), n);
  return out;
}

void StateArray::write(const std::vector<uint8_t>& src) {
  if (src.size() > bytes() || src.size() % 4) throw Error("state '" + name_ + "': write out of range");
  if (src.empty()) return;
  if (ctx_)
    buffer().write(*ctx_, offset_, src.data(), src.size());
  else
    std::memcpy(host_.data(), src.data(), src.size());
}

SnapshotStore::SnapshotStore(gpu::Context* ctx, uint64_t bytes) : ctx_(ctx), bytes_(bytes) {
  if (!bytes_) return;
  if (ctx_)
    buf_ = gpu::Buffer(*ctx_, bytes_, gpu::BufferKind::Storage, "state_snapshot");
  else
    host_.resize(bytes_);
}

std::vector<uint8_t> SnapshotStore::read(uint64_t off, uint64_t n) const {
  if (off > bytes_ || n > bytes_ - off) throw Error("state snapshot: read out of range");
  std::vector<uint8_t> out(n);
  if (!n) return out;
  if (ctx_)
    buf_.read(*ctx_, off, out.data(), n);
  else
    std::memcpy(out.data(), host_.data() + off, n);
  return out;
}

void SnapshotStore::write(uint64_t off, const std::vector<uint8_t>& src) {
  if (off > bytes_ || src.size() > bytes_ - off || src.size() % 4 || off % 4)
    throw Error("state snapshot: write out of range");
  if (src.empty()) return;
  if (ctx_)
    buf_.write(*ctx_, off, src.data(), src.size());
  else
    std::memcpy(host_.data() + off, src.data(), src.size());
}

uint64_t StateCopier::next(const StateArray& a) {
  const uint64_t n = a.bytes(), off = off_;
  if (n > store_.bytes_ - off_) throw Error("state snapshot: '" + a.name() + "' does not fit the snapshot's layout");
  if (n && a.on_gpu() != (store_.ctx_ != nullptr)) throw Error("state snapshot: '" + a.name() + "' on another backend");
  off_ += n;  // array bytes are multiples of 4: regions stay aligned
  return off;
}

void StateCopier::save(const StateArray& a) {
  const uint64_t off = next(a), n = a.bytes();
  if (!n) return;
  if (store_.ctx_)
    gpu_.push_back({&a.buffer(), a.offset(), &store_.buf_, off, n});
  else
    std::memcpy(store_.host_.data() + off, a.host(), n);
}

void StateCopier::load(StateArray& a) {
  const uint64_t off = next(a), n = a.bytes();
  if (!n) return;
  if (store_.ctx_)
    gpu_.push_back({&store_.buf_, off, &a.buffer(), a.offset(), n});
  else
    std::memcpy(a.host(), store_.host_.data() + off, n);
}

std::vector<gpu::CopyRange> StateCopier::take() {
  if (off_ != store_.bytes_) throw Error("state snapshot: the layout does not match this sequence");
  return std::move(gpu_);
}

void StateCopier::submit() {
  if (off_ != store_.bytes_) throw Error("state snapshot: the layout does not match this sequence");
  if (!gpu_.empty()) gpu::copy_buffers(*store_.ctx_, gpu_);
  gpu_.clear();
}

uint64_t LayerState::bytes() const {
  uint64_t b = 0;
  for (const StateArray& a : arrays_) b += a.bytes();
  return b;
}

void LayerState::snapshot(StateCopier& c) const {
  if (by_length()) return;
  for (const StateArray& a : arrays_) c.save(a);
}

void LayerState::restore(StateCopier& c) {
  if (by_length()) return;
  for (StateArray& a : arrays_) c.load(a);
}

std::vector<StateBlob> LayerState::export_state(uint32_t n_past) const {
  std::vector<StateBlob> out;
  for (const StateArray& a : arrays_)
    out.push_back({a.name(), a.read(by_length() ? uint64_t(n_past) * a.row_bytes() : a.bytes())});
  return out;
}

std::vector<const StateBlob*> LayerState::check_import(uint32_t n_past, const std::vector<StateBlob>& blobs) const {
  std::vector<const StateBlob*> out;
  for (const StateArray& a : arrays_) {
    if (by_length() && n_past > a.rows())
      throw Error("state '" + a.name() + "': " + std::to_string(n_past) + " rows do not fit " + std::to_string(a.rows()));
    const uint64_t want = by_length() ? uint64_t(n_past) * a.row_bytes() : a.bytes();
    const StateBlob* found = nullptr;
    for (const StateBlob& b : blobs)
      if (b.name == a.name()) found = &b;
    if (!found) throw Error("state '" + a.name() + "' is missing");
    if (found->data.size() != want)
      throw Error("state '" + a.name() + "' holds " + std::to_string(found->data.size()) + " bytes, expected " +
                  std::to_string(want));
    out.push_back(found);
  }
  return out;
}

void LayerState::import_state(const std::vector<const StateBlob*>& checked) {
  if (checked.size() != arrays_.size()) throw Error("state import: wrong number of arrays");
  for (size_t i = 0; i < arrays_.size(); ++i) arrays_[i].write(checked[i]->data);
  imported();
}

namespace {
std::string prefix(uint32_t layer, const char* module) { return "layers." + std::to_string(layer) + "." + module + "."; }
}  // namespace

KvState::KvState(gpu::Context* ctx, uint32_t layer, uint32_t context, uint32_t kv_dim) : LayerState(layer) {
  const std::string p = prefix(layer, "self_attn");
  arrays_.emplace_back(ctx, p + "keys", context, kv_dim);
  arrays_.emplace_back(ctx, p + "values", context, kv_dim);
}

KvState::KvState(gpu::Context* ctx, uint32_t layer, uint32_t context, uint32_t kv_dim,
                 std::shared_ptr<const gpu::Buffer> k_pool, std::shared_ptr<const gpu::Buffer> v_pool, uint64_t base_row)
    : LayerState(layer) {
  const std::string p = prefix(layer, "self_attn");
  const uint64_t off = base_row * kv_dim * 4;
  arrays_.emplace_back(ctx, p + "keys", std::move(k_pool), off, context, kv_dim);
  arrays_.emplace_back(ctx, p + "values", std::move(v_pool), off, context, kv_dim);
}

KvState::~KvState() = default;

void KvState::set_sparse_means(kernels::SparseMeansCache cache) {
  means_ = std::make_unique<kernels::SparseMeansCache>(std::move(cache));
}

void KvState::imported() {
  if (means_) means_->reset();
}

ConvState::ConvState(gpu::Context* ctx, uint32_t layer, uint32_t rows, uint32_t width) : LayerState(layer) {
  arrays_.emplace_back(ctx, prefix(layer, "conv") + "conv_state", rows, width);
}

DeltaState::DeltaState(gpu::Context* ctx, uint32_t layer, uint32_t conv_rows, uint32_t conv_dim, uint32_t nv,
                       uint32_t dk, uint32_t dv)
    : LayerState(layer) {
  const std::string p = prefix(layer, "linear_attn");
  arrays_.emplace_back(ctx, p + "conv_state", conv_rows, conv_dim);
  arrays_.emplace_back(ctx, p + "recurrent_state", uint64_t(nv) * dk, dv);
}

std::string state_name_from_v1(const std::string& name, const std::vector<std::unique_ptr<LayerState>>& states) {
  // "blk.<N>.<tag>"
  if (name.rfind("blk.", 0) != 0) return name;
  const size_t dot = name.find('.', 4);
  if (dot == std::string::npos || dot == 4 || dot - 4 > 9) return name;
  uint32_t n = 0;
  for (size_t i = 4; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9') return name;
    n = n * 10 + uint32_t(name[i] - '0');
  }
  const std::string tag = name.substr(dot + 1);
  for (const auto& s : states) {
    if (!s || s->layer() != n) continue;
    const std::string kind = s->kind();
    const size_t i = kind == "kv" ? (tag == "k" ? 0 : tag == "v" ? 1 : 2)
                   : kind == "conv" ? (tag == "conv" ? 0 : 2)
                                    : (tag == "conv" ? 0 : tag == "ssm" ? 1 : 2);
    if (i < s->arrays().size()) return s->arrays()[i].name();
  }
  return name;
}

}  // namespace wgllm
