#include <algorithm>
#include <atomic>
#include <cstdio>
#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

#include "core/error.h"
#include "gpu/context.h"
#include "models/model.h"

namespace wgllm {

namespace {
std::atomic<uint64_t> g_next_seq_id{1};
}  // namespace

Sequence::Sequence(uint32_t ctx_len, gpu::Context* ctx, std::vector<std::unique_ptr<LayerState>> states)
    : ctx_(ctx), states_(std::move(states)), ctx_len_(ctx_len), id_(g_next_seq_id++), row_clock_(ctx_len, 0) {
  for (size_t i = 0; i < states_.size(); ++i) {
    if (!states_[i] || states_[i]->layer() != i) throw Error("sequence: layer state " + std::to_string(i) + " missing or out of order");
    for (const StateArray& a : states_[i]->arrays())
      if (a.on_gpu() != (ctx_ != nullptr)) throw Error("sequence: state '" + a.name() + "' on another backend");
  }
}

void Sequence::truncate(uint32_t n) {
  if (n > n_past_)
    throw Error("truncate to " + std::to_string(n) + " tokens: the sequence has only " + std::to_string(n_past_));
  if (snapshot_bytes() > 0)
    throw Error("a sequence with recurrent state cannot be truncated; restore a snapshot instead");
  n_past_ = n;
}

MemoryReport Sequence::memory() const {
  MemoryReport m;
  for (const auto& s : states_) (s->by_length() ? m.kv_cache : m.recurrent) += s->bytes();
  return m;
}

namespace {
template <class T>
T& state_as(const std::vector<std::unique_ptr<LayerState>>& states, uint32_t i, const char* kind) {
  T* s = i < states.size() ? dynamic_cast<T*>(states[i].get()) : nullptr;
  if (!s)
    throw Error("layer " + std::to_string(i) + " has no " + kind + " state" +
                (i < states.size() ? std::string(" (it holds ") + states[i]->kind() + ")" : std::string()));
  return *s;
}
}  // namespace

KvState& Sequence::kv(uint32_t i) { return state_as<KvState>(states_, i, "kv"); }
ConvState& Sequence::conv(uint32_t i) { return state_as<ConvState>(states_, i, "conv"); }
DeltaState& Sequence::delta(uint32_t i) { return state_as<DeltaState>(states_, i, "delta"); }

void Sequence::advance(uint32_t n) {
  if (uint64_t(n_past_) + n > ctx_len_) throw Error("sequence: advance past the context");
  n_past_ += n;
}

void Sequence::mark_written(uint32_t n) {
  ++clock_;
  const uint32_t end = std::min<uint64_t>(uint64_t(n_past_) + n, ctx_len_);
  std::fill(row_clock_.begin() + n_past_, row_clock_.begin() + end, clock_);
}

std::vector<gpu::CopyRange> Sequence::prepare_undo() {
  undo_ = Undo{true, n_past_, clock_, n_past_ < ctx_len_ ? row_clock_[n_past_] : 0};
  const uint64_t bytes = snapshot_bytes();
  if (!bytes) return {};
  if (undo_store_.bytes() != bytes) undo_store_ = SnapshotStore(ctx_, bytes);
  StateCopier c(undo_store_);
  for (const auto& st : states_) st->snapshot(c);
  return c.take();
}

void Sequence::undo() {
  if (!undo_.armed || n_past_ != undo_.n_past + 1 || clock_ != undo_.clock + 1)
    throw Error("undo: the sequence did not advance by exactly one forward of one token since prepare_undo()");
  if (snapshot_bytes()) {
    StateCopier c(undo_store_);
    for (const auto& st : states_) st->restore(c);
    c.submit();
  }
  n_past_ = undo_.n_past;
  clock_ = undo_.clock;
  row_clock_[n_past_] = undo_.row_clock;
  undo_.armed = false;
}

uint64_t Sequence::snapshot_bytes() const {
  uint64_t b = 0;
  for (const auto& s : states_) b += s->snapshot_bytes();
  return b;
}

std::unique_ptr<SeqSnapshot> Sequence::snapshot() const {
  auto s = std::make_unique<SeqSnapshot>();
  s->store_ = SnapshotStore(ctx_, snapshot_bytes());
  StateCopier c(s->store_);
  for (const auto& st : states_) st->snapshot(c);
  c.submit();
  s->n_past_ = n_past_;
  s->seq_id_ = id_;
  s->clock_ = clock_;
  return s;
}

bool Sequence::restorable(const SeqSnapshot& s) const {
  if (s.seq_id_ != id_ || s.n_past_ > ctx_len_) return false;
  for (uint32_t i = 0; i < s.n_past_; ++i)
    if (row_clock_[i] > s.clock_) return false;
  return true;
}

void Sequence::restore(const SeqSnapshot& s) {
  if (s.seq_id_ != id_) throw Error("restore: the snapshot was taken from another sequence");
  if (!restorable(s))
    throw Error("restore: KV rows below " + std::to_string(s.n_past_) +
                " were rewritten after the snapshot was taken; recompute from an earlier point");
  if (s.store_.bytes() != snapshot_bytes()) throw Error("restore: the snapshot's layout does not match this sequence");
  StateCopier c(const_cast<SnapshotStore&>(s.store_));  // loads only: the store is read, never written
  for (const auto& st : states_) st->restore(c);
  c.submit();
  n_past_ = s.n_past_;
}

void Sequence::wait() const {
  if (ctx_) ctx_->wait_idle();
}

std::vector<StateBlob> Sequence::export_state() const {
  std::vector<StateBlob> out;
  for (const auto& s : states_)
    for (StateBlob& b : s->export_state(n_past_)) out.push_back(std::move(b));
  return out;
}

namespace {
// Every blob must belong to some array (no unknown state in an import).
void check_count(const std::vector<StateBlob>& blobs, size_t n) {
  if (blobs.size() != n)
    throw Error("state has " + std::to_string(blobs.size()) + " parts, this model expects " + std::to_string(n));
}
}  // namespace

void Sequence::import_state(uint32_t n, const std::vector<StateBlob>& blobs) {
  if (n > ctx_len_)
    throw Error("import_state: " + std::to_string(n) + " tokens do not fit a context of " + std::to_string(ctx_len_));
  size_t n_arrays = 0;
  std::vector<std::vector<const StateBlob*>> checked;  // validate everything before writing
  for (const auto& s : states_) {
    n_arrays += s->arrays().size();
    checked.push_back(s->check_import(n, blobs));
  }
  check_count(blobs, n_arrays);
  for (size_t i = 0; i < states_.size(); ++i) states_[i]->import_state(checked[i]);
  // Rows [0, n) now hold the imported history; rows past n hold nothing usable.
  ++clock_;
  std::fill(row_clock_.begin(), row_clock_.begin() + n, clock_);
  std::fill(row_clock_.begin() + n, row_clock_.end(), UINT64_MAX);
  n_past_ = n;
}

std::vector<StateBlob> Sequence::export_snapshot(const SeqSnapshot& s) const {
  if (s.store_.bytes() != snapshot_bytes()) throw Error("export_snapshot: the snapshot's layout does not match this sequence");
  std::vector<StateBlob> out;
  uint64_t off = 0;
  for (const auto& st : states_)
    if (!st->by_length())
      for (const StateArray& a : st->arrays()) {
        out.push_back({a.name(), s.store_.read(off, a.bytes())});
        off += a.bytes();
      }
  return out;
}

std::unique_ptr<SeqSnapshot> Sequence::import_snapshot(uint32_t n, const std::vector<StateBlob>& blobs) {
  if (n > ctx_len_)
    throw Error("snapshot: " + std::to_string(n) + " tokens do not fit a context of " + std::to_string(ctx_len_));
  size_t n_arrays = 0;
  std::vector<const StateBlob*> checked;
  for (const auto& st : states_)
    if (!st->by_length()) {
      n_arrays += st->arrays().size();
      for (const StateBlob* b : st->check_import(n, blobs)) checked.push_back(b);
    }
  if (n_arrays == 0 && !blobs.empty())
    throw Error("snapshot: unexpected recurrent state '" + blobs[0].name + "' for a KV-only model");
  check_count(blobs, n_arrays);
  auto s = std::make_unique<SeqSnapshot>();
  s->store_ = SnapshotStore(ctx_, snapshot_bytes());
  uint64_t off = 0;
  for (const StateBlob* b : checked) {
    s->store_.write(off, b->data);
    off += b->data.size();
  }
  s->n_past_ = n;
  s->seq_id_ = id_;
  s->clock_ = clock_;
  return s;
}

uint64_t Model::forward_argmax_async(Sequence&, std::span<const int32_t>, bool) {
  throw Error("pipelined greedy decoding (--decode-pipeline) is not available on " + backend_name());
}

int32_t Model::argmax_result(uint64_t) {
  throw Error("pipelined greedy decoding (--decode-pipeline) is not available on " + backend_name());
}

uint32_t sequence_context(uint32_t requested, uint32_t default_len, uint32_t max_context) {
  const uint32_t n = requested ? requested : (default_len ? default_len : max_context);
  return std::max<uint32_t>(1, std::min(n, max_context));
}

namespace {
std::string bytes_str(uint64_t b) {
  char s[48];
  if (b >= (1ull << 30)) std::snprintf(s, sizeof s, "%.1f GiB", double(b) / double(1ull << 30));
  else if (b >= (1ull << 20)) std::snprintf(s, sizeof s, "%.1f MiB", double(b) / double(1ull << 20));
  else if (b >= (1ull << 10)) std::snprintf(s, sizeof s, "%.1f KiB", double(b) / double(1ull << 10));
  else std::snprintf(s, sizeof s, "%llu bytes", (unsigned long long)b);
  return s;
}

/// Physical memory of the machine in bytes, 0 when the platform does not say (e.g. WebAssembly).
uint64_t physical_memory() {
#if (defined(__unix__) || defined(__APPLE__)) && !defined(__EMSCRIPTEN__) && defined(_SC_PHYS_PAGES)
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) return uint64_t(pages) * uint64_t(page);
#endif
  return 0;
}
}  // namespace

SequenceSize SequenceSize::all_attention(uint32_t context, uint32_t n_layers, uint32_t kv_dim) {
  SequenceSize s;
  s.context = context;
  s.largest_buffer = uint64_t(context) * kv_dim * 4;
  s.kv_cache = 2ull * n_layers * s.largest_buffer;
  return s;
}

std::string SequenceSize::describe() const {
  return "a context of " + std::to_string(context) + " tokens needs " + bytes_str(total()) + " (KV cache " +
         bytes_str(kv_cache) + ", recurrent state " + bytes_str(recurrent) + ", position bookkeeping " +
         bytes_str(uint64_t(context) * 8) + "; largest buffer " + bytes_str(largest_buffer) + ")";
}

void check_host_memory(const SequenceSize& s, uint64_t extra, const std::string& backend) {
  const uint64_t have = physical_memory();
  if (have && s.total() + extra > have)
    throw Error("new sequence on " + backend + ": " + s.describe() +
                (extra ? " plus " + bytes_str(extra) + " of RoPE table" : std::string()) + ", more than the " +
                bytes_str(have) + " of memory of this machine; request a smaller context (-c, context_length)");
}

void sequence_alloc_failed(const SequenceSize& s, const std::string& backend, const std::string& cause) {
  throw Error("new sequence on " + backend + ": " + s.describe() + ": allocation failed (" + cause +
              "); request a smaller context (-c, context_length)");
}

void check_forward(Sequence& seq, std::span<const int32_t> toks, uint32_t vocab) {
  if (toks.empty()) throw Error("forward: no tokens");
  if (uint64_t(seq.n_past()) + toks.size() > seq.context_length())
    throw Error("context length exceeded: " + std::to_string(seq.n_past()) + " + " + std::to_string(toks.size()) +
                " tokens > " + std::to_string(seq.context_length()));
  for (int32_t t : toks)
    if (t < 0 || uint32_t(t) >= vocab) throw Error("token id " + std::to_string(t) + " out of range [0, " + std::to_string(vocab) + ")");
  seq.mark_written(uint32_t(toks.size()));
}

void check_batch(std::span<const BatchItem> items, uint32_t vocab) {
  for (size_t i = 0; i < items.size(); ++i) {
    const BatchItem& it = items[i];
    const std::string who = "forward_batch item " + std::to_string(i) + ": ";
    if (!it.seq) throw Error(who + "no sequence");
    if (it.tokens.empty()) throw Error(who + "no tokens");
    if (it.out == BatchItem::Out::Logits && !it.logits) throw Error(who + "Out::Logits without a logits vector");
    if (uint64_t(it.seq->n_past()) + it.tokens.size() > it.seq->context_length())
      throw Error(who + "context length exceeded: " + std::to_string(it.seq->n_past()) + " + " +
                  std::to_string(it.tokens.size()) + " tokens > " + std::to_string(it.seq->context_length()));
    for (int32_t t : it.tokens)
      if (t < 0 || uint32_t(t) >= vocab)
        throw Error(who + "token id " + std::to_string(t) + " out of range [0, " + std::to_string(vocab) + ")");
    for (size_t k = 0; k < i; ++k)
      if (items[k].seq == it.seq) throw Error(who + "the sequence of item " + std::to_string(k) + " again");
  }
}

void Model::forward_batch(std::span<BatchItem> items) {
  check_batch(items, config().vocab);
  for (BatchItem& it : items) {
    if (it.out == BatchItem::Out::Argmax)
      it.argmax = forward_argmax(*it.seq, it.tokens);
    else
      forward(*it.seq, it.tokens, it.out == BatchItem::Out::Logits ? it.logits : nullptr);
  }
}

}  // namespace wgllm
