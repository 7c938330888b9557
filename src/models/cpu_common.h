// Pieces every CPU reference model shares (plain C++ over kernels/ref.h): the block interface's CPU
// side (CpuModel), the output head, and greedy argmax on top of forward().
#pragma once
#include <algorithm>
#include <cstdint>
#include <memory>
#include <new>
#include <stdexcept>
#include <span>
#include <vector>

#include "core/error.h"
#include "formats/tensor_store.h"
#include "kernels/rope_table.h"

#include "kernels/ops.h"
#include "kernels/ref.h"
#include "models/blocks.h"
#include "models/model.h"

namespace wgllm {

/// The WebGPU backend's tokens per submission for these options (GpuModel: ModelOptions::prefill_chunk
/// capped by the trained context, at least 1; the auto default as a software adapter resolves it,
/// 512).
inline uint32_t cpu_chunk(const ModelConfig& c, const ModelOptions& o) {
  const uint32_t n = o.prefill_chunk == ModelOptions::kPrefillChunkAuto ? 512u : o.prefill_chunk;
  return std::max<uint32_t>(1, std::min(n, c.max_context));
}

/// For a CPU model's new_sequence(): checks s against the machine's memory, grows the model's
/// RoPE table `rope` (nullptr: no attention layer) to s.context positions, then runs make() (the
/// allocation). The table is sized by the longest sequence created so far, never by the trained
/// context. Throws wgllm::Error naming the context and the bytes instead of std::bad_alloc.
template <class F>
std::unique_ptr<Sequence> cpu_new_sequence(const SequenceSize& s, const ModelConfig& c, std::vector<float>* rope, F&& make) {
  const uint64_t table = rope ? kernels::rope_table_bytes(s.context, c.rope_dims) : 0;
  check_host_memory(s, rope && table > rope->size() * 4 ? table - rope->size() * 4 : 0, "cpu");
  try {
    if (rope) kernels::rope_table_grow(*rope, s.context, c.rope_dims, c.rope_base);
    return make();
  } catch (const std::bad_alloc&) {
    sequence_alloc_failed(s, "cpu", "out of memory");
  } catch (const std::length_error&) {
    sequence_alloc_failed(s, "cpu", "larger than a vector can hold");
  }
}

/// The CPU backend's block types (Blocks<CpuBlockTypes>, models/blocks.h).
struct CpuBlockTypes {
  using Matrix = kernels::ref::Matrix;  // a weight dequantized to f32
  using Vector = std::vector<float>;    // an f32 vector (norm weights, conv taps)
  /// One forward as body() sees it: T tokens of seq at positions n_past.., the residual stream
  /// x [T, d_model] and a scratch h [T, d_model].
  struct Pass {
    Sequence& seq;
    uint32_t T, n_past;
    float* x;
    float* h;
  };
  /// Empty post_norm: none.
  struct Ffn {
    Matrix gate, up, down;
    Vector post_norm;
    bool gelu_tanh = false;
  };
  /// q's rows are [q | gate] when gate; empty vectors: no biases, no QK-norm, no post-norm.
  struct Attention {
    Matrix wq, wk, wv, wo;
    Vector bq, bk, bv, q_norm, k_norm, post_norm;
    bool gate = false, local_rope = false;
    uint32_t window = 0;
    float scale = 0;  // AttentionTensors::scale
  };
  struct ShortConv { Matrix in_proj, out_proj; Vector conv; uint32_t L = 0; };
  struct DeltaNet {
    Matrix w_qkv, w_z, w_b, w_a, w_out;
    Vector conv, a_log, dt_bias, norm;
    DeltaNetShape s;
  };
};

/// What every CPU reference model shares: its config and options, the embedding, output norm and
/// head (dequantized to f32), the RoPE table, and forward_argmax() = argmax of forward()'s logits
/// (lowest id on ties).
/// It implements the block interface (models/blocks.h) for architectures written once over it:
/// forward() embeds, runs body() and the head.
class CpuModel : public Model, public Blocks<CpuBlockTypes> {
 public:
  const ModelConfig& config() const override { return c_; }
  std::string backend_name() const override { return "cpu"; }
  MemoryReport memory() const override { return mem_; }
  int32_t forward_argmax(Sequence& seq, std::span<const int32_t> toks) override;
  uint32_t prefill_chunk() const override { return chunk_; }
  /// Checks toks, embeds them into x [T, d_model], runs body(), advances seq by T and, when
  /// logits is set, writes the last row's logits (cpu_logits with the tied embedding or lm_head_;
  /// then cap * tanh(z / cap) when final_softcap_ > 0).
  void forward(Sequence& seq, std::span<const int32_t> toks, std::vector<float>* logits) override;

 protected:
  CpuModel(const ModelConfig& c, const ModelOptions& opt)
      : c_(c), default_ctx_(opt.context_length), kopt_(opt.kernels), chunk_(cpu_chunk(c, opt)) {}

  // The block interface (models/blocks.h) on the kernels' CPU twins (kernels/ref.h, gdn_ref.h):
  // weights dequantized to f32 once (labels unused), counted in mem_.
  Matrix matrix(const TensorRef& t, const std::string& label) override;
  Vector vector(const TensorRef& t, const std::string& label) override;
  Vector vector(const std::vector<float>& v, const std::string& label) override;
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
  void scale(Pass& p, float s) override;
  /// cpu_swiglu_ffn; the GeGLU / post-norm form with its own loop.
  void gated_ffn(Pass& p, const Vector& norm, const Ffn& w) override;
  /// Attention over the sequence's host KV cache (cpu_attention: dense, over the window on a sliding
  /// layer, or block-sparse with --sparse-attn).
  void attention(Pass& p, uint32_t layer, const Vector& norm, const Attention& w) override;
  void short_conv(Pass& p, uint32_t layer, const Vector& norm, const ShortConv& w) override;
  /// The plain per-token recurrence (ref::gated_delta_rule): the reference the GPU's chunked form
  /// is checked against.
  void delta_net(Pass& p, uint32_t layer, const Vector& norm, const DeltaNet& w) override;
  /// The context of new_sequence(ctx) (sequence_context with the options' default).
  uint32_t sequence_length(uint32_t ctx) const { return sequence_context(ctx, default_ctx_, c_.max_context); }
  /// For new_sequence(): cpu_new_sequence() with the model's RoPE table when `rope` (and the local
  /// table when rope_local_base_ is set).
  template <class F>
  std::unique_ptr<Sequence> make_sequence(const SequenceSize& s, bool rope, F&& make) {
    if (rope && rope_local_base_ > 0) kernels::rope_table_grow(rope_local_, s.context, c_.rope_dims, rope_local_base_);
    return cpu_new_sequence(s, c_, rope ? &rope_ : nullptr, std::forward<F>(make));
  }
  /// The device sequences are allocated on: none (host).
  gpu::Context* device() const { return nullptr; }

  ModelConfig c_;
  uint32_t default_ctx_ = 0;     // ModelOptions::context_length (new_sequence's default)
  kernels::KernelOptions kopt_;  // the sparse-attention switches (cpu_attention)
  uint32_t chunk_ = 1;           // cpu_attention's row groups (cpu_chunk(): the WebGPU backend's submissions)
  kernels::ref::Matrix embed_, lm_head_;
  std::vector<float> out_norm_, rope_;  // rope_: grown by new_sequence() to the longest sequence
  // The RoPE table of AttentionTensors::local_rope layers (theta rope_local_base_; 0: none), grown
  // with rope_.
  std::vector<float> rope_local_;
  double rope_local_base_ = 0;
  float final_softcap_ = 0;             // logit soft-capping (0: none)
  MemoryReport mem_;                    // weights counted by matrix() / vector()
};

/// A weight tensor dequantized to f32 as a ref::Matrix: K = shape[0] (the input dimension), N =
/// the product of the other dimensions (1 for a vector).
kernels::ref::Matrix cpu_matrix(const TensorRef& t);

/// h[t] = rmsnorm(x[t]) * norm for the T rows of x and h [T, d_model] (ref::rmsnorm, c.rms_eps).
void cpu_rmsnorm_rows(const ModelConfig& c, const float* x, const std::vector<float>& norm, float* h, uint32_t T);

/// x[t] += down(silu(gate(h[t])) * up(h[t])), h[t] = rmsnorm(x[t]) * norm, for t < T rows of
/// x [T, d_model] (Shazeer 2020); h [T, d_model] is scratch.
void cpu_swiglu_ffn(const ModelConfig& c, const std::vector<float>& norm, const kernels::ref::Matrix& gate,
                    const kernels::ref::Matrix& up, const kernels::ref::Matrix& down, float* x, float* h, uint32_t T);

/// Causal GQA attention of T query rows (q + t * q_stride, c.n_heads heads of c.head_dim) at
/// positions n_past + t over the cache rows kc/vc ([n_past + T][kv_dim]) into out + t * o_stride:
/// ref::attention per row, or, with ko.sparse_attn and n_past + T >= ko.sparse_threshold, the
/// block-sparse path of kernels/sparse_attention.h on the CPU twins (ref::sparse_block_means,
/// ref::sparse_select, ref::attention_sparse). The rows are taken in groups of `chunk` tokens
/// (cpu_chunk(): the WebGPU backend's submissions), each deciding dense or sparse and selecting
/// blocks on its own, as a WebGPU forward split into chunks does. With a sliding window W > 0
/// (Gemma 3's local layers) each row attends to keys [pos - W + 1, pos] only, densely. Throws
/// wgllm::Error for a bad sparse config.
void cpu_attention(const ModelConfig& c, const kernels::KernelOptions& ko, const float* q, uint32_t q_stride,
                   const float* kc, const float* vc, float* out, uint32_t o_stride, uint32_t n_past, uint32_t T,
                   float scale, uint32_t chunk, uint32_t window = 0);

/// logits = lm_head(rmsnorm(x_last) * out_norm) ([vocab] floats).
void cpu_logits(const ModelConfig& c, const float* x_last, const std::vector<float>& out_norm,
                const kernels::ref::Matrix& lm_head, std::vector<float>* logits);

}  // namespace wgllm
