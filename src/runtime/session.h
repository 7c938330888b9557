// Session: one conversation on one Model — its messages, the exact token history fed to the
// model, and per-turn snapshots for rollback, branching and persistence.
//
// Token history. A turn renders the whole conversation with the chat template and checks that the
// text already fed (the previous rendering) is a prefix of the new rendering; only the suffix is
// tokenized and fed, so nothing already processed is processed again. The reply's tokens are fed
// as generated; the template's closing text after the reply (e.g. "<|im_end|>\n") is fed with the
// next user message. When a template re-renders history differently (e.g. it strips earlier
// "thinking" blocks), the whole rendering is re-tokenized and the longest common token prefix with
// what is cached (or snapshotted) is reused; the rest is recomputed. Decoding with a generic
// tokenizer is exact for byte-level BPE; for other tokenizers the fallback may recompute more.
//
// Snapshots. After every reply the session snapshots the sequence (Sequence::snapshot: recurrent
// states copied, the KV cache by length only). A sequence that cannot be truncated (recurrent
// state, or kv_truncate off) is also snapshotted at the end of each prompt minus its last token,
// before the reply (SessionOptions::prompt_snapshot), so regenerate() re-feeds one token, as a
// KV-only model does by truncating, instead of the whole last user message. A snapshot of length
// n is used only if the cache still holds its n tokens (Sequence::restorable and the token prefix
// agree). Rolling back to a point: KV-only models truncate the cache (any length, free) when
// `kv_truncate` is on; otherwise the nearest usable snapshot at or before the point is restored
// and the tokens after it are recomputed. Snapshots over the caps (bytes of recurrent copies, count) are evicted least
// recently used first; an evicted point is recomputed from the nearest earlier one (slower,
// never wrong). The initial (empty) state is a pinned snapshot outside the caps.
//
// Sampling. Generation k of the session (k = 0, 1, ... counting every send, regenerate and edit)
// samples with generation_seed(GenerateOptions::sampler.seed, k): each reply draws fresh
// randomness (a regenerated reply differs), and the same seed and inputs replay the same
// conversation. The counter is saved in session files.
//
// Failures. send(), regenerate() and edit() either complete or leave the conversation as it was
// (messages, turns, tokens); if a forward or the token callback throws mid-turn, the cache is
// reset to the empty state and later turns recompute from the snapshots (slower, never wrong).
// A token callback returning false stops the reply: the partial reply is kept as the turn's reply
// (TurnResult::stopped).
//
// Context full. A turn whose prompt does not fit (with room for one generated token) throws
// ContextFull before anything changes. A reply that reaches the end of the context stops there
// (TurnResult::context_full); the next turn is then refused with ContextFull. Use undo()/edit()
// to free room, or a session with a larger context.
//
// Files (save/load): magic "WGLLMSES", format version, a JSON header (model fingerprint, messages,
// tokens, turns, snapshot table) and binary state blobs, each with an FNV-1a 64 checksum, and a
// checksum of the whole file. load() throws wgllm::Error for a path that is not a regular file, a
// foreign, truncated, corrupt or newer file, a file from another model (fingerprint mismatch), or
// state blobs (live or snapshot) whose names or sizes do not fit this model; everything is checked
// before anything is replaced, so on any such error the session is unchanged.
#pragma once
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "core/error.h"
#include "models/model.h"
#include "runtime/generate.h"

namespace wgllm {

class Tokenizer;
struct ModelSource;

/// Thrown when a turn does not fit the context; the session is unchanged.
struct ContextFull : Error {
  using Error::Error;
};

struct SessionOptions {
  uint32_t context_length = 0;            // 0: the model's default (ModelOptions::context_length)
  uint64_t snapshot_cap_bytes = 1ull << 30;  // LRU cap on bytes of snapshot copies (recurrent state)
  uint32_t snapshot_cap_count = 64;       // LRU cap on the number of snapshots kept (0 = none kept)
  // kv_truncate (KV-only models roll back by truncating the cache; off forces the snapshot path) and
  // prompt_snapshot (sequences that cannot truncate also snapshot the end of each prompt: cheap
  // regenerate), generated from the switch table (kernels/switches.def, docs/FLAGS.md).
#define WGLLM_SWITCH(scope, field, type, kind, def, ...) WGLLM_SWITCH_FIELD_##scope(field, type, def)
#define WGLLM_SWITCH_FIELD_KERNEL(field, type, def)
#define WGLLM_SWITCH_FIELD_MODEL(field, type, def)
#define WGLLM_SWITCH_FIELD_APP(field, type, def)
#define WGLLM_SWITCH_FIELD_SESSION(field, type, def) type field = def;
#define WGLLM_SWITCH_FIELD_WEB(field, type, def)
#include "kernels/switches.def"
#undef WGLLM_SWITCH_FIELD_KERNEL
#undef WGLLM_SWITCH_FIELD_MODEL
#undef WGLLM_SWITCH_FIELD_APP
#undef WGLLM_SWITCH_FIELD_SESSION
#undef WGLLM_SWITCH_FIELD_WEB
#undef WGLLM_SWITCH
  bool time_snapshot_copies = false;  // benchmarks: wait for each end-of-turn snapshot's GPU copies to
                                     // complete (Sequence::wait) and record SessionStats::last_snapshot_done_us
  std::string fingerprint;  // model identity for files (model_fingerprint()); empty: from config()
  nlohmann::json template_context = nlohmann::json::object();  // extra chat-template variables
};

struct TurnResult {
  std::vector<int32_t> reply;  // generated ids (end-of-generation token not included)
  std::string text;            // reply text (decoded, special tokens kept as text)
  GenerateStats stats;         // TTFT counts the prefill of the new tokens only
  uint32_t n_new = 0;          // prompt tokens fed this turn (after what could be reused)
  uint32_t n_reused = 0;       // tokens of the history not recomputed
  bool context_full = false;   // the reply stopped at the end of the context
  bool stopped = false;        // the token callback returned false; the partial reply is kept
};

struct SnapshotInfo {
  uint32_t n_past = 0;    // tokens covered
  uint64_t bytes = 0;     // bytes of the snapshot's copies (0 for KV-only models)
  uint64_t kv_bytes = 0;  // bytes of the KV rows it refers to (not copied; shared with the cache)
  bool evicted = false;   // dropped by the LRU caps (its point is recomputed when needed)
};

struct SessionStats {
  uint64_t snapshot_bytes = 0;  // live snapshot copies, bytes
  uint32_t snapshots = 0, evictions = 0;
  uint64_t recomputed_tokens = 0;  // tokens re-fed because no cached/snapshotted state covered them
  double last_snapshot_us = 0;     // wall time of the latest end-of-turn snapshot: bookkeeping plus
                                   // recording the recurrent-state copies (Sequence::snapshot())
  double last_snapshot_done_us = 0;   // with SessionOptions::time_snapshot_copies: the same snapshot
                                      // until its copies completed on the device (0 otherwise)
  uint64_t last_snapshot_turn_bytes = 0;  // bytes copied by that snapshot (SeqSnapshot::bytes())
};

/// "llama L=30 d=576 ... tensors=<hash of names, types and shapes>" for SessionOptions::fingerprint.
std::string model_fingerprint(const ModelSource& src);

class Session {
 public:
  /// `model`, `tok` and `tmpl` must outlive the session. tmpl == nullptr: raw mode is not
  /// supported for turns (send() throws); the session can still be saved/loaded.
  Session(Model& model, const Tokenizer& tok, const ChatTemplate* tmpl, SessionOptions opt = {});
  ~Session();

  /// Sets the system message (only before the first turn; throws otherwise).
  void set_system(const std::string& text);
  /// Adds a user message and generates the reply (one turn). Throws ContextFull.
  TurnResult send(const std::string& user, const GenerateOptions& g, const TokenCallback& cb = nullptr);
  /// Replaces the last reply with a new one generated from the same prompt.
  TurnResult regenerate(const GenerateOptions& g, const TokenCallback& cb = nullptr);
  /// Removes the last turn (user message and reply).
  void undo();
  /// Replaces the user message of turn `turn` (0-based), drops the turns after it and generates
  /// a new reply: a new branch; the old one stays snapshotted until evicted.
  TurnResult edit(size_t turn, const std::string& user, const GenerateOptions& g, const TokenCallback& cb = nullptr);
  /// Keeps the first n turns (rollback; the cache is moved lazily at the next turn).
  void rollback(size_t n_turns);

  size_t n_turns() const { return turns_.size(); }
  const std::vector<ChatMessage>& messages() const { return msgs_; }
  /// The conversation's tokens (what the cache holds after seek(): prompt + fed reply tokens).
  const std::vector<int32_t>& tokens() const { return tokens_; }
  Sequence& sequence() { return *seq_; }
  uint32_t context_length() const { return seq_->context_length(); }
  std::vector<SnapshotInfo> snapshots() const;
  SessionStats stats() const;
  /// Generations started so far (sends, regenerates, edits that got past the checks): generation
  /// k samples with generation_seed(seed, k) (see the header comment).
  uint64_t generations() const { return generations_; }

  /// Writes the session to `path` (see the header comment for the format). Throws wgllm::Error.
  void save(const std::string& path) const;
  /// Replaces this session with the one in `path` (same model: fingerprint checked). Throws
  /// wgllm::Error, leaving the session unchanged, for any invalid file (see the header comment).
  void load(const std::string& path);

  /// Brings the cache to hold `target` minus its last k >= 1 tokens, reusing the longest cached or
  /// snapshotted prefix; returns the tokens still to feed (>= 1). Public for benchmarks and tests.
  std::vector<int32_t> seek(const std::vector<int32_t>& target);

 private:
  struct Turn {
    size_t msgs_end = 0;       // messages after the turn
    size_t prompt_tokens = 0;  // tokens_ after the user prompt of this turn
    size_t prompt_text = 0;    // rendered_ bytes after the prompt
    size_t end_tokens = 0;     // tokens_ after the reply
    size_t end_text = 0;       // rendered_ bytes after the reply
  };
  struct Snap {
    std::vector<int32_t> tokens;         // the prefix it covers
    std::unique_ptr<SeqSnapshot> state;  // null once evicted
    uint64_t last_use = 0;
    bool pinned = false;
  };
  /// The conversation as the user sees it; restored when a turn fails.
  struct Saved {
    std::vector<ChatMessage> msgs;
    std::vector<Turn> turns;
    std::vector<int32_t> tokens;
    std::string rendered;
    bool context_full = false;
  };
  Saved save_point() const { return {msgs_, turns_, tokens_, rendered_, context_full_}; }
  void restore_point(Saved&& s);
  TurnResult run_turn(const GenerateOptions& g, const TokenCallback& cb, bool render_prompt);
  bool can_truncate() const;
  /// Snapshots the sequence at cache_ (end_of_turn: records SessionStats::last_snapshot_us).
  void take_snapshot(bool end_of_turn);
  /// After a failed forward: back to the empty state (the pinned snapshot), cache_ cleared.
  void drop_live();
  void touch(Snap& s) { s.last_use = ++use_clock_; }
  void evict();
  std::string render(bool add_generation_prompt) const;
  void check_fits(size_t n_tokens) const;

  Model& model_;
  const Tokenizer& tok_;
  const ChatTemplate* tmpl_;
  SessionOptions opt_;
  std::unique_ptr<Sequence> seq_;
  std::vector<ChatMessage> msgs_;
  std::vector<Turn> turns_;
  std::vector<int32_t> tokens_;  // the conversation's tokens
  std::string rendered_;         // the text tokens_ stand for (BOS added by the tokenizer excluded)
  std::vector<int32_t> cache_;   // tokens whose KV rows the sequence holds (n_past <= size)
  std::list<Snap> snaps_;
  uint64_t use_clock_ = 0;
  SessionStats stats_;
  bool context_full_ = false;
  uint64_t generations_ = 0;  // generations started (the next one's generation_seed index)
};

}  // namespace wgllm
