#include <algorithm>
#include <atomic>
#include <cstdio>
#include <typeinfo>
#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#endif

#include "core/error.h"
#include "models/model.h"

namespace wgllm {

void Sequence::truncate(uint32_t n) {
  if (n > n_past_)
    throw Error("truncate to " + std::to_string(n) + " tokens: the sequence has only " + std::to_string(n_past_));
  if (memory().recurrent > 0)
    throw Error("a sequence with recurrent state cannot be truncated; restore a snapshot instead");
  n_past_ = n;
}

namespace {
std::atomic<uint64_t> g_next_seq_id{1};
}

Sequence::Sequence(uint32_t ctx_len) : ctx_len_(ctx_len), id_(g_next_seq_id++), row_clock_(ctx_len, 0) {}

void Sequence::mark_written(uint32_t n) {
  ++clock_;
  const uint32_t end = std::min<uint64_t>(uint64_t(n_past_) + n, ctx_len_);
  std::fill(row_clock_.begin() + n_past_, row_clock_.begin() + end, clock_);
}

namespace {
// A model with recurrent state that does not override the snapshot hooks would hand out plain
// SeqSnapshots (KV length only) and silently restore the wrong states: refuse instead.
void check_recurrent_hooks(const Sequence& seq, const SeqSnapshot& s) {
  if (seq.memory().recurrent > 0 && typeid(s) == typeid(SeqSnapshot))
    throw Error("this model's sequences have recurrent state but no snapshot support (Sequence::capture)");
}
}  // namespace

std::unique_ptr<SeqSnapshot> Sequence::snapshot() const {
  std::unique_ptr<SeqSnapshot> s = capture();
  check_recurrent_hooks(*this, *s);
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
  check_recurrent_hooks(*this, s);
  restore_recurrent(s);
  n_past_ = s.n_past_;
}

void Sequence::import_state(uint32_t n, const std::vector<StateBlob>& blobs) {
  if (n > ctx_len_)
    throw Error("import_state: " + std::to_string(n) + " tokens do not fit a context of " + std::to_string(ctx_len_));
  write_state(n, blobs);
  // Rows [0, n) now hold the imported history; rows past n hold nothing usable.
  ++clock_;
  std::fill(row_clock_.begin(), row_clock_.begin() + n, clock_);
  std::fill(row_clock_.begin() + n, row_clock_.end(), UINT64_MAX);
  n_past_ = n;
}

std::unique_ptr<SeqSnapshot> Sequence::import_snapshot(uint32_t n, const std::vector<StateBlob>& blobs) {
  std::unique_ptr<SeqSnapshot> s = snapshot_from_blobs(blobs);
  check_recurrent_hooks(*this, *s);
  s->n_past_ = n;
  s->seq_id_ = id_;
  s->clock_ = clock_;
  return s;
}

std::unique_ptr<SeqSnapshot> Sequence::snapshot_from_blobs(const std::vector<StateBlob>& blobs) {
  if (!blobs.empty()) throw Error("snapshot: unexpected recurrent state '" + blobs[0].name + "' for a KV-only model");
  return std::make_unique<SeqSnapshot>();
}

std::vector<StateBlob> Sequence::read_state() const {
  throw Error("this model's sequences cannot export their state");
}

void Sequence::write_state(uint32_t, const std::vector<StateBlob>&) {
  throw Error("this model's sequences cannot import a state");
}

const StateBlob& state_blob(const std::vector<StateBlob>& blobs, const std::string& name, uint64_t bytes) {
  for (const StateBlob& b : blobs)
    if (b.name == name) {
      if (b.data.size() != bytes)
        throw Error("state '" + name + "' holds " + std::to_string(b.data.size()) + " bytes, expected " + std::to_string(bytes));
      return b;
    }
  throw Error("state '" + name + "' is missing");
}

void check_blob_count(const std::vector<StateBlob>& blobs, size_t n) {
  if (blobs.size() != n)
    throw Error("state has " + std::to_string(blobs.size()) + " parts, this model expects " + std::to_string(n));
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

}  // namespace wgllm
