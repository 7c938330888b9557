#include "server/prefix_cache.h"

namespace wgllm::server {

PrefixCache::PrefixCache(uint64_t cap_bytes, uint32_t cap_count)
    : cap_bytes_(cap_bytes), cap_count_(cap_count), root_(std::make_unique<Node>()) {}

PrefixCache::~PrefixCache() {
  // Iterative teardown: a deep trie (one node per token) must not recurse in destructors.
  std::vector<std::unique_ptr<Node>> stack;
  for (auto& [t, k] : root_->kids) stack.push_back(std::move(k));
  while (!stack.empty()) {
    std::unique_ptr<Node> n = std::move(stack.back());
    stack.pop_back();
    for (auto& [t, k] : n->kids) stack.push_back(std::move(k));
  }
}

void PrefixCache::insert(uint32_t slot, std::span<const int32_t> tokens, std::unique_ptr<SeqSnapshot> snap,
                         uint64_t bytes) {
  if (tokens.empty() || !snap) return;
  Node* n = root_.get();
  for (int32_t t : tokens) {
    auto& k = n->kids[t];
    if (!k) {
      k = std::make_unique<Node>();
      k->parent = n;
      k->token = t;
      ++nodes_;
    }
    n = k.get();
  }
  if (auto it = n->entries.find(slot); it != n->entries.end()) {
    bytes_ -= it->second->bytes;
    entries_.erase(it->second);
    n->entries.erase(it);
  }
  entries_.push_front(Entry{slot, tokens.size(), bytes, std::move(snap), n});
  n->entries[slot] = entries_.begin();
  bytes_ += bytes;
  evict();
}

const SeqSnapshot* PrefixCache::lookup(uint32_t slot, std::span<const int32_t> tokens, size_t max_len,
                                       const std::function<bool(const SeqSnapshot&)>& usable) {
  // The slot's entries along the path of `tokens`, shortest first.
  std::vector<EntryIt> found;
  Node* n = root_.get();
  for (size_t i = 0; i < tokens.size() && i < max_len; ++i) {
    auto k = n->kids.find(tokens[i]);
    if (k == n->kids.end()) break;
    n = k->second.get();
    if (auto e = n->entries.find(slot); e != n->entries.end()) found.push_back(e->second);
  }
  for (size_t i = found.size(); i-- > 0;) {
    EntryIt it = found[i];
    if (usable && !usable(*it->snap)) {
      erase(it);
      continue;
    }
    entries_.splice(entries_.begin(), entries_, it);  // most recently used (iterators stay valid)
    return it->snap.get();
  }
  return nullptr;
}

void PrefixCache::prune(uint32_t slot, const std::function<bool(const SeqSnapshot&)>& usable) {
  for (auto it = entries_.begin(); it != entries_.end();) {
    auto next = std::next(it);
    if (it->slot == slot && !usable(*it->snap)) erase(it);
    it = next;
  }
}

void PrefixCache::erase(EntryIt it) {
  Node* n = it->node;
  n->entries.erase(it->slot);
  bytes_ -= it->bytes;
  entries_.erase(it);
  // Remove the nodes that no longer lead to an entry.
  while (n != root_.get() && n->entries.empty() && n->kids.empty()) {
    Node* p = n->parent;
    p->kids.erase(n->token);  // destroys n
    --nodes_;
    n = p;
  }
}

void PrefixCache::evict() {
  while (!entries_.empty() && (bytes_ > cap_bytes_ || entries_.size() > cap_count_)) {
    erase(std::prev(entries_.end()));
    ++evictions_;
  }
}

}  // namespace wgllm::server
