// Model: one loaded model on one backend, holding one sequence's state (KV cache). The runtime
// (sampling, generation, sessions) talks to this interface only.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gpu/recorder.h"
#include "kernels/ops.h"
#include "models/config.h"

namespace wgllm {

struct ModelSource;
namespace gpu { class Context; }

enum class BackendKind { WebGPU, CPU };

/// Load-time options. Every performance switch is its own field (see docs/FLAGS.md).
struct ModelOptions {
  BackendKind backend = BackendKind::WebGPU;
  uint32_t context_length = 4096;  // KV cache positions (capped by the model's trained length)
  uint32_t prefill_chunk = 512;    // max tokens per forward submission; longer prompts are split
  bool fuse_qkv = true;            // one matmul for Q, K, V when their types match (stacked rows)
  bool fuse_gate_up = true;        // one matmul for the SwiGLU gate and up projections
  kernels::KernelOptions kernels;  // kernel-level switches
  int adapter_index = -1;          // WebGPU adapter (see `wgllm devices`)
};

/// Byte sizes of resident memory, for reports.
struct MemoryReport {
  uint64_t weights = 0;    // bytes of weights as resident on the backend
  uint64_t kv_cache = 0;   // bytes of KV cache (all layers, full context)
  uint64_t recurrent = 0;  // bytes of fixed-size recurrent state (conv rows, DeltaNet matrices)
  uint64_t scratch = 0;    // activations and other buffers
};

/// One sequence's state on a model's backend: the KV cache of every attention layer (and, for
/// hybrid models, every recurrent layer's state) plus the number of tokens processed. Several
/// sequences can share one Model (the weights); each forward names the sequence it advances.
class Sequence {
 public:
  virtual ~Sequence() = default;
  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;
  uint32_t n_past() const { return n_past_; }
  uint32_t context_length() const { return ctx_len_; }
  /// Rolls back to the first n tokens (n <= n_past()): KV rows past n are ignored and later
  /// overwritten. Throws wgllm::Error for n > n_past() and for models with recurrent state
  /// (those roll back by restoring a snapshot instead).
  virtual void truncate(uint32_t n);
  /// Bytes of this sequence's KV cache and recurrent state.
  virtual MemoryReport memory() const = 0;

 protected:
  Sequence(uint32_t ctx_len) : ctx_len_(ctx_len) {}
  uint32_t n_past_ = 0, ctx_len_ = 0;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;
  virtual std::string backend_name() const = 0;
  /// A new empty sequence with room for context_length tokens (0: ModelOptions::context_length;
  /// always capped by the model's trained context length).
  virtual std::unique_ptr<Sequence> new_sequence(uint32_t context_length = 0) = 0;
  /// Processes tokens at positions seq.n_past() .. n_past()+T-1, appending them to seq.
  /// If logits is non-null it receives the last token's vocab logits (f32). T >= 1.
  /// Throws wgllm::Error if the context would overflow or an id is out of range (seq unchanged).
  virtual void forward(Sequence& seq, std::span<const int32_t> tokens, std::vector<float>* logits) = 0;
  /// As forward(), returning argmax of the last logits (computed on the device: on WebGPU the
  /// step reads back 4 bytes instead of the vocab logits). Ties go to the lowest id.
  virtual int32_t forward_argmax(Sequence& seq, std::span<const int32_t> tokens) = 0;
  /// Weights and scratch buffers (sequence state is reported by Sequence::memory()).
  virtual MemoryReport memory() const = 0;
  /// Per-kernel GPU times of the last submission when profiling is on (WebGPU only).
  virtual void set_profiling(bool on) {}
  virtual std::vector<gpu::KernelTime> last_profile() const { return {}; }
};

/// Creates the model for src.config.arch on the chosen backend, loading all weights.
std::unique_ptr<Model> create_model(const ModelSource& src, const ModelOptions& opt);

/// Checks a forward's arguments against a sequence (shared by all models): T >= 1, room in the
/// context, ids in [0, vocab). Throws wgllm::Error without changing anything.
void check_forward(const Sequence& seq, std::span<const int32_t> tokens, uint32_t vocab);

}  // namespace wgllm
