// CPU twins of the Gated DeltaNet / Qwen3.5 ops (kernels/gdn_ops.h): plain C++ in f32. The
// formulas follow transformers models/qwen3_5/modeling_qwen3_5.py (l2norm, Qwen3_5RMSNormGated,
// Qwen3_5Attention's sigmoid gate, Qwen3_5GatedDeltaNet's g/beta, torch_recurrent_gated_delta_rule
// and torch_chunk_gated_delta_rule) and flash-linear-attention fla/ops/gated_delta_rule.
#pragma once
#include <cstdint>

namespace wgllm::kernels::ref {

/// One row of H heads of D floats at x + h*head_stride, in place:
/// x <- x / sqrt(sum(x^2) + eps) (transformers l2norm, eps 1e-6 there).
void l2norm_heads(float* x, uint32_t H, uint32_t D, uint32_t head_stride, float eps);
/// Same layout, in place: x <- (x / sqrt(mean(x^2) + eps)) * w, w[D] (QK-norm; Qwen3_5RMSNorm's
/// (1 + weight) is folded into w by the caller).
void rmsnorm_heads(float* x, const float* w, uint32_t H, uint32_t D, uint32_t head_stride, float eps);
/// Qwen3_5RMSNormGated on one row of H heads of D (contiguous), in place:
/// x[h,i] <- (x[h,i] / sqrt(mean_i(x[h,:]^2) + eps)) * w[i] * silu(z[h,i]), silu(a) = a/(1+exp(-a)).
void gated_rmsnorm(float* x, const float* z, const float* w, uint32_t H, uint32_t D, float eps);
/// Gated attention output (Qwen3_5Attention): x[i] <- x[i] * sigmoid(g[i]), i < n.
void sigmoid_gate(float* x, const float* g, uint32_t n);
/// Gated DeltaNet gates of one token, nv heads: g[h] = -exp(a_log[h]) * softplus(a[h] + dt_bias[h])
/// (log-space decay, <= 0; softplus as torch: x for x > 20, else log1p(exp(x))) and
/// beta[h] = sigmoid(b[h]).
void gdn_gates(const float* a, const float* b, const float* a_log, const float* dt_bias, float* g, float* beta,
               uint32_t nv);

/// Layout of the gated delta rule's operands for T tokens (offsets already applied to pointers):
///   q, k: row t at qk + t*qk_stride, head hk (< nk) at + hk*dk (already L2-normalised; q is scaled
///         by `scale` inside); value head h reads key head h / (nv / nk) (repeat_interleave).
///   v:    row t at v + t*v_stride, head h at + h*dv.
///   g, beta: g[t*gb_stride + h], beta[t*gb_stride + h].
///   state: [nv][dk][dv] f32, read and updated in place (zeros for an empty sequence).
///   out:  row t at out + t*o_stride, head h at + h*dv.
struct GdnArgs {
  const float *q, *k, *v, *g, *beta;
  uint32_t qk_stride, v_stride, gb_stride;
  float* state;
  float* out;
  uint32_t o_stride;
  uint32_t T, nk, nv, dk, dv;
  float scale;  // dk^-1/2
  bool tiled_v_heads = false;  // key head of value head h: h % nk, else h / (nv / nk) (GdnOperands)
  uint32_t key_head(uint32_t h) const { return tiled_v_heads ? h % nk : h / (nv / nk); }
};

/// The plain per-token recurrence (torch_recurrent_gated_delta_rule), per value head and token:
///   S <- exp(g_t) S;  u = beta_t (v_t - S^T k_t);  S <- S + k_t u^T;  o_t = S^T (scale q_t).
void gated_delta_rule(const GdnArgs& a);

/// The chunkwise parallel form (torch_chunk_gated_delta_rule; Yang et al. 2024, "Gated Delta
/// Networks", UT transform), chunks of `chunk` tokens, the last one partial (no padding: its
/// length is used, so nothing past T touches the state). Per chunk with cumulative log-decay
/// G_t = sum_{s<=t} g_s (chunk-local), initial state S:
///   A[t,s] = beta_t exp(G_t - G_s) k_t.k_s (s < t);  solve (I + A) X = [beta e^G K | beta V]
///   by forward substitution -> W, U0;  U = U0 - W S;
///   o_t = e^{G_t} S^T q_t + sum_{s<=t} exp(G_t - G_s)(q_t.k_s) U_s;
///   S <- e^{G_last} S + sum_s exp(G_last - G_s) k_s U_s^T.
/// Same result as gated_delta_rule up to rounding; twin of the GPU gdn_chunk kernels (same order).
void gated_delta_rule_chunked(const GdnArgs& a, uint32_t chunk);

}  // namespace wgllm::kernels::ref
