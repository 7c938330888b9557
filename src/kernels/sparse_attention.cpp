#include "kernels/sparse_attention.h"

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/params_layout.h"
#include "kernels/wgsl.h"

namespace wgllm::kernels {
namespace {

using gpu::Bind;

uint32_t ceil_div(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

// The uniforms of this file's kernels (each matches its WGSL `struct P`: kernels/params_layout.h,
// sparse_attention_params_layouts() at the end).
struct MeansParams { uint32_t n_blocks, B, kv_dim, grid_y, b0, pad0, pad1, pad2; };
WGLLM_PARAMS(MeansParams, n_blocks, B, kv_dim, grid_y, b0, pad0, pad1, pad2);
struct SelectParams { uint32_t T, pos0, Hq, Hkv, HD, q_off, q_stride, kv_dim, B, top_k, window, S, qb0, n_cap, pad0, pad1; };
WGLLM_PARAMS(SelectParams, T, pos0, Hq, Hkv, HD, q_off, q_stride, kv_dim, B, top_k, window, S, qb0, n_cap, pad0, pad1);
struct GatherFlashParams {  // attention_flash GATHER=1
  uint32_t T, pos0, Hq, Hkv, HD, q_off, q_stride, o_off, o_stride, kv_dim;
  float scale;
  uint32_t split_len, n_split, B, S, qb0, ntb, pad0, pad1, pad2;
};
WGLLM_PARAMS(GatherFlashParams, T, pos0, Hq, Hkv, HD, q_off, q_stride, o_off, o_stride, kv_dim, scale, split_len, n_split,
             B, S, qb0, ntb, pad0, pad1, pad2);
struct GatherParams {  // attention_sparse
  uint32_t T, pos0, Hq, Hkv, HD, q_off, q_stride, o_off, o_stride, kv_dim;
  float scale;
  uint32_t B, S, qb0, pad0, pad1;
};
WGLLM_PARAMS(GatherParams, T, pos0, Hq, Hkv, HD, q_off, q_stride, o_off, o_stride, kv_dim, scale, B, S, qb0, pad0, pad1);

const gpu::Pipeline& means_pipe(OpContext& o) {
  return o.pipelines.get(variant_key("sparse_means", {}), [] {
    return gpu::KernelSpec{"", specialize("sparse_means", {}), {Bind::ReadOnly, Bind::ReadWrite, Bind::Uniform}};
  });
}
const gpu::Pipeline& select_pipe(OpContext& o) {
  return o.pipelines.get(variant_key("sparse_select", {}), [] {
    return gpu::KernelSpec{"", specialize("sparse_select", {}),
                           {Bind::ReadOnly, Bind::ReadOnly, Bind::ReadWrite, Bind::ReadWrite, Bind::Uniform}};
  });
}
const gpu::Pipeline& gather_pipe(OpContext& o, bool masked) {
  const Defines d{{"MASKED", masked ? "1" : "0"}};
  return o.pipelines.get(variant_key("attention_sparse", d), [&] {
    return gpu::KernelSpec{"", specialize("attention_sparse", d),
                           {Bind::ReadOnly, Bind::ReadOnly, Bind::ReadOnly, Bind::ReadOnly, Bind::ReadWrite, Bind::Uniform}};
  });
}

void check_shape(const AttentionShape& s) {
  if (s.HD % 4 || s.HD > 256) throw Error("sparse attention: head_dim must be a multiple of 4 and <= 256");
  if (s.Hkv == 0 || s.Hq % s.Hkv) throw Error("sparse attention: query heads must be a multiple of KV heads");
  if (s.T == 0) throw Error("sparse attention: no query tokens");
}

}  // namespace

SparseConfig sparse_config(const KernelOptions& opt) {
  SparseConfig c{opt.sparse_block, opt.sparse_top_k, opt.sparse_window};
  if (c.block == 0) throw Error("sparse attention: block size (--sparse-block) must be >= 1");
  if (c.window == 0) throw Error("sparse attention: window (--sparse-window) must be >= 1 block (the query's own block)");
  if (uint64_t(1) + c.top_k + c.window > kSparseMaxSlots)
    throw Error("sparse attention: 1 + top-k + window must be <= " + std::to_string(kSparseMaxSlots));
  return c;
}

SparseScratch make_sparse_scratch(gpu::Context& ctx, const KernelOptions& opt, uint32_t max_context, uint32_t max_T,
                                  uint32_t Hkv, uint32_t HD) {
  const SparseConfig c = sparse_config(opt);
  SparseScratch s;
  s.max_blocks = std::max<uint32_t>(1, ceil_div(std::max<uint32_t>(max_context, 1), c.block));
  s.max_qblocks = ceil_div(std::max<uint32_t>(max_T, 1), c.block) + 1;
  const uint64_t kv_dim = uint64_t(Hkv) * HD;
  s.means = gpu::Buffer(ctx, 4ull * s.max_blocks * kv_dim, gpu::BufferKind::Storage, "sparse_means");
  s.scores = gpu::Buffer(ctx, 4ull * s.max_qblocks * Hkv * s.max_blocks, gpu::BufferKind::Storage, "sparse_scores");
  s.index = gpu::Buffer(ctx, 4ull * s.max_qblocks * Hkv * c.slots(), gpu::BufferKind::Storage, "sparse_index");
  return s;
}

bool sparse_attention_used(const KernelOptions& opt, const AttentionShape& s) {
  // A sliding window (s.window) already bounds the keys: the sparse path is for dense layers only.
  return opt.sparse_attn && s.window == 0 && uint64_t(s.pos0) + s.T >= opt.sparse_threshold;
}

SparseMeansCache make_sparse_means_cache(gpu::Context& ctx, const KernelOptions& opt, uint32_t max_context,
                                         uint32_t kv_dim, const std::string& label) {
  const SparseConfig c = sparse_config(opt);
  SparseMeansCache m;
  m.block = c.block;
  m.max_blocks = std::max<uint32_t>(1, ceil_div(std::max<uint32_t>(max_context, 1), c.block));
  m.means = gpu::Buffer(ctx, 4ull * m.max_blocks * kv_dim, gpu::BufferKind::Storage, label);
  return m;
}

void sparse_block_means(OpContext& o, const AttentionShape& s, gpu::Binding kc, SparseScratch& sc,
                        SparseMeansCache* cache) {
  check_shape(s);
  const SparseConfig c = sparse_config(o.opt);
  const uint32_t n_blocks = (s.pos0 + s.T) / c.block, kv_dim = s.Hkv * s.HD;
  if (n_blocks > (cache ? cache->max_blocks : sc.max_blocks))
    throw Error("sparse attention: the context exceeds the block means' blocks");
  if (cache && cache->block != c.block) throw Error("sparse attention: the means cache was made for another block size");
  const uint32_t b0 = cache ? std::min(cache->valid_blocks, n_blocks) : 0;
  if (cache) cache->valid_blocks = n_blocks;
  if (n_blocks == b0) return;
  const uint32_t todo = n_blocks - b0, grid_y = std::min<uint32_t>(todo, 65535);  // maxComputeWorkgroupsPerDimension's minimum
  MeansParams prm{n_blocks, c.block, kv_dim, grid_y, b0, 0, 0, 0};
  o.rec.declare(gpu::TrafficBytes().r(gpu::Traffic::KvCache, 4ull * todo * c.block * kv_dim)
                    .w(gpu::Traffic::Activations, 4ull * todo * kv_dim));
  o.rec.dispatch(means_pipe(o), {kc, cache ? cache->means : sc.means}, prm, ceil_div(kv_dim, 64), grid_y, 1, "sparse_means");
}

void sparse_select(OpContext& o, const AttentionShape& s, F32Ref q, uint32_t q_stride, SparseScratch& sc,
                   const SparseMeansCache* cache) {
  check_shape(s);
  const SparseConfig c = sparse_config(o.opt);
  const uint32_t n_qb = sparse_query_blocks(s.pos0, s.T, c.block);
  if (n_qb > sc.max_qblocks || (s.pos0 + s.T + c.block - 1) / c.block > sc.max_blocks)
    throw Error("sparse attention: the forward exceeds the scratch's query blocks or blocks");
  if (cache && (s.pos0 + s.T) / c.block > cache->max_blocks) throw Error("sparse attention: the context exceeds the means cache");
  SelectParams prm{
      s.T, s.pos0, s.Hq, s.Hkv, s.HD, q.off, q_stride, s.Hkv * s.HD, c.block, c.top_k, c.window, c.slots(),
      s.pos0 / c.block, sc.max_blocks, 0, 0};
  const uint64_t cand = (s.pos0 + s.T) / c.block;
  o.rec.declare(gpu::TrafficBytes().r(gpu::Traffic::Activations, 4ull * s.T * s.Hq * s.HD)
                    .r(gpu::Traffic::Activations, 4ull * n_qb * cand * s.Hkv * s.HD * 1)
                    .w(gpu::Traffic::Activations, 4ull * n_qb * s.Hkv * c.slots()));
  o.rec.dispatch(select_pipe(o), {q.buf, cache ? cache->means : sc.means, sc.scores, sc.index}, prm, n_qb, s.Hkv, 1,
                 "sparse_select");
}

SparseKernel sparse_kernel(const OpContext& o, const AttentionShape& s) {
  // Head dims up to 128 only: --attn-flash-wide-heads governs the dense flash kernel alone.
  return o.opt.sparse_tiled && s.T > 1 && s.HD <= 128 && attention_flash_tile(o, s.HD).bc != 0 ? SparseKernel::Tiled
                                                                                                : SparseKernel::Rows;
}

namespace {
const gpu::Pipeline& tiled_pipe(OpContext& o, const FlashTile& ft, uint32_t HD) {
  const Defines d = attention_flash_defines(o, ft, HD, false, true);
  return o.pipelines.get(variant_key("attention_flash", d), [&] {
    return gpu::KernelSpec{"", attention_flash_wgsl(ft, HD, d),
                           {Bind::ReadOnly, Bind::ReadOnly, Bind::ReadOnly, Bind::ReadWrite, Bind::ReadOnly, Bind::Uniform}};
  });
}
}  // namespace

void attention_gather(OpContext& o, const AttentionShape& s, F32Ref q, uint32_t q_stride, gpu::Binding kc,
                      gpu::Binding vc, const gpu::Buffer& index, F32Ref out, uint32_t o_stride, SparseKernel k) {
  check_shape(s);
  const SparseConfig c = sparse_config(o.opt);
  const bool masked = k == SparseKernel::MaskedDense;
  // Gathered: each (head, token) row reads at most slots x B K and V rows of its KV head.
  const uint64_t rows = masked ? uint64_t(s.T) * s.pos0 + uint64_t(s.T) * (s.T + 1) / 2
                               : uint64_t(s.T) * std::min<uint64_t>(uint64_t(c.slots()) * c.block, s.pos0 + s.T);
  if (k == SparseKernel::Tiled) {
    const FlashTile ft = attention_flash_tile(o, s.HD);
    if (ft.bc == 0) throw Error("sparse attention: no flash tile covers head_dim " + std::to_string(s.HD));
    const uint32_t G = s.Hq / s.Hkv, n_qb = sparse_query_blocks(s.pos0, s.T, c.block);
    const uint32_t ntb = ceil_div(std::min(c.block, s.T) * G, ft.br);  // row blocks per query block
    GatherFlashParams prm{
        s.T, s.pos0, s.Hq, s.Hkv, s.HD, q.off, q_stride, out.off, o_stride, s.Hkv * s.HD, s.scale, 0, 1, c.block,
        c.slots(), s.pos0 / c.block, ntb, 0, 0, 0};
    // K/V rows loaded: per row block, the selected rows of its KV head once.
    o.rec.declare(gpu::TrafficBytes().r(gpu::Traffic::Activations, 4ull * s.T * s.Hq * s.HD)
                      .r(gpu::Traffic::KvCache, uint64_t(n_qb) * ntb * c.slots() * c.block * 8ull * s.Hkv * s.HD)
                      .w(gpu::Traffic::Activations, 4ull * s.T * s.Hq * s.HD));
    o.rec.dispatch(tiled_pipe(o, ft, s.HD), {q.buf, kc, vc, out.buf, index}, prm, n_qb * ntb, s.Hkv, 1,
                   "attention_sparse_tiled");
    return;
  }
  GatherParams prm{
      s.T, s.pos0, s.Hq, s.Hkv, s.HD, q.off, q_stride, out.off, o_stride, s.Hkv * s.HD, s.scale, c.block, c.slots(),
      s.pos0 / c.block, 0, 0};
  o.rec.declare(gpu::TrafficBytes().r(gpu::Traffic::Activations, 4ull * s.T * s.Hq * s.HD)
                    .r(gpu::Traffic::KvCache, rows * 8ull * s.Hq * s.HD).w(gpu::Traffic::Activations, 4ull * s.T * s.Hq * s.HD));
  o.rec.dispatch(gather_pipe(o, masked), {q.buf, kc, vc, index, out.buf}, prm, s.Hq, s.T, 1,
                 masked ? "attention_masked_dense" : "attention_sparse");
}

void attention_sparse(OpContext& o, const AttentionShape& s, F32Ref q, uint32_t q_stride, gpu::Binding kc,
                      gpu::Binding vc, F32Ref out, uint32_t o_stride, SparseScratch& sc,
                      SparseMeansCache* cache) {
  sparse_block_means(o, s, kc, sc, cache);
  sparse_select(o, s, q, q_stride, sc, cache);
  attention_gather(o, s, q, q_stride, kc, vc, sc.index, out, o_stride, sparse_kernel(o, s));
}

void sparse_compile(OpContext& o, uint32_t HD) {
  means_pipe(o);
  select_pipe(o);
  gather_pipe(o, false);
  if (sparse_kernel(o, {2, 0, 1, 1, HD, 1.0f}) == SparseKernel::Tiled) tiled_pipe(o, attention_flash_tile(o, HD), HD);
}

std::vector<ParamsLayout> sparse_attention_params_layouts() {
  return {WGLLM_LAYOUT(MeansParams, "sparse_means"),
          WGLLM_LAYOUT(SelectParams, "sparse_select"),
          WGLLM_LAYOUT(GatherFlashParams, "attention_flash", {{"GATHER", "1"}}),
          WGLLM_LAYOUT(GatherParams, "attention_sparse", {{"MASKED", "0"}}),
          WGLLM_LAYOUT(GatherParams, "attention_sparse", {{"MASKED", "1"}})};
}

}  // namespace wgllm::kernels
