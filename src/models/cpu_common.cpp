#include "models/cpu_common.h"

#include "kernels/sparse_attention.h"
#include "kernels/sparse_ref.h"

namespace wgllm {

namespace ref = kernels::ref;

int32_t CpuModel::forward_argmax(Sequence& seq, std::span<const int32_t> toks) {
  std::vector<float> lg;
  forward(seq, toks, &lg);
  return int32_t(ref::argmax(lg.data(), uint32_t(lg.size())));
}

void cpu_swiglu_ffn(const ModelConfig& c, const std::vector<float>& norm, const ref::Matrix& gate,
                    const ref::Matrix& up, const ref::Matrix& down, float* x, float* h, uint32_t T) {
  const uint32_t D = c.d_model, F = c.ffn_dim;
  std::vector<float> g(size_t(T) * F), u(size_t(T) * F), a(size_t(T) * F);
  for (uint32_t t = 0; t < T; ++t) ref::rmsnorm(x + size_t(t) * D, norm.data(), h + size_t(t) * D, D, c.rms_eps);
  ref::matmul(gate, h, D, g.data(), F, T, false);
  ref::matmul(up, h, D, u.data(), F, T, false);
  for (uint32_t t = 0; t < T; ++t) ref::silu_mul(&g[size_t(t) * F], &u[size_t(t) * F], &a[size_t(t) * F], F);
  ref::matmul(down, a.data(), F, x, D, T, true);
}

void cpu_attention(const ModelConfig& c, const kernels::KernelOptions& ko, const float* q, uint32_t q_stride,
                   const float* kc, const float* vc, float* out, uint32_t o_stride, uint32_t n_past, uint32_t T,
                   float scale, uint32_t chunk) {
  const uint32_t Hq = c.n_heads, Hkv = c.n_kv_heads, HD = c.head_dim;
  for (uint32_t s0 = 0; s0 < T; s0 += std::max<uint32_t>(chunk, 1)) {
    const uint32_t n = std::min(std::max<uint32_t>(chunk, 1), T - s0), pos0 = n_past + s0;
    const float* qs = q + size_t(s0) * q_stride;
    float* os = out + size_t(s0) * o_stride;
    if (!kernels::sparse_attention_used(ko, {n, pos0, Hq, Hkv, HD, scale})) {
      for (uint32_t t = 0; t < n; ++t)
        ref::attention(qs + size_t(t) * q_stride, kc, vc, os + size_t(t) * o_stride, pos0 + t, Hq, Hkv, HD, scale);
      continue;
    }
    const kernels::SparseConfig sc = kernels::sparse_config(ko);
    const ref::SparseForward f{n, pos0, Hq, Hkv, HD, sc.block, sc.top_k, sc.window};
    const uint32_t n_blocks = (pos0 + n) / sc.block, kv_dim = Hkv * HD;
    std::vector<float> means(size_t(n_blocks) * kv_dim);
    ref::sparse_block_means(kc, n_blocks, sc.block, kv_dim, means.data());
    std::vector<uint32_t> index(size_t(f.query_blocks()) * Hkv * f.slots());
    ref::sparse_select(f, qs, q_stride, means.data(), index.data());
    for (uint32_t t = 0; t < n; ++t) {
      const uint32_t pos = pos0 + t;
      ref::attention_sparse(qs + size_t(t) * q_stride, kc, vc, os + size_t(t) * o_stride, pos, Hq, Hkv, HD, scale,
                            index.data() + size_t(pos / sc.block - f.qb0()) * Hkv * f.slots(), f.slots(), sc.block);
    }
  }
}

void cpu_logits(const ModelConfig& c, const float* x_last, const std::vector<float>& out_norm,
                const ref::Matrix& lm_head, std::vector<float>* logits) {
  std::vector<float> last(c.d_model);
  ref::rmsnorm(x_last, out_norm.data(), last.data(), c.d_model, c.rms_eps);
  logits->assign(c.vocab, 0.0f);
  ref::matmul(lm_head, last.data(), c.d_model, logits->data(), c.vocab, 1, false);
}

kernels::ref::Matrix cpu_matrix(const TensorRef& t) {
  kernels::ref::Matrix m;
  m.K = uint32_t(t.shape[0]);
  m.N = uint32_t(t.n_elements() / t.shape[0]);
  m.w = dequantize_tensor(t);
  return m;
}

}  // namespace wgllm
