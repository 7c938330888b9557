// PrefixCache: saved states of the server's sequences (one per slot), found by token prefix.
//
// A request's prompt is a token sequence; a client that resends a conversation repeats the earlier
// turns' tokens. Sequences with recurrent state (LFM2 ShortConv, Qwen3.5 Gated DeltaNet) cannot be
// cut back to a shorter length, so the scheduler snapshots them (Sequence::snapshot) at the end of
// each prompt and each reply and files the snapshot here under the tokens it covers. A later
// request looks up the longest filed prefix of its prompt on a slot and restores it; only the
// tokens after it are computed.
//
// Structure: a trie over token ids (one node per token of a filed prefix; nodes are shared by
// every entry through them, so a conversation's turns cost one path), each node holding at most
// one entry per slot. Entries are evicted least recently used first when the bytes of their
// snapshots exceed cap_bytes or their count exceeds cap_count. A snapshot is tied to the sequence
// it was taken from (SeqSnapshot is only restorable there, and only while that sequence's KV rows
// below its length are unchanged): lookup() takes a predicate that says whether an entry is still
// usable, and drops those that are not. One slot's entries are never returned for another slot.
// Not thread-safe: the scheduler thread owns it.
#pragma once
#include <cstdint>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "models/model.h"

namespace wgllm::server {

class PrefixCache {
 public:
  /// cap_bytes: bytes of snapshot copies kept (SeqSnapshot::bytes()); cap_count: entries kept.
  PrefixCache(uint64_t cap_bytes, uint32_t cap_count);
  ~PrefixCache();
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  /// Files `snap` (a snapshot of slot's sequence after exactly `tokens`) with its byte size `bytes`,
  /// replacing an entry of the same slot and tokens; then evicts down to the caps (least recently
  /// used first; the new entry last). Empty `tokens` are not filed.
  void insert(uint32_t slot, std::span<const int32_t> tokens, std::unique_ptr<SeqSnapshot> snap, uint64_t bytes);

  /// The snapshot of the longest entry of `slot` whose tokens are a prefix of `tokens` and at most
  /// max_len long, among those for which usable(snapshot) is true (entries found unusable on the
  /// way are dropped). Marks it used. Null when there is none.
  const SeqSnapshot* lookup(uint32_t slot, std::span<const int32_t> tokens, size_t max_len,
                            const std::function<bool(const SeqSnapshot&)>& usable);

  /// Drops every entry of `slot` for which usable() is false (after its sequence was rewritten).
  void prune(uint32_t slot, const std::function<bool(const SeqSnapshot&)>& usable);

  uint64_t bytes() const { return bytes_; }
  size_t size() const { return entries_.size(); }
  uint64_t evictions() const { return evictions_; }
  /// Trie nodes alive (one per token of the distinct filed prefixes; for tests and reports).
  size_t nodes() const { return nodes_; }

 private:
  struct Node;
  struct Entry {
    uint32_t slot = 0;
    size_t length = 0;
    uint64_t bytes = 0;
    std::unique_ptr<SeqSnapshot> snap;
    Node* node = nullptr;
  };
  using EntryIt = std::list<Entry>::iterator;
  struct Node {
    Node* parent = nullptr;
    int32_t token = 0;
    std::map<int32_t, std::unique_ptr<Node>> kids;
    std::map<uint32_t, EntryIt> entries;  // by slot
  };
  void erase(EntryIt it);
  void evict();

  uint64_t cap_bytes_ = 0;
  uint32_t cap_count_ = 0;
  std::unique_ptr<Node> root_;
  std::list<Entry> entries_;  // most recently used first
  uint64_t bytes_ = 0, evictions_ = 0;
  size_t nodes_ = 0;
};

}  // namespace wgllm::server
