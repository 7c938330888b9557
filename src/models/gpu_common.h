// Pieces every WebGPU model file shares: weight upload (with fused stacking of row blocks) and
// the end of a forward (final RMSNorm on the last row, lm_head, device argmax or logits readback,
// the one submission of the step).
#pragma once
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "formats/tensor_store.h"
#include "gpu/buffer.h"
#include "gpu/context.h"
#include "gpu/pipeline.h"
#include "gpu/recorder.h"
#include "kernels/ops.h"
#include "kernels/sparse_attention.h"
#include "kernels/weights.h"
#include "core/error.h"
#include "models/blocks.h"
#include "models/model.h"

namespace wgllm {

/// What the end of a submission computes: nothing, the last row's logits (read back), their argmax
/// (4 bytes read back, waited for), the argmax submitted without waiting (gpu::Recorder::
/// submit_async; the ticket is Recorder::last_ticket()), or the NLL of a target id at every scored
/// row (GpuModel::forward_nll: one float per row read back).
enum class HeadOut { None, Logits, Argmax, ArgmaxAsync, Nll };

/// A block of output-head rows: vocab ids row0 .. row0 + w->N (the whole head, or one part of a
/// head split across storage bindings).
struct HeadPart {
  const kernels::GpuWeight* w;
  uint32_t row0;
};

struct HeadBuffers;

/// One part of a projection whose output rows stack several matrices (an attention layer's
/// [q | k | v]): a run of consecutive matrices of one weight type stacked into one GPU matrix, or a
/// matrix alone; it writes output rows [row0, row0 + w.N). label: the prefix and the names of its
/// matrices ("attn_" + "qkv", "attn_" + "qk", "attn_" + "v").
struct StackedPart {
  kernels::GpuWeight w;
  uint32_t row0 = 0;
  std::string label;
};
/// One sequence's rows in a batched submission (GpuModel::chunk_batch): rows [row0, row0 + T) of
/// the step's activations hold its tokens at positions pos0 .. pos0 + T - 1.
struct BatchSeg {
  Sequence* seq;
  uint32_t row0, T, pos0;
};

/// The WebGPU backend's block types (Blocks<GpuBlockTypes>, models/blocks.h).
struct GpuBlockTypes {
  using Matrix = kernels::GpuWeight;  // a weight as stored (quantized) on the device
  using Vector = gpu::Buffer;         // an f32 vector on the device
  /// One submission as body() sees it: the rows of segs (T in all) in GpuModel::x_.
  struct Pass {
    kernels::OpContext& o;
    std::span<const BatchSeg> segs;
    uint32_t T;
  };
  /// gate and up stacked into gate_up when ModelOptions::fuse_gate_up and their types match
  /// (fused), else apart.
  /// FfnOptions: the GELU and the post-norm (post_norm when post_normed).
  struct Ffn {
    kernels::GpuWeight gate_up, gate, up, down;
    gpu::Buffer post_norm;
    bool fused = false, gelu_tanh = false, post_normed = false;
  };
  /// [q (| gate) | k | v] projection rows as stacked parts (upload_stacked, ModelOptions::fuse_qkv);
  /// the Q|K|V biases as one f32 vector [q_dim + 2 kv_dim] (bqkv, when biased); the AttentionTensors
  /// options.
  struct Attention {
    std::vector<StackedPart> qkv;
    kernels::GpuWeight wo;
    gpu::Buffer q_norm, k_norm, bqkv, post_norm;
    bool qk_norm = false, gate = false, biased = false, post_normed = false, local_rope = false;
    uint32_t window = 0;
    float scale = 0;  // AttentionTensors::scale
  };
  struct ShortConv {
    kernels::GpuWeight in_proj, out_proj;
    gpu::Buffer conv;
    uint32_t L = 0;
  };
  /// The in-projection [qkv | z | b | a]: one stacked part with ModelOptions::fuse_gdn_in and
  /// equal types, else four.
  struct DeltaNet {
    std::vector<StackedPart> in;
    kernels::GpuWeight w_out;
    gpu::Buffer conv, a_log, dt_bias, norm;
    DeltaNetShape s;
  };
};

/// What every WebGPU model shares: the device, pipeline cache and recorder, options, the
/// memory report, profiling hooks, and forward() splitting a call into submissions of at most
/// prefill_chunk tokens with the output head only on the last one, and the buffers every
/// architecture has. An architecture implements body() (its layers for the rows of one or several
/// sequences, over the blocks) and lists its own chunk-sized buffers (alloc_chunk_buffers());
/// record_body(), chunk() and chunk_batch() are written once here.
class GpuModel : public Model, public Blocks<GpuBlockTypes> {
 public:
  const ModelConfig& config() const override { return c_; }
  std::string backend_name() const override;
  std::string software_adapter() const override;
  MemoryReport memory() const override { return mem_; }
  void set_profiling(bool on) override;
  std::vector<gpu::KernelTime> last_dispatches() const override { return rec_->last_dispatches(); }
  gpu::StepTiming last_step_timing() const override { return rec_->last_step_timing(); }
  void set_step_gpu_time(bool on) override { rec_->set_step_gpu_time(on); }
  void set_repeat_kernel(const std::string& label) override { rec_->set_repeat_label(label); }
  std::vector<gpu::KernelTime> last_profile() const override { return rec_->last_profile(); }
  size_t pipeline_count() const override { return pipes_->size(); }
  uint32_t prefill_chunk() const override { return chunk_; }
  uint32_t prefill_kernel_tokens() const override;
  void compile_switched_pipelines() override;
  std::vector<std::string> inactive_switches() const override;
  /// With kv_pools_: several sequences in KV pools, per layer one K and one V buffer holding the
  /// caches of up to as many sequences as one storage binding holds, each sequence a view of rows
  /// [j * stride, j * stride + context) (stride = context rounded up to 64 rows, so that every view
  /// starts at a multiple of 256 bytes, WebGPU's largest minStorageBufferOffsetAlignment). A batched
  /// forward reaches all of a pool's caches through one binding (--batch-rope-kv,
  /// --batch-decode-attn). Otherwise (and for n <= 1) Model::new_sequences().
  std::vector<std::unique_ptr<Sequence>> new_sequences(uint32_t n, uint32_t ctx) override;
  void forward(Sequence& seq, std::span<const int32_t> toks, std::vector<float>* logits) override;
  int32_t forward_argmax(Sequence& seq, std::span<const int32_t> toks) override;
  bool async_argmax() const override { return opt_.decode_pipeline && !rec_->profiling(); }
  uint64_t forward_argmax_async(Sequence& seq, std::span<const int32_t> toks, bool undoable) override;
  int32_t argmax_result(uint64_t ticket) override;
  /// On the device: each prefill-chunk submission ends with the output norm and head on its
  /// scored rows only (in blocks of nll_block_rows() rows) and kernels::nll_rows; one float per
  /// scored row is read back, never the logits.
  void forward_nll(Sequence& seq, std::span<const int32_t> toks, std::span<const int32_t> targets,
                   std::vector<float>* nll) override;
  /// Groups the items into submissions of at most chunk_ rows (and at most max_batch_seqs()
  /// sequences, and a readback within 16 MiB) and runs each group through chunk_batch(); a group
  /// of one item, an item longer than chunk_ and every item of an architecture without
  /// chunk_batch() go through the single-sequence path (run()).
  void forward_batch(std::span<BatchItem> items) override;
  bool batched_forward() const override { return true; }
  /// Row stride of an attention layer's projection in GpuModel::proj_: q (| gate) | k | v.
  static uint32_t attention_stride(const ModelConfig& c, bool gate) { return (gate ? 2 : 1) * c.q_dim() + 2 * c.kv_dim(); }
  /// Row stride of a DeltaNet layer's projection in GpuModel::proj_: conv_dim + value_dim + 2 nv, rounded up to 4.
  static uint32_t delta_net_stride(const DeltaNetShape& s) { return (s.conv_dim() + s.value_dim() + 2 * s.nv + 3) / 4 * 4; }


 protected:
  /// Creates the device on opt.adapter_index (throws wgllm::Error without a usable adapter).
  GpuModel(const ModelConfig& c, const ModelOptions& opt);
  /// Begins the submission and records the embedding and every layer for the rows of segs (toks:
  /// their ids in row order; one segment for a single-sequence forward); the last layer's output is
  /// left in x_. Attention and recurrent updates run per segment: begin_body(), then the
  /// architecture's body().
  void record_body(kernels::OpContext& o, std::span<const BatchSeg> segs, std::span<const int32_t> toks);
  // The block interface (models/blocks.h) on the kernels of kernels/ops.h and gdn_ops.h
  // (gpu_blocks.cpp): weights uploaded as stored (labels: GPU buffer names), counted in mem_.
  Matrix matrix(const TensorRef& t, const std::string& label) override { return weight({&t}, label); }
  Vector vector(const TensorRef& t, const std::string& label) override { return f32_buffer(t, label); }
  Vector vector(const std::vector<float>& v, const std::string& label) override;
  /// Weights larger than one storage binding (the adapter's maxStorageBufferBindingSize; lavapipe
  /// and browsers: 128 MiB, which the 150k-262k-row vocabularies of Qwen2.5, Gemma 3 and Qwen3.5
  /// exceed) are uploaded as blocks of rows, one binding each: the output head as one matmul per
  /// block into its range of the logits, the embedding as one embed dispatch per block, each
  /// writing the rows of the ids it holds (kernels::embed; the ids stay on the device, so pipelined
  /// decoding works, and no copy of the table stays in host memory). A tied table is uploaded once:
  /// the embedding reads the head's blocks. Test hook: the environment variable
  /// WGLLM_TEST_MAX_BINDING_BYTES lowers the limit, so that tiny models take these paths.
  void embedding(const TensorRef& embed, const TensorRef* lm_head) override;
  Ffn ffn_weights(const TensorRef& gate, const TensorRef& up, const TensorRef& down, const std::string& prefix,
                  const FfnOptions& o) override;
  Attention attention_weights(const AttentionTensors& t, const std::string& prefix) override;
  ShortConv short_conv_weights(const TensorRef& in_proj, const TensorRef& conv, const TensorRef& out_proj, uint32_t L,
                               const std::string& prefix) override;
  DeltaNet delta_net_weights(const TensorRef& w_qkv, const TensorRef& w_z, const TensorRef& w_b, const TensorRef& w_a,
                             const TensorRef& w_out, const TensorRef& conv, const std::vector<float>& a_log,
                             const TensorRef& dt_bias, const TensorRef& norm, const DeltaNetShape& s,
                             const std::string& prefix) override;
  /// kernels::scale on x_ (label embed_scale).
  void scale(Pass& p, float s) override;
  /// record_swiglu_ffn() on x_ (scratch h_, gu_, act_); the GeGLU / post-norm form unfused (the
  /// post-norm's input in o_).
  void gated_ffn(Pass& p, const Vector& norm, const Ffn& w) override;
  /// One-sequence decode of a layer without gate or QK-norm (KernelOptions::fuse_qkv_rope_kv): the
  /// norm, the projection with its biases, RoPE and the KV store in one dispatch per stacked part.
  /// Otherwise the input norm (label norm_label_) and the projection over all rows into proj_, the
  /// biases, the QK-norm, then RoPE + the KV store (one dispatch per KV-pool group of a batch,
  /// plan_batch()) and attention into att_ per segment (one decode launch per pool group; merge
  /// deferred to the output projection when defer_attn_combine() and no gate); the gate folded
  /// into wo's activation load for decode (KernelOptions::fuse_attn_gate); a post-norm's input in o_.
  void attention(Pass& p, uint32_t layer, const Vector& norm, const Attention& w) override;
  /// in_proj over all rows into proj_ ([T, 3d]), the causal conv per segment into att_.
  void short_conv(Pass& p, uint32_t layer, const Vector& norm, const ShortConv& w) override;
  /// The in-projection over all rows into proj_ (row stride delta_net_stride()); per segment the
  /// conv, L2 norms, gates, the delta rule (gdn_step / gdn_chunked) and the gated RMSNorm into
  /// att_ (one-token forwards: gdn_decode, or gdn_decode_prep + gdn_step_norm, per the gdn fusion
  /// switches; the same bits). Needs gdn_conv_, gdn_gates_ and gdn_work_ (alloc_delta_net_scratch()).
  void delta_net(Pass& p, uint32_t layer, const Vector& norm, const DeltaNet& w) override;
  /// gdn_work_ for forwards of up to chunk_ tokens at the larger of the two prefill chunks
  /// (--gdn-chunk, --gdn-chunk-long; kernels::gdn_chunk_work_floats_max), after alloc_chunk_buffers().
  void alloc_delta_net_scratch(const DeltaNetShape& s);
  /// For new_sequence(): prepare_sequence() (with the model's RoPE table when `rope`), then
  /// create_sequence(make).
  template <class F>
  std::unique_ptr<Sequence> make_sequence(const SequenceSize& s, bool rope, F&& make) {
    prepare_sequence(s, rope ? &rope_ : nullptr, &rope_rows_);
    return create_sequence(s, std::forward<F>(make));
  }
  /// The device sequences are allocated on.
  gpu::Context* device() const { return ctx_.get(); }
  /// The start of a record_body(): the pool groups of a batch (plan_batch()); the token ids (written,
  /// or the previous step's argmax; token_ids()), the recorder begun, x_ = embed(ids) for every row
  /// (one dispatch per row block of a split table, embedding()).
  void begin_body(kernels::OpContext& o, std::span<const BatchSeg> segs, std::span<const int32_t> toks);
  /// One submission for toks (size <= chunk_), appended to seq: record_body(), then finish_head()
  /// when out != None.
  int32_t chunk(Sequence& seq, std::span<const int32_t> toks, HeadOut out, std::vector<float>* logits);
  /// The end of a single-sequence submission (last_row: the first float of the last row in x_):
  /// finish_forward() with the whole head, or the same over the head's row blocks (embedding()).
  int32_t finish_head(kernels::OpContext& o, uint32_t last_row, HeadOut out, std::vector<float>* logits);
  /// One submission for several sequences: segs[i] holds items[i]'s rows (in order, rows
  /// 0 .. sum T - 1, at most chunk_), toks all their ids in row order: record_body(), then
  /// finish_batch() over head_parts_of_, and every sequence advanced. The sequences are already
  /// checked (check_forward).
  void chunk_batch(std::span<const BatchSeg> segs, std::span<const int32_t> toks, std::span<BatchItem* const> items);
  /// Per-sequence dispatches one layer of chunk_batch() records at most (for max_batch_seqs()).
  /// 6, or 8 once a DeltaNet layer is loaded (delta_net_weights(): its prefill per segment is up to
  /// 7 dispatches between the shared projections).
  virtual uint32_t batch_dispatches_per_seq_layer() const { return seq_layer_dispatches_; }
  /// Sequences one batched submission takes at most (the recorder's dispatch capacity).
  uint32_t max_batch_seqs() const;
  /// The head of a batched submission: for each item with Out::Logits / Out::Argmax, the output
  /// RMSNorm of its last row of x [rows, d_model], the head parts (row blocks of the vocab) on
  /// those rows in blocks, argmax per row on the device; then submits, reads back the ids and the
  /// requested logits in one read, and fills the items. Submits without a head when no item asks.
  void finish_batch(kernels::OpContext& o, const gpu::Buffer& x, const gpu::Buffer& out_norm,
                    std::span<const HeadPart> parts, std::span<const BatchSeg> segs, std::span<BatchItem* const> items);
  /// The token ids of a chunk for the embedding: writes toks into `tokens` (queued) and returns
  /// it, or, in a forward_argmax_async() with no tokens (never a batch of several sequences,
  /// `batch`), returns `amax` (the previous forward's argmax, still on the device) without writing.
  const gpu::Buffer& token_ids(const gpu::Buffer& tokens, const gpu::Buffer& amax, std::span<const int32_t> toks,
                               bool batch = false);
  /// Context length for new_sequence(ctx): ctx, else the options' default, capped by the model
  /// (sequence_context()).
  uint32_t sequence_length(uint32_t ctx) const;
  /// Before a new sequence of s.context positions is allocated: checks its largest buffer and
  /// the RoPE table for s.context positions against the device's maxStorageBufferBindingSize and
  /// maxBufferSize, and its host-side bookkeeping against the machine's memory; then grows the
  /// model's RoPE table `rope` (covering `rope_rows` positions; nullptr for a model without
  /// attention) to s.context positions. The table is a model-level buffer sized by the longest
  /// sequence created so far, never by the trained context. Throws wgllm::Error naming the
  /// context and the bytes.
  /// The local table (rope_local_, theta rope_local_base_) grows with the model's when that is set.
  void prepare_sequence(const SequenceSize& s, gpu::Buffer* rope, uint32_t* rope_rows);
  /// Runs make() (the sequence's allocation), turning an allocation failure (std::bad_alloc, a
  /// buffer the device refuses) into a wgllm::Error naming the context and the bytes.
  template <class F>
  std::unique_ptr<Sequence> create_sequence(const SequenceSize& s, F&& make) {
    try {
      std::unique_ptr<Sequence> seq = make();
      attach_sparse_means(*seq);
      return seq;
    } catch (const std::bad_alloc&) {
      sequence_alloc_failed(s, backend_name(), "out of host memory");
    } catch (const Error& e) {
      sequence_alloc_failed(s, backend_name(), e.what());
    }
  }

  /// A model-level activation buffer of max(floats, 1) floats, counted in mem_.scratch. Buffers
  /// sized by the prefill chunk (ModelOptions::prefill_chunk) are bound whole, so one larger than
  /// the adapter's maxStorageBufferBindingSize throws wgllm::Error naming the buffer, its size and
  /// the largest --prefill-chunk that fits (`per_token`: its floats per chunk token; 0 for buffers
  /// not sized by the chunk).
  gpu::Buffer scratch(uint64_t floats, const char* name, uint64_t per_token = 0);
  /// A model-level activation buffer sized by the prefill chunk: per_token floats per chunk token.
  struct ChunkBuffer {
    gpu::Buffer* buf;
    uint64_t per_token;
    const char* name;
  };
  /// Resolves chunk_ from ModelOptions::prefill_chunk (auto: 2048 tokens on hardware adapters,
  /// halved down to 512 while the widest chunk-sized buffer would exceed binding_limit(); 512 on
  /// software adapters; capped by the trained context), then allocates the shared buffers (x_, h_,
  /// tokens_, logits_, amax_, attn_split_, sparse_ with --sparse-attn) and every buffer of bufs with
  /// scratch(). Each architecture calls it once, before any other chunk-dependent allocation, with
  /// all its own chunk-sized buffers.
  void alloc_chunk_buffers(std::initializer_list<ChunkBuffer> bufs);
  /// Bytes of the largest buffer a kernel binds whole: min(maxStorageBufferBindingSize, maxBufferSize).
  uint64_t binding_limit() const;
  /// Uploads matrices of one type and row length stacked by rows (upload_matrix: fused projections)
  /// / a tensor dequantized to f32 (upload_f32), counted in mem_.
  kernels::GpuWeight weight(const std::vector<const TensorRef*>& parts, const std::string& label);
  gpu::Buffer f32_buffer(const TensorRef& t, const std::string& label);
  /// One layer's SwiGLU FFN weights under prefix p ("blk.3."): gate and up stacked into gate_up when
  /// `fused` (ModelOptions::fuse_gate_up with equal types), else apart; and down.
  void upload_ffn(const TensorRef& gate, const TensorRef& up, const TensorRef& down, bool fused, const std::string& p,
                  kernels::GpuWeight& gate_up_w, kernels::GpuWeight& gate_w, kernels::GpuWeight& up_w,
                  kernels::GpuWeight& down_w);
  /// With --sparse-attn, gives every KvState of seq its block-means cache (kernels/sparse_attention.h).
  void attach_sparse_means(Sequence& seq);
  /// The end of one submission as the architectures call it (this member hides the free
  /// finish_forward() inside GpuModel's subclasses): HeadOut::Nll runs record_nll_head() over
  /// rows 0 .. last_row / d_model of x with hb.lm_head as the whole head; the other kinds go to
  /// the free function unchanged.
  int32_t finish_forward(kernels::OpContext& o, const ModelConfig& c, const gpu::Buffer& x, uint32_t last_row,
                         const HeadBuffers& hb, HeadOut out, std::vector<float>* logits);
  /// HeadOut::Nll for the T rows of x [T, d_model] of this submission: for the rows whose target
  /// (forward_nll's, this submission's share) is >= 0, in blocks of nll_block_rows() rows: RMSNorm
  /// with out_norm, the head parts into a [rows, vocab] scratch, kernels::nll_rows; then submits
  /// and reads back the floats of the scored range. Scratch is allocated on first use.
  void record_nll_head(kernels::OpContext& o, const gpu::Buffer& x, uint32_t T, const gpu::Buffer& out_norm,
                       std::span<const HeadPart> parts);
  /// Rows of logits one NLL block holds: as many as fit 256 MiB and one storage binding, at most
  /// the prefill chunk (a multiple of 32 when >= 32).
  uint32_t nll_block_rows() const;

  /// The ops' context on this model's device, pipelines, recorder and kernel switches.
  kernels::OpContext op_context() const { return {*ctx_, *pipes_, *rec_, opt_.kernels}; }

  static constexpr uint32_t kMaxDispatches = 16384;  // gpu::Recorder parameter slots
  ModelConfig c_;
  ModelOptions opt_;
  std::unique_ptr<gpu::Context> ctx_;
  std::unique_ptr<gpu::PipelineCache> pipes_;
  std::unique_ptr<gpu::Recorder> rec_;
  uint32_t chunk_ = 0;  // max tokens per submission (alloc_chunk_buffers())
  MemoryReport mem_;
  // What every architecture holds (its own buffers are in the subclass): the embedding and head
  // weights, the output norm, the RoPE table (positions [0, rope_rows_), prepare_sequence), the
  // residual stream x_ and normed rows h_ [chunk, d_model], the last row's logits, the token ids,
  // the device argmax, the attention's split-K partials and, with --sparse-attn, its scratch.
  kernels::GpuWeight embed_, lm_head_;
  gpu::Buffer out_norm_, rope_;
  uint32_t rope_rows_ = 0;
  gpu::Buffer x_, h_, logits_, tokens_, amax_, attn_split_;
  kernels::SparseScratch sparse_;  // allocated with --sparse-attn only
  // The blocks' chunk-sized scratch, allocated by each architecture (alloc_chunk_buffers) as its
  // blocks need: the mixer's input projection rows (attention q | k | v, ShortConv B | C | x,
  // DeltaNet qkv | z | b | a), the mixer's output, gate | up, the FFN activation; DeltaNet's conv
  // output, gates and chunk work buffer.
  // o_: a post-norm's input (the output projection or the FFN's down), [chunk, d_model]
  // (allocated when post_norms_).
  gpu::Buffer proj_, att_, gu_, act_, o_, gdn_conv_, gdn_gates_, gdn_work_;
  uint32_t gdn_dk_ = 0, gdn_dv_ = 0;  // the DeltaNet layers' key / value head dims (alloc_delta_net_scratch()); 0: none
  // The RoPE table of AttentionTensors::local_rope layers (theta rope_local_base_; 0: none),
  // positions [0, rope_local_rows_), grown with rope_ by prepare_sequence().
  gpu::Buffer rope_local_;
  double rope_local_base_ = 0;
  uint32_t rope_local_rows_ = 0;
  // Set by an architecture whose every layer is attention (a KvState per layer): new_sequences()
  // makes KV pools.
  bool kv_pools_ = false;
  // Set with kv_pools_ when no layer has a gate, QK-norm, window or local RoPE (the pool groups'
  // RoPE + KV store and decode attention have none): a batched forward plans its pool groups
  // (plan_batch()).
  bool pool_batching_ = false;
  // Set by attention_weights() / ffn_weights() when a block has a post-norm: alloc_chunk_buffers()
  // then allocates o_.
  bool post_norms_ = false;
  const char* norm_label_ = "attn_norm";  // the mixer's input norm's dispatch label (LFM2: "operator_norm")
  uint32_t seq_layer_dispatches_ = 6;     // batch_dispatches_per_seq_layer()

 private:
  int32_t run(Sequence& seq, std::span<const int32_t> toks, HeadOut out, std::vector<float>* logits);
  // A sequence of one KvState per layer: its own buffers (kp, vp empty), or views from cache row
  // base_row of the pools kp[layer], vp[layer] (new_sequences()).
  std::unique_ptr<Sequence> kv_sequence(const SequenceSize& s, const std::vector<std::shared_ptr<const gpu::Buffer>>& kp,
                                        const std::vector<std::shared_ptr<const gpu::Buffer>>& vp, uint64_t base_row);
  // Continuous batching over KV pools (--batch-rope-kv, --batch-decode-attn; kv_pools_): the
  // sequences of a batched forward whose caches are views of the same pool buffers (new_sequences())
  // form a group; a group of two or more gets one RoPE + KV-store dispatch per layer for all its
  // rows, and its one-token sequences one decode-attention launch (+ one merge of split partials)
  // per layer. The launches read their rows from a table of vec4<u32> entries written once per
  // forward (batch_tab_): the same for every layer, as a sequence's views start at the same row of
  // every layer's pool.
  struct PoolGroup {
    uint32_t first = 0;                 // a member segment (its views name the pool buffers of each layer)
    uint32_t rope_off = 0, rope_n = 0;  // entries (src row, position, cache row, 0)
    uint32_t attn_off = 0, attn_n = 0;  // entries (row, position, base row, split length)
    uint32_t max_split = 1;
    uint64_t keys = 0;                  // cache rows the decode attention reads (traffic)
  };
  struct BatchPlan {
    std::vector<PoolGroup> groups;
    std::vector<bool> rope_done, attn_done;  // per segment: covered by a group's launch
  };
  BatchPlan plan_batch(const kernels::OpContext& o, std::span<const BatchSeg> segs);
  /// The input of a decode projection that starts with the mixer's input norm (T <= kFusedMaxTokens):
  /// with --fuse-norm x_ and the norm weights for the matrix kernel's prologue; without, h_ after an
  /// rmsnorm dispatch (label norm_label_) and no weights.
  struct NormedInput {
    const gpu::Buffer& x;
    const gpu::Buffer* norm;
  };
  NormedInput normed_input(kernels::OpContext& o, const Vector& norm, uint32_t T);
  BatchPlan plan_;                  // this forward's (begin_body())
  gpu::Buffer batch_tab_, batch_split_;  // plan_batch()'s table and split partials, grown on demand
  // embedding(): a table over one storage binding in blocks of rows, one GPU matrix each, with the
  // vocab id of its first row. head_blocks_: the head's when it is split; embed_blocks_: the
  // embedding's when it is split and not tied. embed_parts_of_: what the embedding reads, one embed
  // dispatch each: embed_ whole, or embed_blocks_, or head_blocks_ for a tied split table.
  // head_parts_of_: the output head likewise (the whole head, the tied embedding or lm_head_, or
  // head_blocks_), for record_nll_head and finish_batch.
  struct RowBlockWeight {
    kernels::GpuWeight w;
    uint32_t row0;
  };
  std::vector<RowBlockWeight> head_blocks_;
  std::vector<RowBlockWeight> embed_blocks_;
  std::vector<HeadPart> embed_parts_of_, head_parts_of_;
  int32_t finish_split_head(kernels::OpContext& o, uint32_t last_row, HeadOut out, std::vector<float>* logits);
  bool chained_ = false;     // the forward being recorded takes its token from the device (token_ids)
  bool amax_ready_ = false;  // the last forward ended in argmax: its id is on the device
  // forward_nll's request for the submission being recorded: its targets and host destination.
  std::span<const int32_t> nll_targets_;
  float* nll_out_ = nullptr;
  // NLL scratch (record_nll_head): normed rows [R, d], logits [R, vocab], targets [chunk] i32,
  // NLL [chunk]; R = nll_block_rows().
  gpu::Buffer nll_h_, nll_logits_, nll_tgt_, nll_y_;
  void run_batch(std::span<BatchItem* const> group);
  // finish_batch scratch (allocated on first use, grown as needed): normed last rows [R, d],
  // their logits [R, vocab], one u32 argmax per item (kernels::argmax writes element 0), and
  // the readback [items u32 ids | logits rows].
  uint32_t bhead_rows_ = 0;
  gpu::Buffer bh_, blogits_, bres_;
  std::vector<gpu::Buffer> bamax_;
};

/// A block of whole rows of one weight matrix as stored in the file (e.g. Q, K and V projections
/// stacked into one fused matrix): `rows` rows (nbytes bytes) of tensor `src` from byte
/// `src_off`, or of host bytes `data` when set (rows re-ordered at load).
struct RowBlock {
  const TensorRef* src = nullptr;
  uint64_t src_off = 0;
  uint64_t nbytes = 0;
  uint32_t rows = 0;
  const uint8_t* data = nullptr;
};

/// Uploads the row blocks of a matrix of type `type` with rows of K elements, stacked in order,
/// as one GPU weight, a few MiB of rows at a time (kernels::upload_weight_rows: a streamed model's
/// tensors are read as they are packed, never whole); adds its bytes to mem.weights. Q6_K in its
/// 6-bit GPU layout when q6k_packed (ModelOptions::q6k_packed; kernels::gpu_format_for). Throws
/// wgllm::Error on unsupported types.
kernels::GpuWeight upload_rows(gpu::Context& ctx, DType type, uint32_t K, const std::vector<RowBlock>& blocks,
                               const std::string& label, MemoryReport& mem, bool q6k_packed);
/// Same for whole tensors (shape {K, N} each); all must share type and K ("cannot fuse" otherwise).
kernels::GpuWeight upload_matrix(gpu::Context& ctx, const std::vector<const TensorRef*>& parts, const std::string& label,
                                 MemoryReport& mem, bool q6k_packed);
/// Uploads matrices ms (shape {K, N_i}, one K; names[i] names ms[i]) as the fewest parts: with
/// `fuse` (ModelOptions::fuse_qkv) each run of consecutive matrices of one type is one stacked part
/// (all of them when they share a type; Q4_K_M files store some layers' V as Q6_K), else one part
/// per matrix. GPU buffers are labelled buf_prefix + label.
std::vector<StackedPart> upload_stacked(gpu::Context& ctx, const std::vector<const TensorRef*>& ms,
                                        const std::vector<std::string>& names, bool fuse, const std::string& prefix,
                                        const std::string& buf_prefix, MemoryReport& mem, bool q6k_packed);

/// An f32 vector (norm weights, tables) as a storage buffer; adds its bytes to mem.weights.
gpu::Buffer upload_f32(gpu::Context& ctx, const std::vector<float>& v, const std::string& label, MemoryReport& mem);

/// Buffers of the output head.
struct HeadBuffers {
  const gpu::Buffer& out_norm;      // final RMSNorm weight [d_model]
  const kernels::GpuWeight& lm_head;
  const gpu::Buffer& h;             // scratch row [d_model]
  const gpu::Buffer& logits;        // [vocab]
  const gpu::Buffer& amax;          // [0]: the id (u32); kernels::argmax_buffer_bytes()
};

/// Records the output head on row `last_row` (element offset of the last token's hidden state in
/// x), then submits the recording (the only submission of the step). With HeadOut::Argmax reads
/// back 4 bytes and returns the id; with ArgmaxAsync submits the same without waiting (returns -1;
/// the ticket is o.rec.last_ticket()); with Logits fills *logits; with None submits without a head.
int32_t finish_forward(kernels::OpContext& o, const ModelConfig& c, const gpu::Buffer& x, uint32_t last_row,
                       const HeadBuffers& hb, HeadOut out, std::vector<float>* logits);

/// The end of an argmax head: schedules the 4-byte read of amax and submits (HeadOut::Argmax:
/// waits, returns the id; ArgmaxAsync: returns -1 without waiting).
int32_t submit_argmax(kernels::OpContext& o, const gpu::Buffer& amax, HeadOut out);

/// Weights of a SwiGLU feed-forward block (Shazeer 2020): either the fused gate|up matrix or
/// the two separate ones.
struct FfnWeights {
  const gpu::Buffer& norm;                  // pre-FFN RMSNorm weight [d_model]
  const kernels::GpuWeight* gate_up;        // fused [2 * ffn, d_model], or nullptr
  const kernels::GpuWeight* gate;           // [ffn, d_model] when not fused
  const kernels::GpuWeight* up;             // [ffn, d_model] when not fused
  const kernels::GpuWeight& down;           // [d_model, ffn]
};

/// Records x += down(silu(gate(h)) * up(h)) with h = rmsnorm(x) for T rows of x [T, d_model];
/// h [T, d_model], gu [T, 2 * ffn] and act [T, ffn] are scratch buffers. For T <= kFusedMaxTokens
/// the norm is folded into the gate/up matmul (KernelOptions::fuse_norm) and silu x up into the
/// down matmul (fuse_silu): 2 dispatches instead of 4 (h, act then unused), bit-identical.
void record_swiglu_ffn(kernels::OpContext& o, const ModelConfig& c, const FfnWeights& w, const gpu::Buffer& x,
                       const gpu::Buffer& h, const gpu::Buffer& gu, const gpu::Buffer& act, uint32_t T);

/// The attention's merge may be left to the output projection wo (decode fusion
/// KernelOptions::fuse_attn_combine, kernels::attention_combine_fusable): a forward of one sequence
/// (one attention() call per layer, so its partials are still in the split scratch) of T tokens.
bool defer_attn_combine(const kernels::OpContext& o, std::span<const BatchSeg> segs, const kernels::GpuWeight& wo,
                        uint32_t T, uint32_t head_dim);

/// Records y (+)= wo att for T rows (att rows of wo.K floats, y rows of y_stride; label
/// "attn_output"): kernels::matmul_combine from the partials when attention() deferred its merge
/// (parts.scratch set), else kernels::matmul from att.
void record_attn_output(kernels::OpContext& o, const kernels::GpuWeight& wo, const kernels::AttentionPartials& parts,
                        const gpu::Buffer& att, const gpu::Buffer& y, uint32_t y_stride, uint32_t T, bool accumulate);

/// One projection of record_norm_proj: y[t, y_off .. y_off + W.N) of rows of y_stride.
struct NormedProj {
  const kernels::GpuWeight* W;
  uint32_t y_off;
  const char* label;
};

/// Records y_i = W_i h for each projection, h = rmsnorm(x, norm_w) (T rows of c.d_model). For
/// T <= kFusedMaxTokens with KernelOptions::fuse_norm the norm is computed in each matmul's
/// activation load (matmul_norm; h unused), else one rmsnorm dispatch (label norm_label) into h.
void record_norm_proj(kernels::OpContext& o, const ModelConfig& c, const gpu::Buffer& x, const gpu::Buffer& norm_w,
                      const gpu::Buffer& h, std::initializer_list<NormedProj> projs, const gpu::Buffer& y,
                      uint32_t y_stride, uint32_t T, const char* norm_label);
/// The same for a list built at run time (projections split by type).
void record_norm_proj(kernels::OpContext& o, const ModelConfig& c, const gpu::Buffer& x, const gpu::Buffer& norm_w,
                      const gpu::Buffer& h, std::span<const NormedProj> projs, const gpu::Buffer& y,
                      uint32_t y_stride, uint32_t T, const char* norm_label);
/// The same for the parts of a stacked projection (output rows row0 .. of y).
void record_norm_proj(kernels::OpContext& o, const ModelConfig& c, const gpu::Buffer& x, const gpu::Buffer& norm_w,
                      const gpu::Buffer& h, std::span<const StackedPart> parts, const gpu::Buffer& y,
                      uint32_t y_stride, uint32_t T, const char* norm_label);

/// Where the rows of one attention layer's projected q, k and v live (element offsets and row
/// strides in `src`) and the layer's KV cache.
struct QkvRows {
  const gpu::Buffer& src;
  uint32_t q_off, q_stride, k_off, v_off, kv_stride;
};

/// Records RoPE on q and k (c.rope_dims, c.rope_neox; table from kernels::rope_table) and the KV
/// cache store of T tokens at pos0: one rope_kv_store dispatch with KernelOptions::fuse_rope_kv,
/// else rope (q), rope (k, in place in src) and kv_store. Same cache and q bits either way.
void record_rope_kv(kernels::OpContext& o, const ModelConfig& c, const QkvRows& r, uint32_t T, uint32_t pos0,
                    const gpu::Buffer& table, gpu::Binding kc, gpu::Binding vc);

/// The per-head q / k RMSNorm weights of an attention layer with QK-norm (LFM2, Qwen3.5, Gemma 3), [head_dim] f32.
struct QkNorm {
  const gpu::Buffer& q;
  const gpu::Buffer& k;
};

/// True when record_qk_norm_rope_kv() folds the QK-norm into the RoPE + KV-store dispatch
/// (KernelOptions::fuse_qk_norm with fuse_rope_kv); otherwise the caller records
/// record_qk_norms() over all rows of the step first.
bool qk_norm_folded(const kernels::OpContext& o);

/// The unfolded QK-norm: kernels::rmsnorm_heads on the c.n_heads query heads and the c.n_kv_heads
/// key heads of T rows, in place (labels attn_q_norm, attn_k_norm). Nothing when qk_norm_folded().
void record_qk_norms(kernels::OpContext& o, const ModelConfig& c, const QkvRows& r, uint32_t T, const QkNorm& n);

/// RoPE + KV store of T rows at pos0 for a layer with QK-norm: with qk_norm_folded() one
/// kernels::qk_norm_rope_kv_store dispatch (norms, RoPE, store), else record_rope_kv() on the rows
/// record_qk_norms() normed. Same q and cache bits either way.
void record_qk_norm_rope_kv(kernels::OpContext& o, const ModelConfig& c, const QkvRows& r, uint32_t T, uint32_t pos0,
                            const gpu::Buffer& table, const QkNorm& n, gpu::Binding kc, gpu::Binding vc);

}  // namespace wgllm
