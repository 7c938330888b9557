// BPE merge loops: by merge rank (byte-level BPE) and by token score (SentencePiece-style).
// References: HF tokenizers src/models/bpe/word.rs (Word::merge_all), llama.cpp
// src/llama-vocab.cpp (llm_tokenizer_bpe_session, llm_tokenizer_spm_session).
#include <algorithm>
#include <cstdio>
#include <queue>

#include "core/error.h"
#include "tokenizer/tokenizer_impl.h"

namespace wgllm::tok {

namespace {

struct Sym {
  int32_t id;
  int32_t prev, next;  // -1 at the ends
  bool alive;
};

struct RankedPair {
  int32_t rank;
  int32_t left;  // symbol index; also the tie-breaker (leftmost first)
  int32_t left_id, right_id;
  bool operator>(const RankedPair& o) const {
    return rank != o.rank ? rank > o.rank : left > o.left;
  }
};

}  // namespace

void bpe_merge(const MergeTable& merges, std::vector<int32_t>& ids) {
  const int32_t n = static_cast<int32_t>(ids.size());
  if (n < 2) return;
  std::vector<Sym> syms(n);
  for (int32_t i = 0; i < n; ++i) syms[i] = {ids[i], i - 1, i + 1 < n ? i + 1 : -1, true};
  std::priority_queue<RankedPair, std::vector<RankedPair>, std::greater<>> heap;
  auto consider = [&](int32_t l) {
    if (l < 0) return;
    int32_t r = syms[l].next;
    if (r < 0) return;
    auto it = merges.map.find(MergeTable::key(syms[l].id, syms[r].id));
    if (it != merges.map.end()) heap.push({it->second.rank, l, syms[l].id, syms[r].id});
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);
  while (!heap.empty()) {
    RankedPair p = heap.top();
    heap.pop();
    Sym& l = syms[p.left];
    // Stale entry: the left symbol was absorbed or changed, or its right neighbour changed.
    if (!l.alive || l.id != p.left_id || l.next < 0 || syms[l.next].id != p.right_id) continue;
    Sym& r = syms[l.next];
    l.id = merges.map.at(MergeTable::key(p.left_id, p.right_id)).id;
    r.alive = false;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = p.left;
    consider(l.prev);
    consider(p.left);
  }
  ids.clear();
  for (int32_t i = 0; i >= 0; i = syms[i].next) ids.push_back(syms[i].id);
}

namespace {

struct SpmSym {
  uint32_t start, len;  // byte span in the text
  int32_t prev, next;
};

struct ScoredPair {
  float score;
  int32_t left, right;
  uint32_t len;  // combined length when queued (detects stale entries)
  bool operator<(const ScoredPair& o) const {  // max-heap: higher score, then leftmost
    return score != o.score ? score < o.score : left > o.left;
  }
};

size_t utf8_len(unsigned char c) {
  return c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
}

}  // namespace

void spm_encode(const Tokenizer::Impl& t, std::string_view text, std::vector<int32_t>& out) {
  std::vector<SpmSym> syms;
  for (size_t off = 0; off < text.size();) {
    size_t len = std::min(utf8_len(static_cast<unsigned char>(text[off])), text.size() - off);
    int32_t idx = static_cast<int32_t>(syms.size());
    syms.push_back({uint32_t(off), uint32_t(len), idx - 1, off + len < text.size() ? idx + 1 : -1});
    off += len;
  }
  if (syms.empty()) return;
  std::priority_queue<ScoredPair> heap;
  auto consider = [&](int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    std::string_view s = text.substr(syms[l].start, syms[l].len + syms[r].len);
    auto it = t.piece_to_id.find(s);
    if (it == t.piece_to_id.end()) return;
    heap.push({t.scores[it->second], l, r, uint32_t(s.size())});
  };
  for (int32_t i = 0; i + 1 < int32_t(syms.size()); ++i) consider(i, i + 1);
  while (!heap.empty()) {
    ScoredPair p = heap.top();
    heap.pop();
    SpmSym& l = syms[p.left];
    SpmSym& r = syms[p.right];
    if (l.len == 0 || r.len == 0 || l.next != p.right || l.len + r.len != p.len) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = p.left;
    consider(l.prev, p.left);
    consider(p.left, l.next);
  }
  for (int32_t i = 0; i >= 0; i = syms[i].next) {
    std::string_view s = text.substr(syms[i].start, syms[i].len);
    auto it = t.piece_to_id.find(s);
    if (it != t.piece_to_id.end()) {
      out.push_back(it->second);
      continue;
    }
    // Not in the vocabulary (merges only ever build vocabulary tokens, so this is a single
    // character): byte fallback, else the unknown token.
    bool all_bytes = true;
    for (unsigned char c : s) all_bytes = all_bytes && t.byte_fallback[c] >= 0;
    if (all_bytes) {
      for (unsigned char c : s) out.push_back(t.byte_fallback[c]);
    } else if (t.unk >= 0) {
      out.push_back(t.unk);
    } else {
      throw Error("tokenizer: character '" + std::string(s) +
                  "' has no token, no <0xXX> byte tokens and no unknown token");
    }
  }
}

}  // namespace wgllm::tok
