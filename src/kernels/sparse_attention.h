// Gathered block-sparse attention for long contexts (KernelOptions::sparse_attn, `--sparse-attn`).
//
// Keys are grouped in blocks of B cache rows (KernelOptions::sparse_block, default 64). For each
// query block (the query positions p with p / B == qb: a prefill chunk's rows grouped by block; a
// decode step is one query) and each KV head, sparse_select() picks the key blocks it attends to,
// in the InfLLM-v2 / MoBA family:
//   - block 0, the attention sink (InfLLM-v2, MiniCPM4 technical report 2025, sec. 2.1: "initial
//     tokens" kept; Xiao et al. 2024, StreamingLLM);
//   - the local window: the W most recent blocks qb - W + 1 .. qb (KernelOptions::sparse_window),
//     the query's own block included and causal-masked inside (j <= position);
//   - the top-k (KernelOptions::sparse_top_k) of the other blocks 1 .. qb - W by the gate score
//       score(c) = < sum_{t in qb} sum_{g < G} q[t, hk * G + g],  kbar[c, hk] >,
//       kbar[c, hk] = (1 / B) sum_{r < B} K[c * B + r, hk]                        (mean-pooled keys)
//     i.e. MoBA's gate s_i = <q, mean_pool(K[I_i])>, top-k over blocks (Lu et al. 2025, "MoBA:
//     Mixture of Block Attention for Long-Context LLMs", eq. 4-5), with the scores of the rows of
//     the query block and of the G query heads of one KV group summed: the query block uses the SUM
//     (equivalently the MEAN: same order of scores) of its queries, and GQA heads share one
//     selection as in NSA (Yuan et al. 2025, "Native Sparse Attention", eq. 10: importance scores
//     summed over the heads of a group). Ties go to the lower block id.
// The rows summed are those of the query block present in the forward: a block split between two
// prefill chunks (or decoded token by token) is scored per part, so sparse results depend on how a
// prompt is chunked (the same chunking always gives the same bits; the CPU backend chunks the same
// way only when it is given the same forwards).
// Attention then reads ONLY the selected K/V blocks through the index buffer (attention_sparse.wgsl,
// or for prefill attention_flash.wgsl GATHER (KernelOptions::sparse_tiled): online softmax over the
// selected keys in ascending order): O(T * (1 + W + k) * B) key reads per
// head instead of O(T * context). The block means (sparse_means.wgsl) are kept per layer and
// sequence in a SparseMeansCache (models/state.h KvState owns one when the switch is on): a forward
// computes only the blocks completed since the cache was last valid, so a decode step reads no key
// outside its selected blocks (one new block mean every B steps) instead of the whole key cache.
// Without a cache (tests, callers that pass none) every complete block is recomputed each forward.
// Each block's mean is one invocation's sum in a fixed order, so both give the same bits.
//
// The sparse path replaces dense attention only when the forward's context (pos0 + T keys) is at
// least KernelOptions::sparse_threshold (default 8192); below it kernels::attention records the
// dense kernels unchanged (bit-identical to the switch off). Models trained dense lose some
// quality: the switch is off by default.
//
// CPU twins: kernels/sparse_ref.h. Tests: sparse_attention_test.cpp.
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>

#include "gpu/buffer.h"
#include "kernels/ops.h"

namespace wgllm::kernels {

/// An unused slot of an index row.
inline constexpr uint32_t kSparseNone = 0xFFFFFFFFu;
/// Most slots (1 + top_k + window) per index row (the kernels' workgroup arrays).
inline constexpr uint32_t kSparseMaxSlots = 256;

/// The selection parameters (from KernelOptions): block size B, top-k, window W.
struct SparseConfig {
  uint32_t block = 64, top_k = 16, window = 4;
  /// Slots per index row: 1 (sink) + top_k + window.
  uint32_t slots() const { return 1 + top_k + window; }
};
/// SparseConfig of the options; throws wgllm::Error for block 0, window 0 or more than
/// kSparseMaxSlots slots.
SparseConfig sparse_config(const KernelOptions& opt);

/// Query blocks of a forward of T tokens at pos0: (pos0 + T - 1) / B - pos0 / B + 1.
inline uint32_t sparse_query_blocks(uint32_t pos0, uint32_t T, uint32_t B) { return (pos0 + T - 1) / B - pos0 / B + 1; }

/// Scratch of the sparse path, sized for a context and a largest forward (chunk).
struct SparseScratch {
  gpu::Buffer means;   // f32 [max_blocks][kv_dim]: kbar of every complete block
  gpu::Buffer scores;  // f32 [max_qblocks][Hkv][max_blocks]: gate scores (select's scratch)
  gpu::Buffer index;   // u32 [max_qblocks][Hkv][slots]: selected block ids, ascending, kSparseNone after
  uint32_t max_blocks = 0, max_qblocks = 0;
  uint64_t bytes() const { return means.size() + scores.size() + index.size(); }
};
/// Block means of one attention layer's key cache kept across forwards of one sequence: means of
/// blocks [0, valid_blocks) are those of the key rows now in the cache. Every forward invalidates
/// the blocks holding the rows it writes (kernels::attention calls invalidate_from(pos0)); rows
/// written any other way (a session import) must call reset(). Rollback by length (snapshot
/// restore) rewrites nothing, so it needs no call: the rows written after it invalidate their blocks.
struct SparseMeansCache {
  gpu::Buffer means;          // f32 [max_blocks][kv_dim]
  uint32_t max_blocks = 0, block = 0;
  uint32_t valid_blocks = 0;  // host counter, advanced when the means dispatch is recorded
  void invalidate_from(uint32_t row) {
    if (block) valid_blocks = std::min(valid_blocks, row / block);
  }
  void reset() { valid_blocks = 0; }
  uint64_t bytes() const { return means.size(); }
};
/// The cache for a key cache of max_context rows of kv_dim f32 (KernelOptions::sparse_block).
SparseMeansCache make_sparse_means_cache(gpu::Context& ctx, const KernelOptions& opt, uint32_t max_context,
                                         uint32_t kv_dim, const std::string& label);

/// Allocates the scratch for sequences of up to max_context positions and forwards of up to max_T
/// tokens with Hkv KV heads of HD. Throws wgllm::Error (sparse_config) or on allocation failure.
SparseScratch make_sparse_scratch(gpu::Context& ctx, const KernelOptions& opt, uint32_t max_context, uint32_t max_T,
                                  uint32_t Hkv, uint32_t HD);

/// Whether kernels::attention takes the sparse path for this forward: sparse_attn on and
/// s.pos0 + s.T >= sparse_threshold (the context after the forward, in keys).
bool sparse_attention_used(const KernelOptions& opt, const AttentionShape& s);

/// kbar of blocks 0 .. (pos0 + T) / B - 1 (the complete ones) into sc.means (sparse_means.wgsl);
/// with a cache, only blocks cache->valid_blocks .. (pos0 + T) / B - 1 into cache->means (no
/// dispatch when none is new), then valid_blocks = (pos0 + T) / B.
void sparse_block_means(OpContext& o, const AttentionShape& s, gpu::Binding kc, SparseScratch& sc,
                        SparseMeansCache* cache = nullptr);
/// The index rows of the forward's query blocks into sc.index (sparse_select.wgsl); needs the means
/// (cache->means with a cache, else sc.means). q rows as in kernels::attention.
void sparse_select(OpContext& o, const AttentionShape& s, F32Ref q, uint32_t q_stride, SparseScratch& sc,
                   const SparseMeansCache* cache = nullptr);
/// The attention kernel of the sparse path.
enum class SparseKernel {
  Rows,         // attention_sparse.wgsl: one workgroup per (query head, token), 64-key tiles
  Tiled,        // attention_flash.wgsl GATHER: one workgroup per (BR rows of one query block, KV head),
                // each selected K/V tile loaded once for all its rows (prefill)
  MaskedDense,  // attention_sparse.wgsl MASKED: the test reference, all keys 0..pos with the mask
};
/// The kernel kernels::attention uses: Tiled for T > 1 when KernelOptions::sparse_tiled is on and
/// attention_flash_tile(HD) fits the adapter (head dims 32..128, multiples of 32), else Rows.
SparseKernel sparse_kernel(const OpContext& o, const AttentionShape& s);
/// Attention over the blocks listed in `index` ([query block of the forward][Hkv][slots] u32, as
/// sparse_select writes it) with kernel k; Rows and Tiled read only those K/V rows, MaskedDense
/// visits all keys 0..pos and masks the unselected ones. Same arguments otherwise as
/// kernels::attention. Throws wgllm::Error unless HD % 4 == 0, HD <= 256 and Hkv divides Hq, or
/// for Tiled where no flash tile covers HD.
void attention_gather(OpContext& o, const AttentionShape& s, F32Ref q, uint32_t q_stride, gpu::Binding kc,
                      gpu::Binding vc, const gpu::Buffer& index, F32Ref out, uint32_t o_stride,
                      SparseKernel k);
/// The sparse path: sparse_block_means, sparse_select, attention_gather with sparse_kernel()
/// (3 dispatches; 2 with a cache when no block completed since the last forward).
void attention_sparse(OpContext& o, const AttentionShape& s, F32Ref q, uint32_t q_stride, gpu::Binding kc,
                      gpu::Binding vc, F32Ref out, uint32_t o_stride, SparseScratch& sc,
                      SparseMeansCache* cache = nullptr);
/// Compiles the sparse path's pipelines for head dim HD (the warm-up, when sparse_attn is on).
void sparse_compile(OpContext& o, uint32_t HD);

}  // namespace wgllm::kernels
