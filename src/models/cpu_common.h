// Pieces every CPU reference model shares (plain C++ over kernels/ref.h): the SwiGLU FFN block,
// the output head, and greedy argmax on top of forward().
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
#include "models/model.h"

namespace wgllm {

/// The WebGPU backend's tokens per submission for these options (GpuModel: ModelOptions::prefill_chunk
/// capped by the trained context, at least 1; the auto default as a software adapter resolves it,
/// 512).
inline uint32_t cpu_chunk(const ModelConfig& c, const ModelOptions& o) {
  const uint32_t n = o.prefill_chunk == ModelOptions::kPrefillChunkAuto ? 512u : o.prefill_chunk;
  return std::max<uint32_t>(1, std::min(n, c.max_context));
}

/// What every CPU reference model shares: its config and options, the embedding, output norm and
/// head (dequantized to f32), the RoPE table, and forward_argmax() = argmax of forward()'s logits
/// (lowest id on ties).
class CpuModel : public Model {
 public:
  const ModelConfig& config() const override { return c_; }
  int32_t forward_argmax(Sequence& seq, std::span<const int32_t> toks) override;
  uint32_t prefill_chunk() const override { return chunk_; }

 protected:
  CpuModel(const ModelConfig& c, const ModelOptions& opt)
      : c_(c), default_ctx_(opt.context_length), kopt_(opt.kernels), chunk_(cpu_chunk(c, opt)) {}

  ModelConfig c_;
  uint32_t default_ctx_ = 0;     // ModelOptions::context_length (new_sequence's default)
  kernels::KernelOptions kopt_;  // the sparse-attention switches (cpu_attention)
  uint32_t chunk_ = 1;           // cpu_attention's row groups (cpu_chunk(): the WebGPU backend's submissions)
  kernels::ref::Matrix embed_, lm_head_;
  std::vector<float> out_norm_, rope_;  // rope_: grown by new_sequence() to the longest sequence
};

/// A weight tensor dequantized to f32 as a ref::Matrix: K = shape[0] (the input dimension), N =
/// the product of the other dimensions (1 for a vector).
kernels::ref::Matrix cpu_matrix(const TensorRef& t);

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
/// blocks on its own, as a WebGPU forward split into chunks does. Throws wgllm::Error for a bad
/// sparse config.
void cpu_attention(const ModelConfig& c, const kernels::KernelOptions& ko, const float* q, uint32_t q_stride,
                   const float* kc, const float* vc, float* out, uint32_t o_stride, uint32_t n_past, uint32_t T,
                   float scale, uint32_t chunk);

/// logits = lm_head(rmsnorm(x_last) * out_norm) ([vocab] floats).
void cpu_logits(const ModelConfig& c, const float* x_last, const std::vector<float>& out_norm,
                const kernels::ref::Matrix& lm_head, std::vector<float>* logits);

}  // namespace wgllm
