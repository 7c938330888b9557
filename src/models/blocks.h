// The block interface of the two backends, declared once: CpuModel (models/cpu_common.*, plain C++
// over the kernels' CPU twins) and GpuModel (models/gpu_common.*, gpu_blocks.cpp: WGSL kernels)
// both derive from Blocks<their types> and implement every member; an architecture written once
// (models/llama.cpp, models/lfm2.cpp, models/qwen35.cpp) is a class template over its backend base that loads its
// weights with the builders and writes its layers in body() with the blocks. Shapes: d = d_model,
// q_dim = heads x head_dim, kv_dim = KV heads x head_dim, ffn = the FFN width; matrices {in, out}.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "formats/tensor_store.h"
#include "models/config.h"

namespace wgllm {

/// The tensors of one attention layer: q, k, v {d, q_dim | kv_dim}, o {q_dim, d}; the optional
/// parts are nullptr when the layer has none.
struct AttentionTensors {
  const TensorRef* wq = nullptr;
  const TensorRef* wk = nullptr;
  const TensorRef* wv = nullptr;
  const TensorRef* wo = nullptr;
  /// Q/K/V projection biases {q_dim}, {kv_dim}, {kv_dim}, y = W x + b (Qwen2): all three or none.
  const TensorRef* bq = nullptr;
  const TensorRef* bk = nullptr;
  const TensorRef* bv = nullptr;
  /// Per-head RMSNorm multipliers [head_dim] of q and k before RoPE (QK-norm): both or neither.
  const std::vector<float>* q_norm = nullptr;
  const std::vector<float>* k_norm = nullptr;
  /// RMSNorm weight {d} of the attention output before the residual add (Gemma 3's post-norm).
  const TensorRef* post_norm = nullptr;
  /// wq's rows are [q | gate] (2 q_dim): Qwen3.5's output gate.
  bool gate = false;
  /// The attention logits' scale (0: 1 / sqrt(head_dim)).
  float scale = 0;
  /// Sliding window W (0: none): a query at pos sees keys pos - W + 1 .. pos.
  uint32_t window = 0;
  /// RoPE with the model's local theta (the backends' rope_local_base_: Gemma 3's sliding layers).
  bool local_rope = false;
};

/// The options of a gated FFN.
struct FfnOptions {
  /// act = the tanh GELU (GeGLU: Gemma's gelu_pytorch_tanh), else SiLU (SwiGLU).
  bool gelu_tanh = false;
  /// RMSNorm weight {d} of the FFN output before the residual add (Gemma 3's post-norm), or nullptr.
  const TensorRef* post_norm = nullptr;
};

/// W: a backend's types: Matrix (a weight), Vector (an f32 vector), Pass (one forward as body()
/// sees it), and the weights of each block (Ffn, Attention, ShortConv, DeltaNet).
template <class W>
class Blocks {
 public:
  using Matrix = typename W::Matrix;
  using Vector = typename W::Vector;
  using Pass = typename W::Pass;
  using Ffn = typename W::Ffn;
  using Attention = typename W::Attention;
  using ShortConv = typename W::ShortConv;
  using DeltaNet = typename W::DeltaNet;
  virtual ~Blocks() = default;

 protected:
  /// The layers of one forward (the residual stream in the pass's rows).
  virtual void body(Pass& p) = 0;

  // ---- Weights (label: the GPU buffer name, "blk.N." + name; counted in the memory report) ----
  virtual Matrix matrix(const TensorRef& t, const std::string& label) = 0;
  virtual Vector vector(const TensorRef& t, const std::string& label) = 0;
  virtual Vector vector(const std::vector<float>& v, const std::string& label) = 0;
  /// The token embedding {d, vocab} and the output head {d, vocab} (nullptr: tied to the
  /// embedding). The WebGPU backend splits a table larger than one storage binding into row blocks
  /// (one buffer each; a tied table's blocks serve both the embedding and the head).
  virtual void embedding(const TensorRef& embed, const TensorRef* lm_head) = 0;
  /// A gated FFN: gate, up {d, ffn}, down {ffn, d}; its activation and post-norm (FfnOptions).
  virtual Ffn ffn_weights(const TensorRef& gate, const TensorRef& up, const TensorRef& down, const std::string& prefix,
                          const FfnOptions& o) = 0;
  /// GQA attention (AttentionTensors: the projections and the layer's options).
  virtual Attention attention_weights(const AttentionTensors& t, const std::string& prefix) = 0;
  /// LFM2 ShortConv: in_proj {d, 3d} (rows [B | C | x]), conv taps (HF {L, 1, d} / GGUF {L, d}),
  /// out_proj {d, d}; kernel width L.
  virtual ShortConv short_conv_weights(const TensorRef& in_proj, const TensorRef& conv, const TensorRef& out_proj,
                                       uint32_t L, const std::string& prefix) = 0;
  /// Gated DeltaNet: in-projections qkv {d, conv_dim}, z {d, value_dim}, b, a {d, nv}; out_proj
  /// {value_dim, d}; conv taps [conv_dim][conv_k]; A_log and dt_bias [nv]; the gated RMSNorm weight [dv].
  virtual DeltaNet delta_net_weights(const TensorRef& w_qkv, const TensorRef& w_z, const TensorRef& w_b,
                                     const TensorRef& w_a, const TensorRef& w_out, const TensorRef& conv,
                                     const std::vector<float>& a_log, const TensorRef& dt_bias, const TensorRef& norm,
                                     const DeltaNetShape& s, const std::string& prefix) = 0;

  // ---- Blocks: each adds its output to the residual stream x of the pass's rows ----
  /// x *= s for every row (Gemma 3's embedding scale, sqrt(d_model)).
  virtual void scale(Pass& p, float s) = 0;
  /// x += down(act(gate(h)) * up(h)), h = rmsnorm(x) * norm; act = SiLU (SwiGLU, Shazeer 2020) or
  /// the tanh GELU (GeGLU, FfnOptions::gelu_tanh); with a post-norm, x += rmsnorm(down(..)) * post_norm.
  virtual void gated_ffn(Pass& p, const Vector& norm, const Ffn& w) = 0;
  /// x += wo (attention(rope(qn(q)), rope(kn(k)), v) * sigmoid(gate)) with q (| gate), k, v =
  /// w{q,k,v}(rmsnorm(x) * norm) (+ their biases), qn / kn the QK-norm when the layer has one, the
  /// new k and v stored in layer `layer`'s KvState at the pass's positions; causal GQA (keys
  /// pos_q - pos_k < window on a sliding layer); the gate only with a gate (transformers
  /// Qwen3_5Attention; Lfm2Attention and LlamaAttention without it); with a post-norm,
  /// x += rmsnorm(wo a) * post_norm (Gemma 3).
  virtual void attention(Pass& p, uint32_t layer, const Vector& norm, const Attention& w) = 0;
  /// LFM2 ShortConv (transformers Lfm2ShortConv.slow_forward): [B | C | xs] = in_proj(rmsnorm(x) *
  /// norm), y = C * causal_conv(B * xs) over layer `layer`'s ConvState (its last L-1 rows of B * xs),
  /// x += out_proj(y).
  virtual void short_conv(Pass& p, uint32_t layer, const Vector& norm, const ShortConv& w) = 0;
  /// Gated DeltaNet (transformers Qwen3_5GatedDeltaNet; Yang et al. 2024): qkv, z, b, a =
  /// w_{qkv,z,b,a}(rmsnorm(x) * norm); q, k, v = SiLU(causal_conv(qkv)) over the ConvState, q and k
  /// L2-normalised per head; beta = sigmoid(b), g = -exp(A_log) softplus(a + dt_bias); the gated
  /// delta rule over the recurrent state [nv, dk, dv] of layer `layer`'s DeltaState;
  /// x += out_proj(rmsnorm(o) * w * silu(z)).
  virtual void delta_net(Pass& p, uint32_t layer, const Vector& norm, const DeltaNet& w) = 0;
};

}  // namespace wgllm
