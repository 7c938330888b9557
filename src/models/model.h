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

/// Byte sizes of resident state, for reports.
struct MemoryReport {
  uint64_t weights = 0;   // bytes of weights as resident on the backend
  uint64_t kv_cache = 0;  // bytes of the KV cache (all layers, full context)
  uint64_t scratch = 0;   // activations and other buffers
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;
  virtual std::string backend_name() const = 0;
  /// Processes tokens at positions n_past() .. n_past()+T-1, appending them to the KV cache.
  /// If logits is non-null it receives the last token's vocab logits (f32). T >= 1.
  /// Throws wgllm::Error if the context would overflow (nothing is changed then) or an id is out
  /// of range.
  virtual void forward(std::span<const int32_t> tokens, std::vector<float>* logits) = 0;
  /// As forward(), returning argmax of the last logits (computed on the device: on WebGPU the
  /// step reads back 4 bytes instead of the vocab logits). Ties go to the lowest id.
  virtual int32_t forward_argmax(std::span<const int32_t> tokens) = 0;
  virtual uint32_t n_past() const = 0;
  /// Rolls back to the first n tokens (n <= n_past()); later KV rows are ignored and overwritten.
  virtual void truncate(uint32_t n) = 0;
  virtual uint32_t context_length() const = 0;
  virtual MemoryReport memory() const = 0;
  /// Per-kernel GPU times of the last submission when profiling is on (WebGPU only).
  virtual void set_profiling(bool on) {}
  virtual std::vector<gpu::KernelTime> last_profile() const { return {}; }
};

/// Creates the model for src.config.arch on the chosen backend, loading all weights.
std::unique_ptr<Model> create_model(const ModelSource& src, const ModelOptions& opt);

}  // namespace wgllm
