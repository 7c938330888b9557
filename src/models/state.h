// Per-layer sequence state (the idea of mlx-lm's make_cache()): a model's new_sequence() builds one
// state object per layer and the generic Sequence (models/model.h) snapshots, restores, exports and
// imports them all without knowing the architecture.
//   KvState     keys and values of one attention layer, [context, kv_dim] f32 each. Rolled back by
//               the sequence's length counter: snapshots copy nothing, rows past n_past are ignored
//               by the attention mask and overwritten later; files hold rows [0, n_past).
//   ConvState   LFM2 short-conv state [L - 1, d_model] f32 (the last L-1 rows of B*x, oldest
//               first); copied as is.
//   DeltaState  Qwen3.5 Gated DeltaNet: conv state [conv_k - 1, conv_dim] f32 (oldest first) and
//               recurrent state [nv, dk, dv] f32; copied as is.
// Each array lives on the host (CPU backend) or in one GPU buffer (WebGPU backend; zeroed at
// creation like the host vectors). Names follow the reference model's module paths, so a dump
// can be diffed against transformers / mlx-lm tensor by tensor:
//   layers.N.self_attn.keys / layers.N.self_attn.values      (KvState)
//   layers.N.conv.conv_state                                  (ConvState)
//   layers.N.linear_attn.conv_state / .recurrent_state        (DeltaState)
// The names are also the blob names of session files (version 2) and GPU buffer labels.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gpu/buffer.h"
#include "gpu/recorder.h"

namespace wgllm {

namespace gpu { class Context; }
namespace kernels { struct SparseMeansCache; }

/// One named piece of a sequence's state as host bytes (files, Sequence::export_state).
struct StateBlob {
  std::string name;
  std::vector<uint8_t> data;
};

/// One array of a layer's state: `rows` rows of `row_floats` f32, on the host (ctx == nullptr) or
/// in one GPU storage buffer labelled with the array's name, or in a range of a buffer shared by
/// several sequences (a KV pool, KvPool). Move-only (copies are snapshots).
class StateArray {
 public:
  StateArray(gpu::Context* ctx, std::string name, uint64_t rows, uint64_t row_floats);
  /// A view of bytes [offset, offset + rows * row_floats * 4) of a shared GPU buffer (offset a
  /// multiple of the device's minStorageBufferOffsetAlignment and of the row bytes).
  StateArray(gpu::Context* ctx, std::string name, std::shared_ptr<const gpu::Buffer> pool, uint64_t offset, uint64_t rows,
             uint64_t row_floats);
  StateArray(StateArray&&) = default;
  StateArray& operator=(StateArray&&) = default;
  const std::string& name() const { return name_; }
  uint64_t rows() const { return rows_; }
  uint64_t row_bytes() const { return row_floats_ * 4; }
  uint64_t bytes() const { return rows_ * row_floats_ * 4; }
  bool on_gpu() const { return ctx_ != nullptr; }
  /// Host storage (CPU backend; throws wgllm::Error on GPU storage).
  float* host();
  const float* host() const;
  /// GPU storage (WebGPU backend; throws wgllm::Error on host storage): the whole buffer, which
  /// for a pooled array holds other sequences' arrays too (bind binding(), not buffer()).
  const gpu::Buffer& buffer() const;
  /// Byte offset of the array in buffer() (0 unless pooled).
  uint64_t offset() const { return offset_; }
  /// The array's range of buffer() as a storage binding.
  gpu::Binding binding() const { return gpu::Binding(buffer(), offset_, bytes()); }
  /// Whether the array is a view of a buffer shared with other sequences.
  bool pooled() const { return pool_ != nullptr; }
  /// Host copy of the first n bytes (a blocking GPU read on GPU storage: files only).
  std::vector<uint8_t> read(uint64_t n) const;
  /// Overwrites the first src.size() bytes (<= bytes(), a multiple of 4; a queued write on GPU).
  void write(const std::vector<uint8_t>& src);

 private:
  gpu::Context* ctx_ = nullptr;
  std::string name_;
  uint64_t rows_ = 0, row_floats_ = 0;
  std::vector<float> host_;
  gpu::Buffer buf_;
  std::shared_ptr<const gpu::Buffer> pool_;  // pooled: the shared buffer (buf_ unused)
  uint64_t offset_ = 0;
};

/// Room for copies of state arrays made by snapshots: one host byte vector or one GPU buffer
/// (packed, each region 4-byte aligned). GPU copies into and out of it are recorded by a
/// StateCopier and submitted together.
class SnapshotStore {
 public:
  SnapshotStore() = default;
  SnapshotStore(gpu::Context* ctx, uint64_t bytes);
  uint64_t bytes() const { return bytes_; }
  /// Host copy of bytes [off, off + n) (a blocking GPU read on GPU storage: files only).
  std::vector<uint8_t> read(uint64_t off, uint64_t n) const;
  /// Writes src at off (queued on GPU).
  void write(uint64_t off, const std::vector<uint8_t>& src);

 private:
  friend class StateCopier;
  gpu::Context* ctx_ = nullptr;
  uint64_t bytes_ = 0;
  std::vector<uint8_t> host_;
  gpu::Buffer buf_;
};

/// Copies whole arrays into or out of consecutive regions of a SnapshotStore, in call order (the
/// layer states' snapshot()/restore() take their regions one after the other). Host copies run at
/// once; GPU->GPU copies are recorded and submitted as one command buffer by submit() (no wait: the
/// queue orders them before every later forward).
class StateCopier {
 public:
  explicit StateCopier(SnapshotStore& store) : store_(store) {}
  /// Copies a into the next region of a.bytes() bytes (snapshot).
  void save(const StateArray& a);
  /// Copies the next region of a.bytes() bytes into a (restore).
  void load(StateArray& a);
  /// Byte offset of the next region.
  uint64_t offset() const { return off_; }
  /// Submits the recorded GPU copies (one submission); throws wgllm::Error if the regions did not
  /// add up to the store's size.
  void submit();
  /// As submit(), returning the recorded GPU copies for the caller to record instead (e.g. into a
  /// forward's own submission, gpu::Recorder::copy_on_begin).
  std::vector<gpu::CopyRange> take();

 private:
  /// The next region for a (checked), then advances past it.
  uint64_t next(const StateArray& a);
  SnapshotStore& store_;
  uint64_t off_ = 0;
  std::vector<gpu::CopyRange> gpu_;
};

/// One layer's state: a fixed list of arrays. Subclasses name and shape them; the base does the
/// generic work (sizes, snapshot, restore, export, import).
class LayerState {
 public:
  virtual ~LayerState() = default;
  LayerState(const LayerState&) = delete;
  LayerState& operator=(const LayerState&) = delete;
  /// "kv", "conv" or "delta".
  virtual const char* kind() const = 0;
  /// Index of the layer in the model.
  uint32_t layer() const { return layer_; }
  /// True iff the state rolls back by the sequence's length alone (KvState): snapshots copy
  /// nothing and files hold only rows [0, n_past).
  virtual bool by_length() const { return false; }
  const std::vector<StateArray>& arrays() const { return arrays_; }
  /// Resident bytes of all arrays.
  uint64_t bytes() const;
  /// Bytes a snapshot of this state holds: bytes() for copied states, 0 for KvState.
  uint64_t snapshot_bytes() const { return by_length() ? 0 : bytes(); }
  /// Copies the state into the copier's next regions (copied states; KvState: nothing).
  void snapshot(StateCopier& c) const;
  /// Copies the state back from the copier's next regions (the inverse of snapshot()).
  void restore(StateCopier& c);
  /// Host copies under the arrays' names: rows [0, n_past) of each KvState array, whole arrays
  /// of the others.
  std::vector<StateBlob> export_state(uint32_t n_past) const;
  /// Checks that blobs (looked up by name) fit export_state(n_past)'s layout, throwing
  /// wgllm::Error naming the blob otherwise; returns them in array order. Changes nothing.
  std::vector<const StateBlob*> check_import(uint32_t n_past, const std::vector<StateBlob>& blobs) const;
  /// Writes blobs checked by check_import().
  void import_state(const std::vector<const StateBlob*>& checked);

 protected:
  explicit LayerState(uint32_t layer) : layer_(layer) {}
  /// Called after import_state() rewrote the arrays (KvState drops derived data).
  virtual void imported() {}
  std::vector<StateArray> arrays_;

 private:
  uint32_t layer_ = 0;
};

/// Keys and values of one attention layer: [context, kv_dim] f32 each (self_attn.keys/values).
/// With sparse attention on, it also keeps the block means of its keys (a derived cache, not part
/// of snapshots or files: kernels::SparseMeansCache tracks which blocks are valid).
class KvState final : public LayerState {
 public:
  KvState(gpu::Context* ctx, uint32_t layer, uint32_t context, uint32_t kv_dim);
  /// Keys and values as views of rows [base_row, base_row + context) of shared K and V buffers
  /// [rows, kv_dim] f32 (a KV pool: the batched forward of several sequences reads all of them
  /// through one binding).
  KvState(gpu::Context* ctx, uint32_t layer, uint32_t context, uint32_t kv_dim, std::shared_ptr<const gpu::Buffer> k_pool,
          std::shared_ptr<const gpu::Buffer> v_pool, uint64_t base_row);
  /// Row of the pool where this sequence's row 0 lies (0 when not pooled).
  uint64_t base_row() const { return arrays_[0].offset() / arrays_[0].row_bytes(); }
  ~KvState() override;
  const char* kind() const override { return "kv"; }
  bool by_length() const override { return true; }
  StateArray& keys() { return arrays_[0]; }
  StateArray& values() { return arrays_[1]; }
  /// The block-means cache of the sparse path (kernels/sparse_attention.h), or null when none was
  /// given (models without --sparse-attn, the CPU backend).
  kernels::SparseMeansCache* sparse_means() { return means_.get(); }
  /// Gives the state its block-means cache (WebGPU models with --sparse-attn, at new_sequence()).
  void set_sparse_means(kernels::SparseMeansCache cache);

 protected:
  void imported() override;  // imported rows: no block mean is valid

 private:
  std::unique_ptr<kernels::SparseMeansCache> means_;
};

/// LFM2 short-conv state [L - 1, d_model] f32, oldest row first (conv.conv_state).
class ConvState final : public LayerState {
 public:
  ConvState(gpu::Context* ctx, uint32_t layer, uint32_t rows, uint32_t width);
  const char* kind() const override { return "conv"; }
  StateArray& conv_state() { return arrays_[0]; }
};

/// Qwen3.5 Gated DeltaNet state: conv state [conv_k - 1, conv_dim] f32 (oldest row first) and
/// recurrent state [nv, dk, dv] f32 (linear_attn.conv_state / recurrent_state).
class DeltaState final : public LayerState {
 public:
  DeltaState(gpu::Context* ctx, uint32_t layer, uint32_t conv_rows, uint32_t conv_dim, uint32_t nv, uint32_t dk,
             uint32_t dv);
  const char* kind() const override { return "delta"; }
  StateArray& conv_state() { return arrays_[0]; }
  StateArray& recurrent_state() { return arrays_[1]; }
};

/// A session file of version 1 named blobs "blk.N.k", "blk.N.v", "blk.N.conv", "blk.N.ssm": the
/// version-2 name of such a blob for these layer states (the conv name depends on the layer's
/// kind); names already in the new form, and unknown ones, come back unchanged.
std::string state_name_from_v1(const std::string& name, const std::vector<std::unique_ptr<LayerState>>& states);

}  // namespace wgllm
