// Session turns, rollback and snapshot policy (see session.h). Files: session_file.cpp.
#include "runtime/session.h"

#include <algorithm>
#include <chrono>

#include "chat/jinja_value.h"  // TemplateRaise
#include "tokenizer/tokenizer.h"

namespace wgllm {

namespace {

size_t common_prefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

bool is_prefix(const std::vector<int32_t>& p, const std::vector<int32_t>& of) {
  return p.size() <= of.size() && std::equal(p.begin(), p.end(), of.begin());
}

}  // namespace

Session::Session(Model& model, const Tokenizer& tok, const ChatTemplate* tmpl, SessionOptions opt)
    : model_(model), tok_(tok), tmpl_(tmpl), opt_(std::move(opt)) {
  seq_ = model_.new_sequence(opt_.context_length);
  // The empty state: pinned, outside the caps (for recurrent models, the zero states).
  Snap s;
  s.state = seq_->snapshot();
  s.pinned = true;
  snaps_.push_back(std::move(s));
}

Session::~Session() = default;

void Session::set_system(const std::string& text) {
  if (!turns_.empty() || !tokens_.empty()) throw Error("the system message can only be set before the first turn");
  msgs_.clear();
  if (!text.empty()) msgs_.push_back({"system", text});
}

std::string Session::render(bool add_generation_prompt) const {
  if (!tmpl_) throw Error("this model has no chat template: sessions need one");
  try {
    return tmpl_->apply(msgs_, add_generation_prompt, opt_.template_context);
  } catch (const jinja::TemplateRaise& e) {  // raise_exception('...'): its own text, named as the template's
    throw Error(std::string("the chat template refused the conversation: ") + e.what());
  }
}

void Session::check_fits(size_t n) const {
  if (n + 1 > seq_->context_length())
    throw ContextFull("the conversation needs " + std::to_string(n) + " prompt tokens + 1 to generate, the context holds " +
                      std::to_string(seq_->context_length()) +
                      " tokens: undo or edit an earlier turn, or start a session with a larger context");
}

void Session::restore_point(Saved&& s) {
  msgs_ = std::move(s.msgs);
  turns_ = std::move(s.turns);
  tokens_ = std::move(s.tokens);
  rendered_ = std::move(s.rendered);
  context_full_ = s.context_full;
}

TurnResult Session::send(const std::string& user, const GenerateOptions& g, const TokenCallback& cb) {
  Saved keep = save_point();
  msgs_.push_back({"user", user});
  try {
    return run_turn(g, cb, true);
  } catch (...) {
    restore_point(std::move(keep));
    throw;
  }
}

TurnResult Session::regenerate(const GenerateOptions& g, const TokenCallback& cb) {
  if (turns_.empty()) throw Error("regenerate: no reply yet");
  Saved keep = save_point();
  const Turn t = turns_.back();
  turns_.pop_back();
  msgs_.resize(t.msgs_end - 1);  // keeps the user message
  tokens_.resize(t.prompt_tokens);
  rendered_.resize(t.prompt_text);
  try {
    return run_turn(g, cb, false);
  } catch (...) {
    restore_point(std::move(keep));
    throw;
  }
}

void Session::rollback(size_t n) {
  if (n > turns_.size()) throw Error("rollback: only " + std::to_string(turns_.size()) + " turns");
  if (n == turns_.size()) return;
  const bool sys = !msgs_.empty() && msgs_[0].role == "system";
  turns_.resize(n);
  msgs_.resize(n ? turns_.back().msgs_end : (sys ? 1 : 0));
  tokens_.resize(n ? turns_.back().end_tokens : 0);
  rendered_.resize(n ? turns_.back().end_text : 0);
  context_full_ = false;
}

void Session::undo() {
  if (turns_.empty()) throw Error("undo: no turn to undo");
  rollback(turns_.size() - 1);
}

TurnResult Session::edit(size_t turn, const std::string& user, const GenerateOptions& g, const TokenCallback& cb) {
  if (turn >= turns_.size()) throw Error("edit: no turn " + std::to_string(turn) + " (there are " + std::to_string(turns_.size()) + ")");
  // Any failure (the edit does not fit, an error mid-turn) restores the conversation.
  Saved keep = save_point();
  rollback(turn);
  try {
    return send(user, g, cb);
  } catch (...) {
    restore_point(std::move(keep));
    throw;
  }
}

bool Session::can_truncate() const { return seq_->memory().recurrent == 0 && opt_.kv_truncate; }

void Session::drop_live() {
  seq_->restore(*snaps_.front().state);  // the pinned empty state: always restorable
  cache_.clear();
}

TurnResult Session::run_turn(const GenerateOptions& g, const TokenCallback& cb, bool render_prompt) {
  std::vector<int32_t> prompt = tokens_;
  std::string text = rendered_;
  if (render_prompt) {
    const std::string full = render(true);
    // (A suffix starting with a UTF-8 continuation byte means rendered_ ended inside a character,
    // e.g. a reply cut mid-character that the message now holds as U+FFFD: not append-only.)
    if (full.size() > rendered_.size() && full.compare(0, rendered_.size(), rendered_) == 0 &&
        (static_cast<unsigned char>(full[rendered_.size()]) & 0xC0) != 0x80) {
      // Append-only: feed the new text only.
      const std::string_view suffix = std::string_view(full).substr(rendered_.size());
      std::vector<int32_t> ids = prompt.empty() ? tok_.encode_prompt(suffix) : tok_.encode(suffix);
      prompt.insert(prompt.end(), ids.begin(), ids.end());
    } else {
      // The template re-rendered history differently: re-tokenize everything; seek() still
      // reuses the longest common prefix with the cache and the snapshots.
      prompt = tok_.encode_prompt(full);
    }
    text = full;
  }
  if (prompt.empty()) throw Error("empty prompt");
  check_fits(prompt.size());
  tokens_ = prompt;
  rendered_ = text;

  TurnResult r;
  const size_t known = common_prefix(cache_, prompt);  // what was processed before, in this order
  GenerateOptions gen = g;
  gen.sampler.seed = generation_seed(g.sampler.seed, generations_);
  Sampler{gen.sampler};  // invalid sampling options: an error before anything changes
  try {
    std::vector<int32_t> fresh = seek(prompt);
    const size_t start = prompt.size() - fresh.size();
    r.n_new = uint32_t(fresh.size());
    r.n_reused = uint32_t(start);
    if (known > start) stats_.recomputed_tokens += known - start;
    ++generations_;
    // Prompt snapshot: feed all but the last prompt token, snapshot, then generate from the last
    // one (its logits start the reply). regenerate() then restores it and re-feeds one token.
    double head_ms = 0;
    size_t head = 0;
    if (fresh.size() > 1 && opt_.prompt_snapshot && !can_truncate()) {
      const auto t0 = std::chrono::steady_clock::now();
      head = fresh.size() - 1;
      model_.forward(*seq_, std::span<const int32_t>(fresh.data(), head), nullptr);
      cache_.assign(prompt.begin(), prompt.end() - 1);
      take_snapshot(false);
      head_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
    const std::span<const int32_t> tail(fresh.data() + head, fresh.size() - head);
    r.reply = generate(model_, *seq_, tok_, tail, gen, [&](int32_t t) {
      if (!cb || cb(t)) return true;
      r.stopped = true;
      return false;
    }, &r.stats, std::span<const int32_t>(prompt.data(), prompt.size() - tail.size()));
    r.stats.n_prompt += uint32_t(head);
    r.stats.ttft_ms += head_ms;
  } catch (...) {
    drop_live();  // the sequence may hold part of this turn: forget it
    throw;
  }
  // The sequence holds the prompt and the reply tokens that were fed back (all but a last
  // token that was sampled without being fed).
  const size_t fed = seq_->n_past() - prompt.size();
  cache_ = prompt;
  cache_.insert(cache_.end(), r.reply.begin(), r.reply.begin() + fed);
  tokens_ = cache_;
  for (size_t i = 0; i < r.reply.size(); ++i) {
    std::string piece = tok_.token_to_piece(r.reply[i]);
    if (i < fed) rendered_ += piece;
    r.text += piece;
  }
  if (validate_utf8(r.text).has_value()) {
    // The reply ends inside a character (token limit) or holds bytes that are not UTF-8: the
    // message must stay valid text (the next turn renders and encodes it), so invalid bytes become
    // U+FFFD. The rendering then no longer extends rendered_ and the next turn falls back to the
    // longest common token prefix (slower, never wrong).
    StreamDecoder d(tok_, false);
    std::string clean;
    for (int32_t id : r.reply) clean += d.push(id);
    r.text = clean + d.flush();
  }
  r.context_full = seq_->n_past() >= seq_->context_length();
  context_full_ = r.context_full;
  msgs_.push_back({"assistant", r.text});
  turns_.push_back({msgs_.size(), prompt.size(), text.size(), tokens_.size(), rendered_.size()});
  take_snapshot(true);
  return r;
}

std::vector<int32_t> Session::seek(const std::vector<int32_t>& target) {
  if (target.empty()) throw Error("seek: empty target");
  const size_t limit = target.size() - 1;  // leave >= 1 token to feed (its logits start the reply)
  const bool kv_only = seq_->memory().recurrent == 0;
  // Candidates: the live state when it is a prefix of the target (free); for KV-only models,
  // the live cache cut to the common prefix (free); a restorable snapshot whose tokens are a
  // prefix of the target (a copy of the recurrent states). The longest wins; ties go to free.
  enum { None, Live, Truncate, Restore } how = None;
  size_t best = 0;
  Snap* snap = nullptr;
  const size_t lcp = std::min(common_prefix(cache_, target), limit);
  if (lcp == cache_.size()) {
    how = Live, best = lcp;
  } else if (kv_only && opt_.kv_truncate) {
    how = Truncate, best = lcp;
  }
  for (Snap& s : snaps_) {
    const size_t n = s.tokens.size();
    if (!s.state || n > limit || (how != None && n <= best)) continue;
    if (!is_prefix(s.tokens, target) || !seq_->restorable(*s.state)) continue;
    how = Restore, best = n, snap = &s;
  }
  switch (how) {
    case None: throw Error("seek: no usable state (the initial snapshot was lost)");
    case Live: break;
    case Truncate: seq_->truncate(uint32_t(best)); break;
    case Restore:
      seq_->restore(*snap->state);
      touch(*snap);
      break;
  }
  cache_.assign(target.begin(), target.begin() + best);
  return std::vector<int32_t>(target.begin() + best, target.end());
}

void Session::take_snapshot(bool end_of_turn) {
  const auto t0 = std::chrono::steady_clock::now();
  // One snapshot per point: replace an older one of the same tokens.
  for (auto it = snaps_.begin(); it != snaps_.end();) {
    if (!it->pinned && it->tokens == cache_) it = snaps_.erase(it);
    else ++it;
  }
  Snap s;
  s.tokens = cache_;
  s.state = seq_->snapshot();
  const uint64_t bytes = s.state->bytes();
  touch(s);
  snaps_.push_back(std::move(s));
  evict();
  if (!end_of_turn) return;
  auto us = [&] { return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count(); };
  stats_.last_snapshot_us = us();
  stats_.last_snapshot_turn_bytes = bytes;
  if (opt_.time_snapshot_copies) {
    seq_->wait();
    stats_.last_snapshot_done_us = us();
  }
}

void Session::evict() {
  while (true) {
    uint64_t bytes = 0;
    uint32_t count = 0;
    Snap* lru = nullptr;
    for (Snap& s : snaps_) {
      if (s.pinned || !s.state) continue;
      bytes += s.state->bytes();
      ++count;
      if (!lru || s.last_use < lru->last_use) lru = &s;
    }
    if (!lru || (bytes <= opt_.snapshot_cap_bytes && count <= opt_.snapshot_cap_count)) break;
    lru->state.reset();
    ++stats_.evictions;
  }
  // Forget evicted snapshots that no longer name a point of the conversation.
  snaps_.remove_if([&](const Snap& s) { return !s.state && !is_prefix(s.tokens, tokens_); });
}

std::vector<SnapshotInfo> Session::snapshots() const {
  // One entry per turn of the current conversation: the snapshot at the end of that turn.
  std::vector<SnapshotInfo> out;
  const uint64_t kv_per_token = seq_->context_length() ? seq_->memory().kv_cache / seq_->context_length() : 0;
  for (const Turn& t : turns_) {
    SnapshotInfo info;
    info.n_past = uint32_t(t.end_tokens);
    info.kv_bytes = kv_per_token * t.end_tokens;
    info.evicted = true;
    for (const Snap& s : snaps_)
      if (!s.pinned && s.tokens.size() == t.end_tokens && is_prefix(s.tokens, tokens_) && s.state) {
        info.bytes = s.state->bytes();
        info.evicted = false;
      }
    out.push_back(info);
  }
  return out;
}

SessionStats Session::stats() const {
  SessionStats st = stats_;
  for (const Snap& s : snaps_)
    if (s.state && !s.pinned) {
      st.snapshot_bytes += s.state->bytes();
      ++st.snapshots;
    }
  return st;
}

}  // namespace wgllm
