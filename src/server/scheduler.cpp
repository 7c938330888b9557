#include "server/scheduler.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include <fmt/core.h>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace wgllm::server {

using Clock = std::chrono::steady_clock;

const char* finish_name(Finish f) {
  switch (f) {
    case Finish::Stop: return "stop";
    case Finish::Length: return "length";
    case Finish::Cancelled: return "cancelled";
    case Finish::Error: return "error";
    default: return "none";
  }
}

bool Job::wait(std::chrono::milliseconds timeout, std::deque<JobEvent>& out) {
  std::unique_lock<std::mutex> lk(mu);
  cv.wait_for(lk, timeout, [&] { return done || !events.empty(); });
  while (!events.empty()) {
    out.push_back(std::move(events.front()));
    events.pop_front();
  }
  return done;
}

struct Scheduler::Slot {
  uint32_t index = 0;
  std::unique_ptr<Sequence> seq;
  std::unique_ptr<SeqSnapshot> empty;  // n_past 0, for sequences that cannot truncate
  std::vector<int32_t> tokens;         // what the sequence holds: seq->n_past() == tokens.size()
  uint64_t last_use = 0;
  // The job being served (null when idle) and its generation state.
  std::shared_ptr<Job> job;
  size_t fed = 0;  // prompt tokens in the sequence
  std::optional<Sampler> sampler;
  std::optional<StreamDecoder> dec;
  std::unordered_map<int32_t, uint32_t> counts;  // generated token -> occurrences (penalties)
  uint32_t n_generated = 0;
  int32_t next = -1;                  // sampled, not yet fed
  std::string pending;                // decoded text not yet released (could start a stop string)
  std::vector<TokenLogprob> pending_lp;
  Clock::time_point last_token;
  bool first = true;
  std::vector<float> logits;  // this step's logits (BatchItem::Out::Logits)
};

Scheduler::Scheduler(Model& model, const Tokenizer& tok, const SchedulerOptions& opt, Metrics& metrics)
    : model_(model), tok_(tok), opt_(opt), metrics_(metrics), cache_(opt.snapshot_cap_bytes, opt.snapshot_cap_count) {
  if (opt_.slots == 0) throw Error("the scheduler needs at least one slot");
  if (opt_.prefill_chunk == 0) opt_.prefill_chunk = SchedulerOptions{}.prefill_chunk;
  // The slots' sequences together: a backend may put their caches in shared buffers (KV pools), so
  // that a batched step reaches them all through one binding (Model::new_sequences).
  std::vector<std::unique_ptr<Sequence>> seqs = model_.new_sequences(opt_.slots, opt_.context);
  for (uint32_t i = 0; i < opt_.slots; ++i) {
    auto s = std::make_unique<Slot>();
    s->index = i;
    s->seq = std::move(seqs[i]);
    for (const auto& st : s->seq->states()) truncatable_ = truncatable_ && st->by_length();
    slots_.push_back(std::move(s));
  }
  ctx_len_ = slots_[0]->seq->context_length();
  if (!truncatable_)
    for (auto& s : slots_) s->empty = s->seq->snapshot();
  metrics_.batched_forward = opt_.batch && model_.batched_forward() ? 1 : 0;
  update_memory();
  thread_ = std::thread([this] { run(); });
}

Scheduler::~Scheduler() { stop(); }

bool Scheduler::submit(const std::shared_ptr<Job>& job) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    // Room: the free slots (jobs there start at the next step) plus max_queue waiting.
    if (stopping_ || queue_.size() >= opt_.max_queue + (slots_.size() - holding_)) return false;
    queue_.push_back(job);
    metrics_.queue_depth = queue_.size();
  }
  cv_.notify_all();
  return true;
}

void Scheduler::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

namespace {
void end_job(Job& j, Finish f, const std::string& error = {}) {
  std::lock_guard<std::mutex> lk(j.mu);
  j.done = true;
  j.finish = f;
  j.error = error;
  j.cv.notify_all();
}
}  // namespace

void Scheduler::run() {
  while (true) {
    std::vector<std::shared_ptr<Job>> admitted;
    {
      std::unique_lock<std::mutex> lk(mu_);
      auto idle = [&] {
        size_t n = 0;
        for (auto& s : slots_) n += !s->job;
        return n;
      };
      auto busy = [&] { return idle() < slots_.size(); };
      cv_.wait(lk, [&] { return stopping_ || busy() || !queue_.empty(); });
      if (stopping_) break;
      for (size_t free = idle(); free > 0 && !queue_.empty(); --free) {
        admitted.push_back(std::move(queue_.front()));
        queue_.pop_front();
        ++holding_;
      }
      metrics_.queue_depth = queue_.size();
    }
    for (auto& j : admitted) {
      if (j->cancel) {
        ++metrics_.requests_cancelled;
        release();
        end_job(*j, Finish::Cancelled);
        continue;
      }
      // The idle slot holding the longest prefix of the prompt; ties: the least recently used.
      const size_t max_reuse = j->prompt.size() - 1;  // the last prompt token is always computed
      Slot* best = nullptr;
      size_t best_len = 0;
      const SeqSnapshot* best_snap = nullptr;
      for (auto& sp : slots_) {
        Slot& s = *sp;
        if (s.job) continue;
        size_t len = 0;
        const SeqSnapshot* snap = nullptr;
        if (opt_.prefix_reuse) {
          size_t m = 0;
          while (m < s.tokens.size() && m < max_reuse && s.tokens[m] == j->prompt[m]) ++m;
          if (truncatable_ || m == s.tokens.size()) len = m;
          if (!truncatable_) {
            const SeqSnapshot* c = cache_.lookup(s.index, j->prompt, max_reuse,
                                                 [&](const SeqSnapshot& x) { return s.seq->restorable(x); });
            if (c && c->n_past() > len) {
              len = c->n_past();
              snap = c;
            }
          }
        }
        if (!best || len > best_len || (len == best_len && s.last_use < best->last_use)) {
          best = &s;
          best_len = len;
          best_snap = snap;
        }
      }
      Slot& s = *best;
      try {
        if (best_snap) {
          s.seq->restore(*best_snap);
          s.tokens.assign(j->prompt.begin(), j->prompt.begin() + best_len);
        } else if (best_len < s.tokens.size()) {
          if (truncatable_)
            s.seq->truncate(uint32_t(best_len));
          else
            s.seq->restore(*s.empty);  // best_len == 0 here
          s.tokens.resize(best_len);
        }
      } catch (const std::exception& e) {
        reset_slot(s);
        ++metrics_.requests_failed;
        release();
        end_job(*j, Finish::Error, e.what());
        continue;
      }
      start(s, j);
    }
    // One step of every active slot, all in one forward (Model::forward_batch).
    step_all();
    update_memory();
  }
  // Shutdown: every queued and active job ends as cancelled.
  std::deque<std::shared_ptr<Job>> left;
  {
    std::lock_guard<std::mutex> lk(mu_);
    left.swap(queue_);
    metrics_.queue_depth = 0;
  }
  for (auto& j : left) {
    ++metrics_.requests_cancelled;
    end_job(*j, Finish::Cancelled);
  }
  for (auto& s : slots_)
    if (s->job) finish(*s, Finish::Cancelled);
}

void Scheduler::start(Slot& s, std::shared_ptr<Job> job) {
  s.job = std::move(job);
  Job& j = *s.job;
  s.fed = s.tokens.size();
  s.sampler.emplace(j.params.sampler);
  s.dec.emplace(tok_, true);
  s.counts.clear();
  s.n_generated = 0;
  s.next = -1;
  s.pending.clear();
  s.pending_lp.clear();
  s.first = true;
  {
    std::lock_guard<std::mutex> lk(j.mu);
    j.cached_tokens = uint32_t(s.fed);
    j.slot = s.index;
  }
  metrics_.cached_tokens += s.fed;
  ++metrics_.active;
}

void Scheduler::step_all() {
  std::vector<Slot*> stepping;
  std::vector<BatchItem> items;
  // Prompt rows per forward, over all slots: slots joining together spread their prompts over
  // several steps instead of stalling every decoding slot for all of them at once.
  uint32_t budget = opt_.prefill_chunk;
  for (auto& sp : slots_) {
    Slot& s = *sp;
    if (!s.job) continue;
    if (s.job->cancel) {
      finish(s, Finish::Cancelled);
      continue;
    }
    BatchItem it;
    if (!plan(s, it, budget)) continue;
    stepping.push_back(&s);
    items.push_back(it);
  }
  if (items.empty()) return;
  // A failed forward ends its slots' jobs with the error; they start over empty. forward_batch
  // checks every item before writing, so what fails a whole batch is a device error.
  std::vector<std::optional<std::string>> failed(items.size());
  if (opt_.batch) {
    try {
      model_.forward_batch(items);
    } catch (const std::exception& e) {
      for (auto& f : failed) f = e.what();
    }
  } else {
    for (size_t i = 0; i < items.size(); ++i) try {
        model_.forward_batch({&items[i], 1});
      } catch (const std::exception& e) {
        failed[i] = e.what();
      }
  }
  metrics_.forwards += opt_.batch ? 1 : items.size();
  metrics_.batch_items += items.size();
  for (size_t i = 0; i < items.size(); ++i) {
    Slot& s = *stepping[i];
    try {
      if (failed[i]) throw Error(*failed[i]);
      after(s, items[i]);
    } catch (const std::exception& e) {
      if (s.job) finish(s, Finish::Error, e.what());
      reset_slot(s);
    }
  }
}

bool Scheduler::plan(Slot& s, BatchItem& it, uint32_t& budget) {
  Job& j = *s.job;
  const GenParams& p = j.params;
  const bool need_logits = !p.sampler.device_argmax_ok() || p.logprobs || p.presence_penalty != 0.0f ||
                           p.frequency_penalty != 0.0f;
  std::span<const int32_t> in;
  bool produces = true;  // this step ends in a token to sample
  if (s.fed < j.prompt.size()) {
    const size_t n = std::min<size_t>(budget, j.prompt.size() - s.fed);
    if (n == 0) return false;  // this step's prompt rows are taken: wait for the next one
    budget -= uint32_t(n);
    // Recurrent state: the prompt's last token is fed apart, with a snapshot before it (filed
    // under the prompt minus one token), so an identical resend (a retry, a regenerated reply,
    // an edited reply) recomputes only that token, as a KV-only sequence does by truncating.
    const bool split_last = !truncatable_ && opt_.prefix_reuse && n > 1 && s.fed + n == j.prompt.size();
    in = std::span<const int32_t>(j.prompt).subspan(s.fed, split_last ? n - 1 : n);
    produces = s.fed + in.size() == j.prompt.size();
  } else {
    if (s.seq->n_past() + 1 > ctx_len_) {
      finish(s, Finish::Length);
      return false;
    }
    in = std::span<const int32_t>(&s.next, 1);
  }
  it.seq = s.seq.get();
  it.tokens = in;
  it.out = !produces ? BatchItem::Out::None : need_logits ? BatchItem::Out::Logits : BatchItem::Out::Argmax;
  it.logits = &s.logits;
  return true;
}

void Scheduler::after(Slot& s, const BatchItem& it) {
  Job& j = *s.job;
  const GenParams& p = j.params;
  const bool prefill = s.fed < j.prompt.size();
  s.tokens.insert(s.tokens.end(), it.tokens.begin(), it.tokens.end());
  ++metrics_.steps;
  if (it.out == BatchItem::Out::None) {  // a prompt chunk before the last token: nothing to sample yet
    s.fed += it.tokens.size();
    if (!truncatable_ && opt_.prefix_reuse && s.fed + 1 == j.prompt.size())
      cache_.insert(s.index, s.tokens, s.seq->snapshot(), s.empty->bytes());
    return;
  }
  TokenLogprob lp;
  const int32_t t = it.out == BatchItem::Out::Logits ? pick(s, s.logits, p.logprobs ? &lp : nullptr) : it.argmax;
  const auto now = Clock::now();
  if (prefill) {
    s.fed = j.prompt.size();
    metrics_.ttft.observe(std::chrono::duration<double>(now - j.arrival).count());
  } else {
    metrics_.itl.observe(std::chrono::duration<double>(now - s.last_token).count());
  }
  s.last_token = now;
  emit(s, t, p.logprobs ? &lp : nullptr);
}

int32_t Scheduler::pick(Slot& s, std::vector<float>& logits, TokenLogprob* lp) {
  const GenParams& p = s.job->params;
  if (p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f)
    for (auto [id, c] : s.counts)
      if (id >= 0 && size_t(id) < logits.size()) logits[id] -= c * p.frequency_penalty + (c > 0 ? p.presence_penalty : 0.0f);
  const int32_t t = s.sampler->sample(logits, {});
  if (lp) {
    // log-softmax of the (penalised) logits in double; the model's distribution, before
    // temperature and truncation (as OpenAI reports it).
    double mx = -INFINITY;
    for (float v : logits) mx = std::max<double>(mx, v);
    double sum = 0;
    for (float v : logits) sum += std::exp(double(v) - mx);
    const double lse = mx + std::log(sum);
    auto text = [&](int32_t id) { return tok_.decode(std::span<const int32_t>(&id, 1)); };
    lp->id = t;
    lp->token = text(t);
    lp->logprob = float(logits[t] - lse);
    if (p.top_logprobs > 0) {
      std::vector<int32_t> idx(logits.size());
      for (size_t i = 0; i < idx.size(); ++i) idx[i] = int32_t(i);
      const size_t k = std::min<size_t>(p.top_logprobs, idx.size());
      std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                        [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
      for (size_t i = 0; i < k; ++i) lp->top.push_back({idx[i], text(idx[i]), float(logits[idx[i]] - lse)});
    }
  }
  return t;
}

namespace {
/// Position of the earliest stop string in text, or npos.
size_t find_stop(const std::string& text, const std::vector<std::string>& stops) {
  size_t best = std::string::npos;
  for (const auto& st : stops)
    if (!st.empty()) best = std::min(best, text.find(st));
  return best;
}
/// Length of the longest suffix of text that is a proper prefix of a stop string (held back).
size_t stop_holdback(const std::string& text, const std::vector<std::string>& stops) {
  size_t h = 0;
  for (const auto& st : stops)
    for (size_t n = std::min(st.size() - (st.empty() ? 0 : 1), text.size()); n > h; --n)
      if (text.compare(text.size() - n, n, st, 0, n) == 0) {
        h = n;
        break;
      }
  return h;
}
}  // namespace

bool Scheduler::emit(Slot& s, int32_t t, TokenLogprob* lp) {
  Job& j = *s.job;
  const GenParams& p = j.params;
  if (!p.ignore_eos && tok_.is_eog(t)) {
    finish(s, Finish::Stop);
    return false;
  }
  s.next = t;
  ++s.n_generated;
  ++s.counts[t];
  ++metrics_.generated_tokens;
  s.pending += s.dec->push(t);
  if (lp) s.pending_lp.push_back(std::move(*lp));
  const bool at_max = s.n_generated >= p.max_tokens;
  const bool ctx_full = s.seq->n_past() + 1 > ctx_len_;
  if (at_max || ctx_full) s.pending += s.dec->flush();
  JobEvent ev;
  const size_t stop_at = find_stop(s.pending, p.stop);
  const bool stopped = stop_at != std::string::npos;
  size_t release = s.pending.size();
  if (stopped)
    release = stop_at;
  else if (!at_max && !ctx_full)
    release -= stop_holdback(s.pending, p.stop);
  ev.text = s.pending.substr(0, release);
  s.pending.erase(0, stopped ? s.pending.size() : release);
  if (!ev.text.empty() || stopped || at_max || ctx_full) {
    ev.logprobs.swap(s.pending_lp);
  }
  {
    std::lock_guard<std::mutex> lk(j.mu);
    j.completion_tokens = s.n_generated;
    if (!ev.text.empty() || !ev.logprobs.empty()) j.events.push_back(std::move(ev));
  }
  j.cv.notify_all();
  if (stopped) {
    finish(s, Finish::Stop);
    return false;
  }
  if (at_max || ctx_full) {
    finish(s, Finish::Length);
    return false;
  }
  return true;
}

void Scheduler::finish(Slot& s, Finish f, const std::string& error) {
  // The job ends (its handler writes the last bytes to the client) only after the bookkeeping:
  // a client that has read the whole response sees the metrics and the prefix cache that include
  // it (the server tests read /metrics right after a response).
  std::shared_ptr<Job> job = std::move(s.job);
  if (f == Finish::Stop && !s.pending.empty()) {  // end of generation: release what was held back
    std::string rest = s.pending + s.dec->flush();
    std::lock_guard<std::mutex> lk(job->mu);
    job->events.push_back(JobEvent{rest, std::move(s.pending_lp)});
  }
  s.pending.clear();
  s.pending_lp.clear();
  if (f == Finish::Stop || f == Finish::Length) ++metrics_.requests_ok;
  if (f == Finish::Cancelled) ++metrics_.requests_cancelled;
  if (f == Finish::Error) ++metrics_.requests_failed;
  --metrics_.active;
  release();
  s.last_use = ++use_clock_;
  if (!truncatable_ && opt_.prefix_reuse) {
    // File the end of the reply (the next turn of this conversation starts from here), and drop
    // the entries this request's writes made unrestorable. A failed snapshot only costs reuse.
    try {
      if (f != Finish::Error && !s.tokens.empty()) cache_.insert(s.index, s.tokens, s.seq->snapshot(), s.empty->bytes());
    } catch (const std::exception&) {
    }
    cache_.prune(s.index, [&](const SeqSnapshot& x) { return s.seq->restorable(x); });
  }
  update_memory();
  end_job(*job, f, error);
}

void Scheduler::release() {
  std::lock_guard<std::mutex> lk(mu_);
  --holding_;
}

void Scheduler::reset_slot(Slot& s) {
  try {
    if (truncatable_)
      s.seq->truncate(0);
    else
      s.seq->restore(*s.empty);
    s.tokens.clear();
  } catch (const std::exception&) {
    s.seq = model_.new_sequence(opt_.context);  // last resort: a fresh sequence
    s.tokens.clear();
    if (!truncatable_) s.empty = s.seq->snapshot();
  }
}

void Scheduler::update_memory() {
  uint64_t kv = 0;
  for (auto& s : slots_) {
    const MemoryReport m = s->seq->memory();
    kv += m.kv_cache + m.recurrent;
  }
  metrics_.kv_bytes = kv;
  metrics_.snapshot_bytes = cache_.bytes() + (truncatable_ ? 0 : slots_.size() * slots_[0]->empty->bytes());
  metrics_.snapshot_entries = cache_.size();
  metrics_.snapshot_evictions = cache_.evictions();
}

}  // namespace wgllm::server
