#include "models/gpu_common.h"

#include "kernels/gdn_ops.h"
#include "kernels/inactive_switches.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include <fmt/core.h>

#include "core/error.h"
#include "gpu/context.h"
#include "kernels/matmul_tiled.h"
#include "kernels/nll.h"
#include "kernels/rope_table.h"
#include "kernels/sparse_attention.h"
#include "models/state.h"

namespace wgllm {

GpuModel::GpuModel(const ModelConfig& c, const ModelOptions& opt) : c_(c), opt_(opt) {
  gpu::ContextOptions co;
  co.adapter_index = opt.adapter_index;
  co.shader_runtime_checks = opt.shader_runtime_checks;
  co.shader_loop_bounding = opt.shader_loop_bounding;
  co.want_coop_matrix = opt.kernels.matmul_coop;
  ctx_ = gpu::Context::create(co);
  pipes_ = std::make_unique<gpu::PipelineCache>(*ctx_);
  // 16384 parameter slots (4 MiB): a batched decode step records per-sequence attention
  // dispatches for every layer (max_batch_seqs()).
  rec_ = std::make_unique<gpu::Recorder>(*ctx_, kMaxDispatches);
  // H200, 2026-12-01 (bench/results/2026-12-01-h200-submit-chunk): 32 dispatches per submission
  // let the GPU run while the host records; decode x1.48 after a 512-token prompt. Not measured on
  // software adapters: they keep one submission per forward.
  rec_->set_submit_chunk(opt.submit_chunk != ModelOptions::kSubmitChunkAuto ? opt.submit_chunk
                         : ctx_->info().is_software()                     ? 0u
                                                                          : 32u);
}

uint64_t GpuModel::binding_limit() const {
  const WGPULimits& lim = ctx_->info().limits;
  return std::min<uint64_t>(lim.maxStorageBufferBindingSize, lim.maxBufferSize);
}

kernels::GpuWeight GpuModel::weight(const std::vector<const TensorRef*>& parts, const std::string& label) {
  return upload_matrix(*ctx_, parts, label, mem_, opt_.q6k_packed);
}

gpu::Buffer GpuModel::f32_buffer(const TensorRef& t, const std::string& label) {
  return upload_f32(*ctx_, dequantize_tensor(t), label, mem_);
}

void GpuModel::upload_ffn(const TensorRef& gate, const TensorRef& up, const TensorRef& down, bool fused,
                          const std::string& p, kernels::GpuWeight& gate_up_w, kernels::GpuWeight& gate_w,
                          kernels::GpuWeight& up_w, kernels::GpuWeight& down_w) {
  if (fused) {
    gate_up_w = weight({&gate, &up}, p + "ffn_gate_up");
  } else {
    gate_w = weight({&gate}, p + "ffn_gate");
    up_w = weight({&up}, p + "ffn_up");
  }
  down_w = weight({&down}, p + "ffn_down");
}

void GpuModel::alloc_chunk_buffers(std::initializer_list<ChunkBuffer> bufs) {
  // Tokens per forward. Auto: 2048 on hardware adapters (H200, 2026-12-04,
  // bench/results/2026-12-04-h200-prefill-chunk-serve: TTFT at 4096 tokens -8.8% against 512 on the
  // Qwen2.5-1.5B shape, no change at 512; `wgllm serve` with 16 streams: TTFT p99 156-164 vs 200-322
  // ms), halved (down to 512) while the widest of the architecture's chunk-sized buffers would
  // exceed one storage binding (scratch() refuses it); 512 on software adapters (CI's reference;
  // not measured there).
  std::vector<ChunkBuffer> all = {{&x_, c_.d_model, "x"}, {&h_, c_.d_model, "h"}, {&tokens_, 1, "tokens"}};
  if (post_norms_) all.push_back({&o_, c_.d_model, "o"});  // a post-norm's input (attention_weights / ffn_weights)
  all.insert(all.end(), bufs);
  uint64_t widest = 1;
  for (const ChunkBuffer& b : all) widest = std::max(widest, b.per_token);
  uint32_t chunk = opt_.prefill_chunk;
  if (chunk == ModelOptions::kPrefillChunkAuto) {
    chunk = ctx_->info().is_software() ? 512u : 2048u;
    while (chunk > 512 && chunk * widest * 4 > binding_limit()) chunk /= 2;
  }
  chunk_ = std::max<uint32_t>(1, std::min(chunk, c_.max_context));
  for (const ChunkBuffer& b : all) *b.buf = scratch(uint64_t(chunk_) * b.per_token, b.name, b.per_token);
  logits_ = scratch(c_.vocab, "logits");
  amax_ = scratch(kernels::argmax_buffer_bytes() / 4, "argmax");  // the id, then the split scan's candidates
  attn_split_ = scratch(kernels::attention_split_floats(chunk_, c_.n_heads, c_.head_dim), "attn_split");
  if (opt_.kernels.sparse_attn) {  // --sparse-attn: block means, selection and index scratch
    sparse_ = kernels::make_sparse_scratch(*ctx_, opt_.kernels, c_.max_context, chunk_, c_.n_kv_heads, c_.head_dim);
    mem_.scratch += sparse_.bytes();
  }
}

gpu::Buffer GpuModel::scratch(uint64_t floats, const char* name, uint64_t per_token) {
  const uint64_t bytes = std::max<uint64_t>(floats, 1) * 4;
  const uint64_t cap = binding_limit();
  if (bytes > cap) {
    std::string fix = "; a smaller context or model";
    if (per_token && cap / (4 * per_token) >= 1)
      fix = "; use --prefill-chunk " + std::to_string(cap / (4 * per_token)) + " or less";
    throw Error(fmt::format("activation buffer '{}' of {:.1f} MiB (prefill chunk {} tokens) exceeds the adapter's largest "
                            "storage binding ({:.1f} MiB){}",
                            name, bytes / 1048576.0, chunk_, cap / 1048576.0, fix));
  }
  mem_.scratch += bytes;
  return gpu::Buffer(*ctx_, bytes, gpu::BufferKind::Storage, name);
}

std::string GpuModel::backend_name() const { return "webgpu (" + ctx_->info().name + ")"; }

std::string GpuModel::software_adapter() const {
  const gpu::AdapterInfo& a = ctx_->info();
  if (!a.is_software()) return {};
  return a.driver.empty() || a.driver == a.name ? a.name : a.name + ", " + a.driver;
}

uint32_t GpuModel::prefill_kernel_tokens() const {
  kernels::OpContext o = op_context();
  return std::max(kernels::kMatmulTiledMinTokens, kernels::matvec_max_tokens(o)) + 1;
}

std::vector<std::string> GpuModel::inactive_switches() const {
  return kernels::inactive_switches(op_context());
}

void GpuModel::compile_switched_pipelines() {
  kernels::OpContext o = op_context();
  // --gdn-chunk-long: only forwards of at least --gdn-chunk-long-from tokens take it (the warm-up's
  // short forwards compile the short chunk)
  if (gdn_dk_ && kernels::gdn_chunk_for(opt_.kernels, chunk_) != kernels::gdn_chunk_for(opt_.kernels, 1))
    kernels::gdn_compile_chunked(o, kernels::gdn_chunk_for(opt_.kernels, chunk_), gdn_dk_, gdn_dv_);
  if (c_.n_heads == 0) return;
  kernels::attention_compile_prefill_split(o, c_.head_dim);  // --attn-chunk: the warm-up's far forwards are short chunks
  if (opt_.kernels.sparse_attn) kernels::sparse_compile(o, c_.head_dim);
}

void GpuModel::attach_sparse_means(Sequence& seq) {
  if (!opt_.kernels.sparse_attn) return;
  for (const auto& st : seq.states()) {
    auto* kv = dynamic_cast<KvState*>(st.get());
    if (!kv) continue;
    const uint32_t kv_dim = uint32_t(kv->keys().row_bytes() / 4);
    kv->set_sparse_means(kernels::make_sparse_means_cache(*ctx_, opt_.kernels, uint32_t(kv->keys().rows()), kv_dim,
                                                          "layers." + std::to_string(kv->layer()) + ".self_attn.block_means"));
  }
}

void GpuModel::set_profiling(bool on) {
  rec_->set_profiling(on);
  rec_->set_traffic_log(on);
}

uint32_t GpuModel::sequence_length(uint32_t ctx) const {
  return sequence_context(ctx, opt_.context_length, c_.max_context);
}

void GpuModel::prepare_sequence(const SequenceSize& s, gpu::Buffer* rope, uint32_t* rope_rows) {
  const uint64_t binding = binding_limit();
  const std::string dev = backend_name();
  if (s.largest_buffer > binding)
    throw Error("new sequence on " + dev + ": " + s.describe() + "; its largest buffer exceeds the device's storage "
                "binding limit of " + std::to_string(binding) + " bytes; request a smaller context (-c, context_length)");
  const uint64_t table = rope ? kernels::rope_table_bytes(s.context, c_.rope_dims) : 0;
  if (table > binding)
    throw Error("new sequence on " + dev + ": " + s.describe() + "; its RoPE table of " + std::to_string(table) +
                " bytes exceeds the device's storage binding limit of " + std::to_string(binding) +
                " bytes; request a smaller context (-c, context_length)");
  // Host side: the sequence's per-position bookkeeping and the table built on the host.
  SequenceSize host = s;
  host.kv_cache = host.recurrent = 0;
  const bool grow_local = rope && rope_local_base_ > 0 && s.context > rope_local_rows_;
  check_host_memory(host, (rope && s.context > *rope_rows ? table : 0) + (grow_local ? table : 0), dev);
  if (!rope || (s.context <= *rope_rows && !grow_local)) return;
  // Bind groups are cached by Buffer::id(), so a replaced buffer can never be bound again.
  auto grow = [&](gpu::Buffer& buf, double base, const char* name) {
    const std::vector<float> t = kernels::rope_table(s.context, c_.rope_dims, base);
    gpu::Buffer b(*ctx_, t.size() * 4, gpu::BufferKind::Storage, name);
    b.write(*ctx_, 0, t.data(), t.size() * 4);
    mem_.scratch += b.size() - (buf ? buf.size() : 0);
    buf = std::move(b);
  };
  try {
    if (s.context > *rope_rows) {
      grow(*rope, c_.rope_base, "rope_table");
      *rope_rows = s.context;
    }
    if (grow_local) {  // on its own: a failure above leaves it to be grown by the next sequence
      grow(rope_local_, rope_local_base_, "rope_table_local");
      rope_local_rows_ = s.context;
    }
  } catch (const std::bad_alloc&) {
    sequence_alloc_failed(s, dev, "out of host memory for the RoPE table");
  } catch (const Error& e) {
    sequence_alloc_failed(s, dev, e.what());
  }
}

void GpuModel::forward(Sequence& seq, std::span<const int32_t> toks, std::vector<float>* logits) {
  run(seq, toks, logits ? HeadOut::Logits : HeadOut::None, logits);
}

int32_t GpuModel::forward_argmax(Sequence& seq, std::span<const int32_t> toks) {
  return run(seq, toks, HeadOut::Argmax, nullptr);
}

uint64_t GpuModel::forward_argmax_async(Sequence& seq, std::span<const int32_t> toks, bool undoable) {
  if (!async_argmax())
    throw Error(std::string("pipelined greedy decoding is not available on this model: ") +
                (!opt_.decode_pipeline ? "--decode-pipeline is off" : "per-dispatch profiling is on"));
  const bool chained = toks.empty();
  if (chained && !amax_ready_) throw Error("forward_argmax_async: the last forward did not end in argmax (no id on the device)");
  const int32_t placeholder = 0;  // checked as an id; the embedding reads the device's id instead
  const std::span<const int32_t> in = chained ? std::span<const int32_t>(&placeholder, 1) : toks;
  if (undoable && in.size() != 1) throw Error("forward_argmax_async: only a one-token forward can be undone");
  if (uint64_t(seq.n_past()) + in.size() > seq.context_length()) check_forward(seq, in, c_.vocab);  // throws
  if (undoable) rec_->copy_on_begin(seq.prepare_undo());
  chained_ = chained;
  // A one-token step is submitted in --decode-submit-chunk pieces (default: whole), a prompt in
  // --submit-chunk pieces.
  const uint32_t chunk = rec_->submit_chunk();
  if (in.size() == 1) rec_->set_submit_chunk(opt_.decode_submit_chunk);
  try {
    run(seq, in, HeadOut::ArgmaxAsync, nullptr);
  } catch (...) {
    chained_ = false;
    rec_->set_submit_chunk(chunk);
    rec_->copy_on_begin({});
    throw;
  }
  rec_->set_submit_chunk(chunk);
  chained_ = false;
  return rec_->last_ticket();
}

int32_t GpuModel::argmax_result(uint64_t ticket) {
  uint32_t id = 0;
  rec_->wait_read(ticket, &id);
  return int32_t(id);
}

const gpu::Buffer& GpuModel::token_ids(const gpu::Buffer& tokens, const gpu::Buffer& amax, std::span<const int32_t> toks,
                                       bool batch) {
  if (chained_ && !batch) return amax;
  tokens.write(*ctx_, 0, toks.data(), uint64_t(toks.size()) * 4);
  return tokens;
}

void GpuModel::forward_nll(Sequence& seq, std::span<const int32_t> toks, std::span<const int32_t> targets,
                           std::vector<float>* nll) {
  check_nll_targets(toks, targets, c_.vocab);
  check_forward(seq, toks, c_.vocab);
  amax_ready_ = false;  // these forwards end in no argmax: no id for a chained step
  const uint32_t T = uint32_t(toks.size());
  nll->assign(T, 0.0f);
  struct Reset {  // the request never outlives this call, whatever a submission throws
    GpuModel& m;
    ~Reset() {
      m.nll_targets_ = {};
      m.nll_out_ = nullptr;
    }
  } reset{*this};
  for (uint32_t s = 0; s < T; s += chunk_) {
    const uint32_t n = std::min(chunk_, T - s);
    nll_targets_ = targets.subspan(s, n);
    nll_out_ = nll->data() + s;
    const bool scored = std::any_of(nll_targets_.begin(), nll_targets_.end(), [](int32_t t) { return t >= 0; });
    chunk(seq, toks.subspan(s, n), scored ? HeadOut::Nll : HeadOut::None, nullptr);
  }
}

int32_t GpuModel::finish_forward(kernels::OpContext& o, const ModelConfig& c, const gpu::Buffer& x, uint32_t last_row,
                                 const HeadBuffers& hb, HeadOut out, std::vector<float>* logits) {
  if (out != HeadOut::Nll) return wgllm::finish_forward(o, c, x, last_row, hb, out, logits);
  const HeadPart whole{&hb.lm_head, 0};
  record_nll_head(o, x, last_row / c.d_model + 1, hb.out_norm, {&whole, 1});
  return -1;
}

uint32_t GpuModel::nll_block_rows() const {
  const uint64_t bytes = std::min<uint64_t>(256ull << 20, binding_limit());
  uint64_t r = std::min<uint64_t>(chunk_, bytes / (uint64_t(c_.vocab) * 4));
  if (r >= 32) r = r / 32 * 32;
  return uint32_t(std::max<uint64_t>(r, 1));
}

void GpuModel::record_nll_head(kernels::OpContext& o, const gpu::Buffer& x, uint32_t T, const gpu::Buffer& out_norm,
                               std::span<const HeadPart> parts) {
  if (nll_targets_.size() != T || !nll_out_) throw Error("record_nll_head: no NLL request for this submission");
  const uint32_t D = c_.d_model, V = c_.vocab, R = nll_block_rows();
  if (!nll_y_) {
    auto mk = [&](uint64_t bytes, const char* name) {
      mem_.scratch += bytes;
      return gpu::Buffer(*ctx_, bytes, gpu::BufferKind::Storage, name);
    };
    nll_h_ = mk(uint64_t(R) * D * 4, "nll.h");
    nll_logits_ = mk(uint64_t(R) * V * 4, "nll.logits");
    nll_tgt_ = mk(uint64_t(chunk_) * 4, "nll.targets");
    nll_y_ = mk(uint64_t(chunk_) * 4, "nll.y");
  }
  uint32_t lo = 0, hi = T;
  while (lo < T && nll_targets_[lo] < 0) ++lo;
  while (hi > lo && nll_targets_[hi - 1] < 0) --hi;
  nll_tgt_.write(*ctx_, 0, nll_targets_.data(), uint64_t(T) * 4);
  for (uint32_t r0 = lo; r0 < hi; r0 += R) {
    const uint32_t n = std::min(R, hi - r0);
    kernels::rmsnorm(o, {x, r0 * D}, D, out_norm, {nll_h_, 0}, D, n, D, c_.rms_eps, "output_norm");
    for (const HeadPart& p : parts)
      kernels::matmul(o, *p.w, {nll_h_, 0}, D, {nll_logits_, p.row0}, V, n, false, "output", gpu::Traffic::Logits);
    kernels::nll_rows(o, {nll_logits_, 0}, V, V, n, nll_tgt_, r0, {nll_y_, r0});
  }
  if (hi == lo) {
    o.rec.submit();
    return;
  }
  o.rec.read_after(nll_y_, uint64_t(lo) * 4, uint64_t(hi - lo) * 4);
  o.rec.submit(nll_out_ + lo);
  for (uint32_t t = lo; t < hi; ++t)
    if (nll_targets_[t] < 0) nll_out_[t] = 0.0f;
}

int32_t GpuModel::run(Sequence& seq, std::span<const int32_t> toks, HeadOut out, std::vector<float>* logits) {
  check_forward(seq, toks, c_.vocab);
  const uint32_t T = uint32_t(toks.size());
  int32_t result = -1;
  amax_ready_ = false;
  for (uint32_t s = 0; s < T; s += chunk_) {
    const uint32_t n = std::min(chunk_, T - s);
    result = chunk(seq, toks.subspan(s, n), s + n == T ? out : HeadOut::None, logits);
  }
  amax_ready_ = out == HeadOut::Argmax || out == HeadOut::ArgmaxAsync;
  return result;
}

uint32_t GpuModel::max_batch_seqs() const {
  const uint32_t per = std::max<uint32_t>(1, c_.n_layers * batch_dispatches_per_seq_layer() + 8);
  return std::max<uint32_t>(1, (kMaxDispatches - 1024) / per);
}

void GpuModel::embedding(const TensorRef& embed, const TensorRef* lm_head) {
  uint64_t lim = binding_limit();
  if (const char* e = std::getenv("WGLLM_TEST_MAX_BINDING_BYTES"); e && *e) lim = std::min<uint64_t>(lim, std::stoull(e));
  auto packed_per_row = [this](const TensorRef& t) {  // GPU bytes of one row (from 64 rows)
    const uint32_t K = uint32_t(t.shape[0]), n = uint32_t(std::min<uint64_t>(t.shape[1], 64));
    std::vector<uint8_t> head(dtype_row_bytes(t.type, K) * n);
    t.read(0, head.size(), head.data());
    return double(kernels::pack_weight(t.type, head.data(), K, n, opt_.q6k_packed).words.size()) * 4.0 / n;
  };
  const TensorRef& head = lm_head ? *lm_head : embed;
  const double embed_row = packed_per_row(embed), head_row = lm_head ? packed_per_row(head) : embed_row;
  auto too_big = [&](const TensorRef& t, double row) { return row * double(t.shape[1]) > 0.9 * double(lim); };
  // t in blocks of rows (a multiple of 64 filling 80% of a binding), one GPU matrix each.
  auto split = [&](const TensorRef& t, double row, const std::string& label, std::vector<RowBlockWeight>& blocks) {
    const uint64_t row_bytes = dtype_row_bytes(t.type, t.shape[0]);
    const uint32_t N = uint32_t(t.shape[1]);
    const uint32_t rows = std::max<uint32_t>(64, uint32_t(0.8 * double(lim) / row) / 64 * 64);
    for (uint32_t r0 = 0; r0 < N; r0 += rows) {
      const uint32_t n = std::min(rows, N - r0);
      blocks.push_back({upload_rows(*ctx_, t.type, uint32_t(t.shape[0]), {RowBlock{&t, r0 * row_bytes, n * row_bytes, n}},
                                    label + "." + std::to_string(blocks.size()), mem_, opt_.q6k_packed),
                        r0});
    }
  };
  if (too_big(head, head_row)) split(head, head_row, "output", head_blocks_);
  else if (lm_head) lm_head_ = weight({lm_head}, "output");
  if (!too_big(embed, embed_row)) embed_ = weight({&embed}, "token_embd");
  else if (lm_head) split(embed, embed_row, "token_embd", embed_blocks_);
  // Tied and split: the head's blocks are this table's (split above: the same size).
  const auto& blocks = lm_head ? embed_blocks_ : head_blocks_;
  if (blocks.empty()) embed_parts_of_.push_back({&embed_, 0});  // the whole table: one part
  for (const RowBlockWeight& b : blocks) embed_parts_of_.push_back({&b.w, b.row0});
  if (head_blocks_.empty()) head_parts_of_.push_back({lm_head ? &lm_head_ : &embed_, 0});
  for (const RowBlockWeight& b : head_blocks_) head_parts_of_.push_back({&b.w, b.row0});
}

int32_t GpuModel::chunk(Sequence& seq, std::span<const int32_t> toks, HeadOut out, std::vector<float>* logits) {
  const uint32_t T = uint32_t(toks.size());
  const BatchSeg seg{&seq, 0, T, seq.n_past()};
  kernels::OpContext o = op_context();
  record_body(o, {&seg, 1}, toks);
  const int32_t result = finish_head(o, (T - 1) * c_.d_model, out, logits);
  seq.advance(T);
  return result;
}

int32_t GpuModel::finish_head(kernels::OpContext& o, uint32_t last_row, HeadOut out, std::vector<float>* logits) {
  if (!head_blocks_.empty()) return finish_split_head(o, last_row, out, logits);
  return finish_forward(o, c_, x_, last_row, {out_norm_, c_.tied_embeddings ? embed_ : lm_head_, h_, logits_, amax_}, out,
                        logits);
}

void GpuModel::chunk_batch(std::span<const BatchSeg> segs, std::span<const int32_t> toks, std::span<BatchItem* const> items) {
  kernels::OpContext o = op_context();
  record_body(o, segs, toks);
  finish_batch(o, x_, out_norm_, head_parts_of_, segs, items);
  for (const BatchSeg& s : segs) s.seq->advance(s.T);
}

void GpuModel::forward_batch(std::span<BatchItem> items) {
  if (items.size() <= 1) return Model::forward_batch(items);
  check_batch(items, c_.vocab);
  constexpr uint64_t kReadCap = 16ull << 20;  // gpu::Recorder::read_after's limit
  const uint32_t max_seqs = max_batch_seqs();
  auto single = [&](BatchItem& it) {
    if (it.out == BatchItem::Out::Argmax)
      it.argmax = run(*it.seq, it.tokens, HeadOut::Argmax, nullptr);
    else
      run(*it.seq, it.tokens, it.out == BatchItem::Out::Logits ? HeadOut::Logits : HeadOut::None, it.logits);
  };
  std::vector<BatchItem*> group;
  uint64_t rows = 0, read = 0;
  auto flush = [&] {
    if (group.size() == 1) single(*group[0]);
    if (group.size() > 1) run_batch(group);
    group.clear();
    rows = read = 0;
  };
  for (BatchItem& it : items) {
    if (it.tokens.size() > chunk_) {
      single(it);
      continue;
    }
    const uint64_t rb = 4 + (it.out == BatchItem::Out::Logits ? uint64_t(c_.vocab) * 4 : 0);
    if (!group.empty() && (rows + it.tokens.size() > chunk_ || read + rb > kReadCap || group.size() >= max_seqs)) flush();
    group.push_back(&it);
    rows += it.tokens.size();
    read += rb;
  }
  flush();
}

void GpuModel::run_batch(std::span<BatchItem* const> group) {
  std::vector<BatchSeg> segs;
  std::vector<int32_t> toks;
  uint32_t row = 0;
  for (BatchItem* it : group) {
    const uint32_t pos0 = it->seq->n_past();
    check_forward(*it->seq, it->tokens, c_.vocab);
    segs.push_back({it->seq, row, uint32_t(it->tokens.size()), pos0});
    toks.insert(toks.end(), it->tokens.begin(), it->tokens.end());
    row += uint32_t(it->tokens.size());
  }
  amax_ready_ = false;  // the batch's ids are not a chained step's input
  chunk_batch(segs, toks, group);
}

void GpuModel::finish_batch(kernels::OpContext& o, const gpu::Buffer& x, const gpu::Buffer& out_norm,
                            std::span<const HeadPart> parts, std::span<const BatchSeg> segs,
                            std::span<BatchItem* const> items) {
  const uint32_t D = c_.d_model, V = c_.vocab;
  std::vector<uint32_t> want;  // items that want a head, in order
  uint32_t n_logits = 0;
  for (uint32_t i = 0; i < items.size(); ++i)
    if (items[i]->out != BatchItem::Out::None) {
      want.push_back(i);
      n_logits += items[i]->out == BatchItem::Out::Logits;
    }
  if (want.empty()) {
    o.rec.submit();
    return;
  }
  const uint32_t n = uint32_t(want.size());
  auto mk = [&](gpu::Buffer& b, uint64_t bytes, const char* name) {
    if (b && b.size() >= bytes) return;
    if (b) mem_.scratch -= b.size();
    mem_.scratch += bytes;
    b = gpu::Buffer(*ctx_, bytes, gpu::BufferKind::Storage, name);
  };
  if (!bhead_rows_) {
    const uint64_t bytes = std::min<uint64_t>(64ull << 20, binding_limit());
    bhead_rows_ = uint32_t(std::clamp<uint64_t>(bytes / (uint64_t(V) * 4), 1, 64));
  }
  const uint32_t R = bhead_rows_;
  mk(bh_, uint64_t(R) * D * 4, "batch.h");
  mk(blogits_, uint64_t(R) * V * 4, "batch.logits");
  const uint64_t res_bytes = (uint64_t(n) + uint64_t(n_logits) * V) * 4;
  mk(bres_, res_bytes, "batch.result");
  while (bamax_.size() < n) {
    mem_.scratch += kernels::argmax_buffer_bytes();
    bamax_.emplace_back(*ctx_, kernels::argmax_buffer_bytes(), gpu::BufferKind::Storage, "batch.argmax");
  }
  uint32_t k = 0;  // logits rows copied so far
  for (uint32_t b0 = 0; b0 < n; b0 += R) {
    const uint32_t m = std::min(R, n - b0);
    // The last rows of consecutive one-token segments are consecutive: one RMSNorm for the run.
    for (uint32_t j = 0; j < m;) {
      const BatchSeg& s = segs[want[b0 + j]];
      const uint32_t r0 = s.row0 + s.T - 1;
      uint32_t e = j + 1;
      while (e < m && segs[want[b0 + e]].row0 + segs[want[b0 + e]].T - 1 == r0 + (e - j)) ++e;
      kernels::rmsnorm(o, {x, r0 * D}, D, out_norm, {bh_, j * D}, D, e - j, D, c_.rms_eps, "output_norm");
      j = e;
    }
    for (const HeadPart& p : parts)
      kernels::matmul(o, *p.w, {bh_, 0}, D, {blogits_, p.row0}, V, m, false, "output", gpu::Traffic::Logits);
    for (uint32_t j = 0; j < m; ++j)
      if (items[want[b0 + j]]->out == BatchItem::Out::Argmax) kernels::argmax(o, {blogits_, j * V}, V, bamax_[b0 + j]);
    for (uint32_t j = 0; j < m; ++j) {
      if (items[want[b0 + j]]->out == BatchItem::Out::Argmax)
        o.rec.copy(bamax_[b0 + j], 0, bres_, uint64_t(b0 + j) * 4, 4);
      else
        o.rec.copy(blogits_, uint64_t(j) * V * 4, bres_, (uint64_t(n) + uint64_t(k++) * V) * 4, uint64_t(V) * 4);
    }
  }
  std::vector<uint32_t> host(res_bytes / 4);
  o.rec.read_after(bres_, 0, res_bytes);
  o.rec.submit(host.data());
  k = 0;
  for (uint32_t i = 0; i < n; ++i) {
    BatchItem& it = *items[want[i]];
    if (it.out == BatchItem::Out::Argmax) {
      it.argmax = int32_t(host[i]);
    } else {
      it.logits->resize(V);
      std::memcpy(it.logits->data(), host.data() + n + uint64_t(k++) * V, uint64_t(V) * 4);
    }
  }
}

bool defer_attn_combine(const kernels::OpContext& o, std::span<const BatchSeg> segs, const kernels::GpuWeight& wo,
                        uint32_t T, uint32_t head_dim) {
  return segs.size() == 1 && kernels::attention_combine_fusable(o, wo, T, head_dim);
}

void record_attn_output(kernels::OpContext& o, const kernels::GpuWeight& wo, const kernels::AttentionPartials& parts,
                        const gpu::Buffer& att, const gpu::Buffer& y, uint32_t y_stride, uint32_t T, bool accumulate) {
  if (parts.scratch)
    kernels::matmul_combine(o, wo, parts, {y, 0}, y_stride, accumulate, "attn_output");
  else
    kernels::matmul(o, wo, {att, 0}, wo.K, {y, 0}, y_stride, T, accumulate, "attn_output");
}

void record_swiglu_ffn(kernels::OpContext& o, const ModelConfig& c, const FfnWeights& w, const gpu::Buffer& x,
                       const gpu::Buffer& h, const gpu::Buffer& gu, const gpu::Buffer& act, uint32_t T) {
  const uint32_t D = c.d_model, F = c.ffn_dim;
  if (w.gate_up)
    record_norm_proj(o, c, x, w.norm, h, {{w.gate_up, 0, "ffn_gate_up"}}, gu, 2 * F, T, "ffn_norm");
  else
    record_norm_proj(o, c, x, w.norm, h, {{w.gate, 0, "ffn_gate"}, {w.up, F, "ffn_up"}}, gu, 2 * F, T, "ffn_norm");
  if (o.opt.fuse_silu && T <= kernels::kFusedMaxTokens) {
    kernels::matmul_silu(o, w.down, gu, 0, F, 2 * F, {x, 0}, D, T, true, "ffn_down");
    return;
  }
  kernels::silu_mul(o, gu, 0, F, 2 * F, T, F, {act, 0});
  kernels::matmul(o, w.down, {act, 0}, F, {x, 0}, D, T, true, "ffn_down");
}

void record_norm_proj(kernels::OpContext& o, const ModelConfig& c, const gpu::Buffer& x, const gpu::Buffer& norm_w,
                      const gpu::Buffer& h, std::initializer_list<NormedProj> projs, const gpu::Buffer& y,
                      uint32_t y_stride, uint32_t T, const char* norm_label) {
  record_norm_proj(o, c, x, norm_w, h, std::span<const NormedProj>(projs.begin(), projs.size()), y, y_stride, T,
                   norm_label);
}

void record_norm_proj(kernels::OpContext& o, const ModelConfig& c, const gpu::Buffer& x, const gpu::Buffer& norm_w,
                      const gpu::Buffer& h, std::span<const NormedProj> projs, const gpu::Buffer& y,
                      uint32_t y_stride, uint32_t T, const char* norm_label) {
  const uint32_t D = c.d_model;
  if (o.opt.fuse_norm && T <= kernels::kFusedMaxTokens) {
    for (const NormedProj& p : projs)
      kernels::matmul_norm(o, *p.W, {x, 0}, D, norm_w, c.rms_eps, {y, p.y_off}, y_stride, T, false, p.label);
    return;
  }
  kernels::rmsnorm(o, {x, 0}, D, norm_w, {h, 0}, D, T, D, c.rms_eps, norm_label);
  for (const NormedProj& p : projs) kernels::matmul(o, *p.W, {h, 0}, D, {y, p.y_off}, y_stride, T, false, p.label);
}

void record_norm_proj(kernels::OpContext& o, const ModelConfig& c, const gpu::Buffer& x, const gpu::Buffer& norm_w,
                      const gpu::Buffer& h, std::span<const StackedPart> parts, const gpu::Buffer& y,
                      uint32_t y_stride, uint32_t T, const char* norm_label) {
  std::vector<NormedProj> projs;
  for (const StackedPart& p : parts) projs.push_back({&p.w, p.row0, p.label.c_str()});
  record_norm_proj(o, c, x, norm_w, h, std::span<const NormedProj>(projs), y, y_stride, T, norm_label);
}

void record_rope_kv(kernels::OpContext& o, const ModelConfig& c, const QkvRows& r, uint32_t T, uint32_t pos0,
                    const gpu::Buffer& table, gpu::Binding kc, gpu::Binding vc) {
  const uint32_t HD = c.head_dim;
  if (o.opt.fuse_rope_kv) {
    kernels::rope_kv_store(o, r.src, r.q_off, r.q_stride, r.k_off, r.v_off, r.kv_stride, T, c.n_heads, c.n_kv_heads, HD,
                           c.rope_dims, pos0, table, c.rope_neox, kc, vc);
    return;
  }
  kernels::rope(o, {r.src, r.q_off}, r.q_stride, T, c.n_heads, HD, c.rope_dims, pos0, table, c.rope_neox, "rope_q");
  kernels::rope(o, {r.src, r.k_off}, r.kv_stride, T, c.n_kv_heads, HD, c.rope_dims, pos0, table, c.rope_neox, "rope_k");
  kernels::kv_store(o, r.src, r.k_off, r.v_off, r.kv_stride, T, c.kv_dim(), pos0, kc, vc);
}

bool qk_norm_folded(const kernels::OpContext& o) { return o.opt.fuse_qk_norm && o.opt.fuse_rope_kv; }

void record_qk_norms(kernels::OpContext& o, const ModelConfig& c, const QkvRows& r, uint32_t T, const QkNorm& n) {
  if (qk_norm_folded(o)) return;
  const uint32_t HD = c.head_dim;
  kernels::rmsnorm_heads(o, {r.src, r.q_off}, r.q_stride, HD, T, c.n_heads, HD, n.q, c.rms_eps, "attn_q_norm");
  kernels::rmsnorm_heads(o, {r.src, r.k_off}, r.kv_stride, HD, T, c.n_kv_heads, HD, n.k, c.rms_eps, "attn_k_norm");
}

void record_qk_norm_rope_kv(kernels::OpContext& o, const ModelConfig& c, const QkvRows& r, uint32_t T, uint32_t pos0,
                            const gpu::Buffer& table, const QkNorm& n, gpu::Binding kc, gpu::Binding vc) {
  if (!qk_norm_folded(o)) return record_rope_kv(o, c, r, T, pos0, table, kc, vc);
  kernels::qk_norm_rope_kv_store(o, r.src, r.q_off, r.q_stride, r.k_off, r.v_off, r.kv_stride, T, c.n_heads,
                                 c.n_kv_heads, c.head_dim, c.rope_dims, pos0, table, c.rope_neox, n.q, n.k, c.rms_eps,
                                 kc, vc);
}

kernels::GpuWeight upload_rows(gpu::Context& ctx, DType type, uint32_t K, const std::vector<RowBlock>& blocks,
                               const std::string& label, MemoryReport& mem, bool q6k_packed) {
  if (blocks.empty()) throw Error("upload of '" + label + "': no rows");
  const uint64_t row_bytes = dtype_row_bytes(type, K);
  uint32_t N = 0;
  for (const RowBlock& b : blocks) {
    if (b.nbytes != uint64_t(b.rows) * row_bytes || (!b.data && !b.src))
      throw Error("upload of '" + label + "': a row block of " + std::to_string(b.nbytes) + " bytes is not " +
                  std::to_string(b.rows) + " rows of " + std::to_string(row_bytes) + " bytes");
    N += b.rows;
  }
  // Rows [r0, r0 + n) of the stacked matrix, gathered from the blocks they fall in.
  auto rows = [&](uint32_t r0, uint32_t n, uint8_t* dst) {
    uint32_t b0 = 0;
    for (const RowBlock& b : blocks) {
      const uint32_t lo = std::max(r0, b0), hi = std::min(r0 + n, b0 + b.rows);
      if (lo < hi) {
        const uint64_t off = uint64_t(lo - b0) * row_bytes, len = uint64_t(hi - lo) * row_bytes;
        uint8_t* out = dst + uint64_t(lo - r0) * row_bytes;
        if (b.data)
          std::memcpy(out, b.data + off, len);
        else
          b.src->read(b.src_off + off, len, out);
      }
      b0 += b.rows;
    }
  };
  kernels::GpuWeight w = kernels::upload_weight_rows(ctx, type, K, N, rows, label, uint64_t(8) << 20, q6k_packed);
  mem.weights += w.bytes();
  return w;
}

kernels::GpuWeight upload_matrix(gpu::Context& ctx, const std::vector<const TensorRef*>& parts, const std::string& label,
                                 MemoryReport& mem, bool q6k_packed) {
  const TensorRef& a = *parts.at(0);
  std::vector<RowBlock> blocks;
  for (const TensorRef* p : parts) {
    if (p->type != a.type || p->shape[0] != a.shape[0]) throw Error("cannot fuse " + label);
    blocks.push_back({p, 0, p->nbytes, uint32_t(p->shape[1])});
  }
  return upload_rows(ctx, a.type, uint32_t(a.shape[0]), blocks, label, mem, q6k_packed);
}

std::vector<StackedPart> upload_stacked(gpu::Context& ctx, const std::vector<const TensorRef*>& ms,
                                        const std::vector<std::string>& names, bool fuse, const std::string& prefix,
                                        const std::string& buf_prefix, MemoryReport& mem, bool q6k_packed) {
  std::vector<StackedPart> parts;
  uint32_t row0 = 0;
  for (size_t i = 0; i < ms.size();) {
    size_t j = i + 1;
    while (fuse && j < ms.size() && ms[j]->type == ms[i]->type) ++j;
    std::vector<const TensorRef*> run(ms.begin() + i, ms.begin() + j);
    std::string label = prefix;
    for (size_t k = i; k < j; ++k) label += names.at(k);
    StackedPart part{upload_matrix(ctx, run, buf_prefix + label, mem, q6k_packed), row0, label};
    row0 += part.w.N;
    parts.push_back(std::move(part));
    i = j;
  }
  return parts;
}

gpu::Buffer upload_f32(gpu::Context& ctx, const std::vector<float>& v, const std::string& label, MemoryReport& mem) {
  gpu::Buffer b(ctx, v.size() * 4, gpu::BufferKind::Storage, label);
  b.write(ctx, 0, v.data(), v.size() * 4);
  mem.weights += b.size();
  return b;
}

int32_t submit_argmax(kernels::OpContext& o, const gpu::Buffer& amax, HeadOut out) {
  o.rec.read_after(amax, 0, 4);
  if (out == HeadOut::ArgmaxAsync) {
    o.rec.submit_async();
    return -1;
  }
  uint32_t id = 0;
  o.rec.submit(&id);
  return int32_t(id);
}

int32_t finish_forward(kernels::OpContext& o, const ModelConfig& c, const gpu::Buffer& x, uint32_t last_row,
                       const HeadBuffers& hb, HeadOut out, std::vector<float>* logits) {
  if (out == HeadOut::None) {
    o.rec.submit();
    return -1;
  }
  const uint32_t D = c.d_model;
  if (o.opt.fuse_norm) {  // the output norm in the head's activation load (one row; same bits)
    kernels::matmul_norm(o, hb.lm_head, {x, last_row}, D, hb.out_norm, c.rms_eps, {hb.logits, 0}, c.vocab, 1, false,
                         "output", gpu::Traffic::Logits);
  } else {
    kernels::rmsnorm(o, {x, last_row}, D, hb.out_norm, {hb.h, 0}, D, 1, D, c.rms_eps, "output_norm");
    kernels::matmul(o, hb.lm_head, {hb.h, 0}, D, {hb.logits, 0}, c.vocab, 1, false, "output", gpu::Traffic::Logits);
  }
  if (out == HeadOut::Argmax || out == HeadOut::ArgmaxAsync) {
    kernels::argmax(o, {hb.logits, 0}, c.vocab, hb.amax);
    return submit_argmax(o, hb.amax, out);
  }
  logits->resize(c.vocab);
  o.rec.read_after(hb.logits, 0, uint64_t(c.vocab) * 4);
  o.rec.submit(logits->data());
  return -1;
}

// ---- KV pools and continuous batching over them (kv_pools_) ----

std::unique_ptr<Sequence> GpuModel::kv_sequence(const SequenceSize& s, const std::vector<std::shared_ptr<const gpu::Buffer>>& kp,
                                                const std::vector<std::shared_ptr<const gpu::Buffer>>& vp, uint64_t base_row) {
  return create_sequence(s, [&] {
    std::vector<std::unique_ptr<LayerState>> st;
    for (uint32_t i = 0; i < c_.n_layers; ++i)
      st.push_back(kp.empty() ? std::make_unique<KvState>(ctx_.get(), i, s.context, c_.kv_dim())
                              : std::make_unique<KvState>(ctx_.get(), i, s.context, c_.kv_dim(), kp[i], vp[i], base_row));
    return std::make_unique<Sequence>(s.context, ctx_.get(), std::move(st));
  });
}

std::vector<std::unique_ptr<Sequence>> GpuModel::new_sequences(uint32_t n, uint32_t ctx) {
  if (n <= 1 || !kv_pools_) return Model::new_sequences(n, ctx);
  const SequenceSize s = SequenceSize::all_attention(sequence_length(ctx), c_.n_layers, c_.kv_dim());
  prepare_sequence(s, &rope_, &rope_rows_);
  const WGPULimits& lim = ctx_->info().limits;
  const uint64_t stride = (uint64_t(s.context) + 63) / 64 * 64, slot_bytes = stride * c_.kv_dim() * 4;
  if (lim.minStorageBufferOffsetAlignment == 0 || slot_bytes % lim.minStorageBufferOffsetAlignment)
    return Model::new_sequences(n, ctx);
  const uint32_t per_pool = uint32_t(std::clamp<uint64_t>(binding_limit() / slot_bytes, 1, n));
  std::vector<std::unique_ptr<Sequence>> out;
  for (uint32_t first = 0; first < n; first += per_pool) {
    const uint32_t m = std::min(per_pool, n - first);
    std::vector<std::shared_ptr<const gpu::Buffer>> kp, vp;
    try {
      for (uint32_t i = 0; i < c_.n_layers; ++i) {
        const std::string p = "layers." + std::to_string(i) + ".self_attn.";
        kp.push_back(std::make_shared<const gpu::Buffer>(*ctx_, m * slot_bytes, gpu::BufferKind::Storage, p + "keys_pool"));
        vp.push_back(std::make_shared<const gpu::Buffer>(*ctx_, m * slot_bytes, gpu::BufferKind::Storage, p + "values_pool"));
      }
    } catch (const Error& e) {
      SequenceSize all = s;
      all.kv_cache = 2ull * c_.n_layers * m * slot_bytes;
      all.largest_buffer = m * slot_bytes;
      sequence_alloc_failed(all, backend_name(), e.what());
    }
    for (uint32_t j = 0; j < m; ++j) out.push_back(kv_sequence(s, kp, vp, j * stride));
  }
  return out;
}

}  // namespace wgllm
