#include "kernels/sparse_attention.h"

#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/wgsl.h"

namespace wgllm::kernels {
namespace {

using gpu::Bind;

uint32_t ceil_div(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

const gpu::Pipeline& means_pipe(OpContext& o) {
  return o.pipelines.get(variant_key("sparse_means", {}), [] {
    return gpu::KernelSpec{"", specialize(wgsl_source("sparse_means"), {}), {Bind::ReadOnly, Bind::ReadWrite, Bind::Uniform}};
  });
}
const gpu::Pipeline& select_pipe(OpContext& o) {
  return o.pipelines.get(variant_key("sparse_select", {}), [] {
    return gpu::KernelSpec{"", specialize(wgsl_source("sparse_select"), {}),
                           {Bind::ReadOnly, Bind::ReadOnly, Bind::ReadWrite, Bind::ReadWrite, Bind::Uniform}};
  });
}
const gpu::Pipeline& gather_pipe(OpContext& o, bool masked) {
  const Defines d{{"MASKED", masked ? "1" : "0"}};
  return o.pipelines.get(variant_key("attention_sparse", d), [&] {
    return gpu::KernelSpec{"", specialize(wgsl_source("attention_sparse"), d),
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
  return opt.sparse_attn && uint64_t(s.pos0) + s.T >= opt.sparse_threshold;
}

void sparse_block_means(OpContext& o, const AttentionShape& s, const gpu::Buffer& kc, SparseScratch& sc) {
  check_shape(s);
  const SparseConfig c = sparse_config(o.opt);
  const uint32_t n_blocks = (s.pos0 + s.T) / c.block, kv_dim = s.Hkv * s.HD;
  if (n_blocks > sc.max_blocks) throw Error("sparse attention: the context exceeds the scratch's blocks");
  if (n_blocks == 0) return;
  struct { uint32_t n_blocks, B, kv_dim, pad; } prm{n_blocks, c.block, kv_dim, 0};
  o.rec.declare(gpu::TrafficBytes().r(gpu::Traffic::KvCache, 4ull * n_blocks * c.block * kv_dim)
                    .w(gpu::Traffic::Activations, 4ull * n_blocks * kv_dim));
  o.rec.dispatch(means_pipe(o), {kc, sc.means}, prm, ceil_div(kv_dim, 64), n_blocks, 1, "sparse_means");
}

void sparse_select(OpContext& o, const AttentionShape& s, F32Ref q, uint32_t q_stride, SparseScratch& sc) {
  check_shape(s);
  const SparseConfig c = sparse_config(o.opt);
  const uint32_t n_qb = sparse_query_blocks(s.pos0, s.T, c.block);
  if (n_qb > sc.max_qblocks || (s.pos0 + s.T + c.block - 1) / c.block > sc.max_blocks)
    throw Error("sparse attention: the forward exceeds the scratch's query blocks or blocks");
  struct { uint32_t T, pos0, Hq, Hkv, HD, q_off, q_stride, kv_dim, B, top_k, window, S, qb0, n_cap, pad0, pad1; } prm{
      s.T, s.pos0, s.Hq, s.Hkv, s.HD, q.off, q_stride, s.Hkv * s.HD, c.block, c.top_k, c.window, c.slots(),
      s.pos0 / c.block, sc.max_blocks, 0, 0};
  const uint64_t cand = (s.pos0 + s.T) / c.block;
  o.rec.declare(gpu::TrafficBytes().r(gpu::Traffic::Activations, 4ull * s.T * s.Hq * s.HD)
                    .r(gpu::Traffic::Activations, 4ull * n_qb * cand * s.Hkv * s.HD * 1)
                    .w(gpu::Traffic::Activations, 4ull * n_qb * s.Hkv * c.slots()));
  o.rec.dispatch(select_pipe(o), {q.buf, sc.means, sc.scores, sc.index}, prm, n_qb, s.Hkv, 1, "sparse_select");
}

void attention_gather(OpContext& o, const AttentionShape& s, F32Ref q, uint32_t q_stride, const gpu::Buffer& kc,
                      const gpu::Buffer& vc, const gpu::Buffer& index, F32Ref out, uint32_t o_stride, bool masked_dense) {
  check_shape(s);
  const SparseConfig c = sparse_config(o.opt);
  struct { uint32_t T, pos0, Hq, Hkv, HD, q_off, q_stride, o_off, o_stride, kv_dim; float scale; uint32_t B, S, qb0, pad0, pad1; } prm{
      s.T, s.pos0, s.Hq, s.Hkv, s.HD, q.off, q_stride, out.off, o_stride, s.Hkv * s.HD, s.scale, c.block, c.slots(),
      s.pos0 / c.block, 0, 0};
  // Gathered: each (head, token) row reads at most slots x B K and V rows of its KV head.
  const uint64_t rows = masked_dense ? uint64_t(s.T) * s.pos0 + uint64_t(s.T) * (s.T + 1) / 2
                                     : uint64_t(s.T) * std::min<uint64_t>(uint64_t(c.slots()) * c.block, s.pos0 + s.T);
  o.rec.declare(gpu::TrafficBytes().r(gpu::Traffic::Activations, 4ull * s.T * s.Hq * s.HD)
                    .r(gpu::Traffic::KvCache, rows * 8ull * s.Hq * s.HD).w(gpu::Traffic::Activations, 4ull * s.T * s.Hq * s.HD));
  o.rec.dispatch(gather_pipe(o, masked_dense), {q.buf, kc, vc, index, out.buf}, prm, s.Hq, s.T, 1,
                 masked_dense ? "attention_masked_dense" : "attention_sparse");
}

void attention_sparse(OpContext& o, const AttentionShape& s, F32Ref q, uint32_t q_stride, const gpu::Buffer& kc,
                      const gpu::Buffer& vc, F32Ref out, uint32_t o_stride, SparseScratch& sc) {
  sparse_block_means(o, s, kc, sc);
  sparse_select(o, s, q, q_stride, sc);
  attention_gather(o, s, q, q_stride, kc, vc, sc.index, out, o_stride, false);
}

void sparse_compile(OpContext& o) {
  means_pipe(o);
  select_pipe(o);
  gather_pipe(o, false);
}

}  // namespace wgllm::kernels
