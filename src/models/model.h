// Model: one loaded model on one backend; Sequence: one sequence's state (per-layer state objects,
// models/state.h). The runtime (sampling, generation, sessions) talks to these interfaces only.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gpu/recorder.h"
#include "kernels/ops.h"
#include "models/config.h"
#include "models/state.h"

namespace wgllm {

struct ModelSource;
namespace gpu { class Context; }

enum class BackendKind { WebGPU, CPU };

/// Load-time options. Every performance switch is its own field (see docs/FLAGS.md).
struct ModelOptions {
  BackendKind backend = BackendKind::WebGPU;
  uint32_t context_length = 4096;  // KV cache positions of a new sequence (0: the trained length);
                                   // capped by the model's trained length (sequence_context())
  kernels::KernelOptions kernels;  // kernel-level switches
  int adapter_index = -1;          // WebGPU adapter (see `wgllm devices`)
  /// submit_chunk's adapter default: 32 on hardware adapters, 0 on software ones (docs/FLAGS.md).
  static constexpr uint32_t kSubmitChunkAuto = 0xFFFFFFFFu;
  /// prefill_chunk's adapter default: 2048 tokens on hardware adapters (fewer where an activation
  /// buffer would exceed one storage binding), 512 on software adapters and the CPU backend
  /// (Model::prefill_chunk() gives the value a model resolved; docs/FLAGS.md).
  static constexpr uint32_t kPrefillChunkAuto = 0;
  // Model-level switches, generated from the switch table (kernels/switches.def): fuse_qkv,
  // fuse_gate_up (stacked weights at load), shader_runtime_checks and shader_loop_bounding (gpu::ContextOptions),
  // submit_chunk (gpu::Recorder::set_submit_chunk), decode_pipeline (runtime/decode_pipeline.h),
  // prefill_chunk (max tokens per forward submission; longer prompts are split).
#define WGLLM_SWITCH(scope, field, type, kind, def, ...) WGLLM_SWITCH_FIELD_##scope(field, type, def)
#define WGLLM_SWITCH_FIELD_KERNEL(field, type, def)
#define WGLLM_SWITCH_FIELD_MODEL(field, type, def) type field = def;
#define WGLLM_SWITCH_FIELD_APP(field, type, def)
#define WGLLM_SWITCH_FIELD_SESSION(field, type, def)
#define WGLLM_SWITCH_FIELD_WEB(field, type, def)
#include "kernels/switches.def"
#undef WGLLM_SWITCH_FIELD_KERNEL
#undef WGLLM_SWITCH_FIELD_MODEL
#undef WGLLM_SWITCH_FIELD_APP
#undef WGLLM_SWITCH_FIELD_SESSION
#undef WGLLM_SWITCH_FIELD_WEB
#undef WGLLM_SWITCH
};

/// Byte sizes of resident memory, for reports.
struct MemoryReport {
  uint64_t weights = 0;    // bytes of weights as resident on the backend
  uint64_t kv_cache = 0;   // bytes of KV cache (all layers, full context)
  uint64_t recurrent = 0;  // bytes of fixed-size recurrent state (conv rows, DeltaNet matrices)
  uint64_t scratch = 0;    // activations and other buffers
};

/// A saved point of one Sequence (Sequence::snapshot): its length n_past plus a copy of every
/// state that is copied as is (ConvState, DeltaState; models/state.h), packed into one host
/// vector or one GPU buffer. KV rows are not copied: a KvState rolls back by the length alone
/// (rows past n_past are ignored by the attention mask and overwritten later).
class SeqSnapshot {
 public:
  uint32_t n_past() const { return n_past_; }
  /// Bytes this snapshot holds (its copies of the copied states; 0 for KV-only models).
  uint64_t bytes() const { return store_.bytes(); }

 private:
  friend class Sequence;
  uint32_t n_past_ = 0;
  uint64_t seq_id_ = 0;  // Sequence::id() of the sequence it was taken from
  uint64_t clock_ = 0;   // that sequence's write clock when it was taken
  SnapshotStore store_;
};

/// One sequence's state on a model's backend: one state object per layer (KvState for attention
/// layers, ConvState / DeltaState for recurrent ones; models/state.h) plus the number of tokens
/// processed and the per-row write clocks that decide which snapshots are still restorable. The
/// same class serves every architecture: a model's new_sequence() only chooses the layer states.
/// Several sequences can share one Model (the weights); each forward names the sequence it
/// advances.
class Sequence {
 public:
  /// states: one per layer, in layer order (states[i]->layer() == i), all on the host (ctx ==
  /// nullptr) or all in GPU buffers of ctx.
  Sequence(uint32_t ctx_len, gpu::Context* ctx, std::vector<std::unique_ptr<LayerState>> states);
  Sequence(const Sequence&) = delete;
  Sequence& operator=(const Sequence&) = delete;
  uint32_t n_past() const { return n_past_; }
  uint32_t context_length() const { return ctx_len_; }
  /// Rolls back to the first n tokens (n <= n_past()): KV rows past n are ignored and later
  /// overwritten. Throws wgllm::Error for n > n_past() and for sequences with copied states
  /// (those roll back by restoring a snapshot instead).
  void truncate(uint32_t n);
  /// Bytes of this sequence's KV cache and recurrent state.
  MemoryReport memory() const;

  // --- Layer states (for the models' forwards) ---
  const std::vector<std::unique_ptr<LayerState>>& states() const { return states_; }
  /// The state of layer i as the given kind; throws wgllm::Error if layer i holds another kind.
  KvState& kv(uint32_t i);
  ConvState& conv(uint32_t i);
  DeltaState& delta(uint32_t i);
  /// Appends n processed tokens (a model's forward, after recording them; see check_forward()).
  void advance(uint32_t n);

  // --- Snapshots (see src/runtime/session.h for the conversation-level policy) ---
  /// Process-unique id of this sequence.
  uint64_t id() const { return id_; }
  /// A snapshot of the current point: n_past plus copies of the copied states. On WebGPU all
  /// copies are GPU->GPU, recorded into one submission that is not waited for (no host round trip).
  std::unique_ptr<SeqSnapshot> snapshot() const;
  /// True iff s was taken from this sequence and no forward since then wrote a KV row below
  /// s.n_past() (those rows still hold the tokens they held when s was taken).
  bool restorable(const SeqSnapshot& s) const;
  /// Returns to s: copies the copied states back (one submission on WebGPU) and sets n_past.
  /// Throws wgllm::Error, changing nothing, when !restorable(s).
  void restore(const SeqSnapshot& s);
  /// Blocks until the queued state copies (snapshot(), restore()) have completed (WebGPU; no-op
  /// on the host). Only for measurements: the queue orders the copies before later forwards.
  void wait() const;
  /// Host copy of the whole state for files, under the states' names (models/state.h): rows
  /// [0, n_past) of each KvState array and every other array whole (read back from the GPU).
  std::vector<StateBlob> export_state() const;
  /// Replaces the state with an exported one (same model and layout: count, names and byte sizes
  /// are checked, wgllm::Error otherwise, changing nothing). All earlier snapshots of this
  /// sequence stop being restorable except through import_snapshot().
  void import_state(uint32_t n_past, const std::vector<StateBlob>& blobs);
  /// Host copy of a snapshot's copied states (empty for KV-only models), and the inverse: a
  /// snapshot at n_past of this sequence rebuilt from such blobs (checked as import_state()),
  /// restorable while this sequence's KV rows [0, n_past) are the ones last imported or written
  /// (for files).
  std::vector<StateBlob> export_snapshot(const SeqSnapshot& s) const;
  std::unique_ptr<SeqSnapshot> import_snapshot(uint32_t n_past, const std::vector<StateBlob>& blobs);
  /// Records that rows [n_past, n_past + n) are being rewritten (called by check_forward()).
  void mark_written(uint32_t n);

  // --- One-step undo (pipelined greedy decoding, runtime/decode_pipeline.h) ---
  /// Before a forward of one token that may be taken back: remembers n_past and the write clocks
  /// that forward changes, and returns the GPU copies of every copied state (ConvState,
  /// DeltaState) into this sequence's undo store (one snapshot's size, allocated on first use),
  /// which the model records at the start of that forward's submission (gpu::Recorder::
  /// copy_on_begin), so the queue runs them before the forward. Empty for KV-only sequences (a
  /// KvState rolls back by the length) and on the host (the copies are made at once).
  std::vector<gpu::CopyRange> prepare_undo();
  /// Takes back the one-token forward that followed prepare_undo(): copies the saved states back
  /// (one queued submission), restores n_past and the clocks, so the sequence is exactly as before
  /// that forward (export_state() and restorable() alike; the KV row it wrote lies past n_past).
  /// Throws wgllm::Error, changing nothing, unless exactly that one forward happened since.
  void undo();

 private:
  /// Bytes of one snapshot (sum of the states' snapshot_bytes()).
  uint64_t snapshot_bytes() const;
  gpu::Context* ctx_ = nullptr;
  std::vector<std::unique_ptr<LayerState>> states_;
  uint32_t n_past_ = 0, ctx_len_ = 0;
  uint64_t id_ = 0, clock_ = 0;
  std::vector<uint64_t> row_clock_;  // [ctx_len] write clock of the last write of each KV row
  struct Undo {
    bool armed = false;
    uint32_t n_past = 0;
    uint64_t clock = 0, row_clock = 0;
  } undo_;
  SnapshotStore undo_store_;  // prepare_undo()'s copies of the copied states
};

/// One sequence's part of a batched forward (Model::forward_batch): its new tokens (>= 1, at
/// positions seq->n_past() ..) and what it wants back for its last token.
struct BatchItem {
  enum class Out { None, Logits, Argmax };
  Sequence* seq = nullptr;
  std::span<const int32_t> tokens;
  Out out = Out::Argmax;
  std::vector<float>* logits = nullptr;  // Out::Logits: receives the last token's vocab logits (f32)
  int32_t argmax = -1;                   // Out::Argmax: set to the argmax of those logits (ties: lowest id)
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;
  virtual std::string backend_name() const = 0;
  /// On a software WebGPU adapter (a CPU renderer: lavapipe, SwiftShader) its name and driver, e.g.
  /// "llvmpipe (LLVM 15.0.6, 256 bits), Mesa 25.0.7"; empty on hardware adapters and the CPU backend.
  virtual std::string software_adapter() const { return {}; }
  /// A new empty sequence with room for context_length tokens (0: ModelOptions::context_length;
  /// always capped by the model's trained context length).
  virtual std::unique_ptr<Sequence> new_sequence(uint32_t context_length = 0) = 0;
  /// n new empty sequences as new_sequence(context_length) each, for several sequences that will
  /// be advanced together (Model::forward_batch, the server's slots). A backend may lay their
  /// states out together (WebGPU llama family: each layer's keys and values of all n in one
  /// buffer, so that a batched forward reaches every sequence's cache through one binding); each
  /// sequence still behaves as one made alone.
  virtual std::vector<std::unique_ptr<Sequence>> new_sequences(uint32_t n, uint32_t context_length = 0) {
    std::vector<std::unique_ptr<Sequence>> out;
    for (uint32_t i = 0; i < n; ++i) out.push_back(new_sequence(context_length));
    return out;
  }
  /// Processes tokens at positions seq.n_past() .. n_past()+T-1, appending them to seq.
  /// If logits is non-null it receives the last token's vocab logits (f32). T >= 1.
  /// Throws wgllm::Error if the context would overflow or an id is out of range (seq unchanged).
  virtual void forward(Sequence& seq, std::span<const int32_t> tokens, std::vector<float>* logits) = 0;
  /// As forward(), returning argmax of the last logits (computed on the device: on WebGPU the
  /// step reads back 4 bytes instead of the vocab logits). Ties go to the lowest id.
  virtual int32_t forward_argmax(Sequence& seq, std::span<const int32_t> tokens) = 0;
  /// Pipelined greedy decoding (ModelOptions::decode_pipeline; runtime/decode_pipeline.h drives
  /// it). True when forward_argmax_async() is available: the switch is on, the backend is WebGPU
  /// and per-dispatch profiling is off.
  virtual bool async_argmax() const { return false; }
  /// As forward_argmax() without waiting for the id: returns a ticket for argmax_result(). The id
  /// also stays on the device, where a call with `tokens` empty takes it as its one input token
  /// (the argmax of this model's last forward, which must have ended in argmax: no host round
  /// trip between two steps). `undoable` (one token only): seq.prepare_undo() first, its copies
  /// recorded at the start of this forward, so that seq.undo() can take the forward back. Throws
  /// wgllm::Error when !async_argmax() and as forward() does (seq unchanged).
  virtual uint64_t forward_argmax_async(Sequence& seq, std::span<const int32_t> tokens, bool undoable);
  /// Waits for the id of a ticket (each ticket read once; at most gpu::Recorder::kReadRing unread;
  /// only that ticket's submission is waited for, not later ones).
  virtual int32_t argmax_result(uint64_t ticket);
  /// Continuous batching: advances every item's sequence by its tokens as forward() /
  /// forward_argmax() would, each sequence against its own state (KV rows, positions, recurrent
  /// state). Where batched_forward() is true the items go through one forward: matmuls, norms,
  /// FFN, embedding and output head over the rows of all items at once, attention and recurrent
  /// updates per sequence (split into several submissions only when the rows exceed the prefill
  /// chunk). Otherwise, and by default, the items are run one after the other (taking turns).
  /// Results equal the items run alone up to the matmul's summation order over T rows (bit-
  /// identical where the T <= kernels::kFusedMaxTokens kernels compute each row alike:
  /// tests/e2e/batch_forward_test.cpp). Throws wgllm::Error, changing no sequence, when an item
  /// has no tokens, overflows its context, has an id out of range or a sequence appears twice.
  virtual void forward_batch(std::span<BatchItem> items);
  /// Whether forward_batch() runs the items in one forward (false: they take turns).
  virtual bool batched_forward() const { return false; }
  /// As forward(), scoring positions instead of returning logits (perplexity): for every t with
  /// targets[t] >= 0, nll[t] = logsumexp(l_t) - l_t[targets[t]] where l_t are the f32 vocab logits
  /// after tokens[0..t] (ref::nll_rows, kernels/nll.h); nll[t] = 0 where targets[t] < 0.
  /// targets.size() == tokens.size(). This default runs the unscored prefix and suffix as one
  /// forward each and the scored range one token at a time with its logits read back (the CPU
  /// backend); WebGPU overrides it with one batched prefill per chunk and the NLL on the device.
  /// Throws wgllm::Error (sequence unchanged) for mismatched sizes or a target >= vocab, and
  /// whatever forward() throws.
  virtual void forward_nll(Sequence& seq, std::span<const int32_t> tokens, std::span<const int32_t> targets,
                           std::vector<float>* nll);
  /// Weights and scratch buffers (sequence state is reported by Sequence::memory()).
  virtual MemoryReport memory() const = 0;
  /// Per-kernel GPU times of the last submission when profiling is on (WebGPU only).
  virtual void set_profiling(bool on) {}
  virtual std::vector<gpu::KernelTime> last_profile() const { return {}; }
  /// Dispatches of the last submission with their declared traffic (and GPU times when
  /// profiling); recorded while profiling is on (WebGPU only).
  virtual std::vector<gpu::KernelTime> last_dispatches() const { return {}; }
  /// Where the last forward's wall time went (gpu::StepTiming); zeros on backends without a GPU.
  virtual gpu::StepTiming last_step_timing() const { return {}; }
  /// gpu::Recorder::set_step_gpu_time (GPU execution time per forward); no-op without a GPU.
  virtual void set_step_gpu_time(bool on) {}
  /// gpu::Recorder::set_repeat_label (measurement: dispatches of that label recorded twice); no-op
  /// without a GPU.
  virtual void set_repeat_kernel(const std::string& label) {}
  /// Kernel pipelines compiled so far (0 on the CPU backend); a forward that raises it paid a
  /// pipeline compile (runtime/warmup.h exists to prevent that).
  virtual size_t pipeline_count() const { return 0; }
  /// Tokens per forward submission (ModelOptions::prefill_chunk as resolved for this backend and
  /// adapter): a longer prompt is fed in chunks of this many tokens.
  virtual uint32_t prefill_chunk() const = 0;
  /// The fewest tokens of a forward whose matrix products take the prefill kernels (the tiled
  /// matmul past --matvec-max-tokens on hardware GPUs); the warm-up's prefill is at least this long.
  virtual uint32_t prefill_kernel_tokens() const { return 9; }
  /// Compiles the pipelines of switched-on paths that the warm-up's short forwards cannot reach
  /// (--sparse-attn: taken only past its context threshold; the prefill kernels' key-split variant,
  /// which with --attn-chunk only a long prefill from an empty cache takes; --gdn-chunk-long's
  /// chunk, taken only by long forwards). No-op on the CPU backend.
  virtual void compile_switched_pipelines() {}
  /// Kernel switches set on that no kernel takes on this adapter, one sentence each
  /// (kernels::inactive_switches); empty on the CPU backend.
  virtual std::vector<std::string> inactive_switches() const { return {}; }
};

/// Creates the model for src.config.arch on the chosen backend, loading all weights.
std::unique_ptr<Model> create_model(const ModelSource& src, const ModelOptions& opt);

/// The context length of Model::new_sequence(requested): requested, else default_len
/// (ModelOptions::context_length), else the model's trained length; always capped by the trained
/// length max_context. Every per-sequence buffer (KV cache, position bookkeeping) and the models'
/// RoPE tables are sized by this, never by max_context itself (models declare up to 10M tokens).
uint32_t sequence_context(uint32_t requested, uint32_t default_len, uint32_t max_context);

/// The state one new sequence of `context` positions needs, for the checks below.
struct SequenceSize {
  uint32_t context = 0;         // positions
  uint64_t kv_cache = 0;        // bytes of KV cache, all attention layers
  uint64_t recurrent = 0;       // bytes of fixed-size recurrent state
  uint64_t largest_buffer = 0;  // bytes of the largest single allocation (one KV cache buffer)
  /// All bytes, with the per-position write clocks of Sequence (8 bytes a position).
  uint64_t total() const { return kv_cache + recurrent + uint64_t(context) * 8; }
  /// "context of N tokens needs X (KV cache Y, recurrent state Z, position bookkeeping W)".
  std::string describe() const;
  /// A sequence of `context` positions of an all-attention model: one f32 key and one value buffer
  /// of context x kv_dim per layer (KvState), the largest one buffer.
  static SequenceSize all_attention(uint32_t context, uint32_t n_layers, uint32_t kv_dim);
};
/// Throws wgllm::Error naming the context and the bytes when s.total() + extra exceeds the
/// machine's physical memory (where the platform reports it; no check otherwise).
void check_host_memory(const SequenceSize& s, uint64_t extra, const std::string& backend);
/// The wgllm::Error for a failed allocation of a sequence (e.g. std::bad_alloc): names the
/// context, the bytes and the cause, and suggests a smaller context.
[[noreturn]] void sequence_alloc_failed(const SequenceSize& s, const std::string& backend, const std::string& cause);

/// Checks a forward's arguments against a sequence (shared by all models): T >= 1, room in the
/// context, ids in [0, vocab). Throws wgllm::Error without changing anything. On success marks
/// KV rows [n_past, n_past + T) as rewritten (snapshot validity, Sequence::restorable); every
/// model's forward must call it before writing.
void check_forward(Sequence& seq, std::span<const int32_t> tokens, uint32_t vocab);
/// forward_batch's checks before anything is written: per item as check_forward (without marking
/// rows) plus no sequence twice. Throws wgllm::Error naming the item.
void check_batch(std::span<const BatchItem> items, uint32_t vocab);
/// forward_nll's own checks: targets.size() == tokens.size() and every target < vocab. Throws
/// wgllm::Error naming the first offender.
void check_nll_targets(std::span<const int32_t> tokens, std::span<const int32_t> targets, uint32_t vocab);

}  // namespace wgllm
