// CPU twins of the block-sparse attention kernels (kernels/sparse_attention.h, same formulas and
// summation orders; the selection rule and its sources are described there). The CPU reference
// backend runs sparse attention through these.
#pragma once
#include <cstdint>
#include <vector>

namespace wgllm::kernels::ref {

/// means[b * kv_dim + c] = (sum_{r < B} kc[(b * B + r) * kv_dim + c]) / B for b < n_blocks
/// (r ascending, as sparse_means.wgsl).
void sparse_block_means(const float* kc, uint32_t n_blocks, uint32_t B, uint32_t kv_dim, float* means);

/// Shape of one sparse forward: T query rows (q rows at q + t * q_stride, Hq heads of HD each) at
/// positions pos0 + t, Hkv KV heads, block B, top_k, window W (>= 1), S = 1 + top_k + W slots.
struct SparseForward {
  uint32_t T, pos0, Hq, Hkv, HD, B, top_k, window;
  uint32_t slots() const { return 1 + top_k + window; }
  uint32_t qb0() const { return pos0 / B; }
  uint32_t query_blocks() const { return (pos0 + T - 1) / B - pos0 / B + 1; }
};

/// The gate scores of query block qb (of this forward) and KV head hk for every block c < n_cand
/// (sparse_select.wgsl's sums: qsum over rows t ascending then the G heads, then d ascending).
std::vector<float> sparse_scores(const SparseForward& f, const float* q, uint32_t q_stride, const float* means,
                                 uint32_t qb, uint32_t hk, uint32_t n_cand);

/// index[((qb - qb0) * Hkv + hk) * S + i]: the selection of sparse_select.wgsl (sink, top-k of
/// blocks 1..lo-1 by sparse_scores, window lo..qb with lo = max(0, qb + 1 - W); ascending ids,
/// 0xFFFFFFFF after), for every query block of the forward and KV head. means: of at least the
/// complete blocks (sparse_block_means). index: query_blocks() * Hkv * S entries.
void sparse_select(const SparseForward& f, const float* q, uint32_t q_stride, const float* means, uint32_t* index);

/// One query token at position pos (heads of q contiguous) over the keys j <= pos whose block j / B
/// is listed in its query block's rows: sel = the Hkv rows of S slots of that query block. Softmax
/// as ref::attention (max, then exp sums and the weighted V sum over the selected keys in ascending
/// order). masked_dense: the same over all keys 0..pos with the unselected ones skipped (the
/// reference; identical sums on the CPU).
void attention_sparse(const float* q, const float* kc, const float* vc, float* out, uint32_t pos, uint32_t Hq,
                      uint32_t Hkv, uint32_t HD, float scale, const uint32_t* sel, uint32_t S, uint32_t B,
                      bool masked_dense = false);

}  // namespace wgllm::kernels::ref
