// Scheduler: N slots (one Sequence each) on one shared Model, advanced by one thread.
//
// HTTP threads submit() a Job (prompt tokens + sampling parameters) and read its events; the
// scheduler thread admits waiting jobs into free slots between steps, then advances every active
// slot by one step: a prompt chunk (at most prefill_chunk tokens) or one decode token.
// Continuous batching: the steps of all active slots are one Model::forward_batch (matmuls over
// the rows of every slot, attention and recurrent state per sequence; models without a batched
// forward run the items in turn, Model::batched_forward()). Jobs join (their prompt chunks ride in
// the same forward as the others' decode tokens; at most prefill_chunk prompt tokens per forward
// over all slots) and leave between steps, so prompts, even several arriving at once, do not hold
// up the other slots' decoding for more than one chunk per step.
//
// Prefix reuse (a client resending the conversation pays only for the new tokens): an idle
// slot keeps the state of its last request. A new job goes to the idle slot that holds the longest
// prefix of its prompt: KV-only sequences cut back to the longest common prefix of the slot's
// tokens (Sequence::truncate); sequences with recurrent state restore the longest snapshot in the
// PrefixCache (taken before each prompt's last token and after each reply) or continue from the live state when the
// slot's tokens are a prefix of the prompt. At least the prompt's last token is always computed.
// States are per slot (snapshots are only restorable on their own sequence), so one
// conversation's state can only reach another request through an exact token-prefix match, where
// the state is by construction the same as recomputing it.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "models/model.h"
#include "runtime/sampler.h"
#include "server/metrics.h"
#include "server/prefix_cache.h"

namespace wgllm {
class Tokenizer;
}

namespace wgllm::server {

struct GenParams {
  uint32_t max_tokens = 256;        // generated tokens at most (also stops at the context's end)
  SamplerConfig sampler;            // temperature, top_k, top_p, min_p, seed (repeat penalty off)
  float presence_penalty = 0.0f;    // OpenAI: logit -= presence * (count > 0) + frequency * count,
  float frequency_penalty = 0.0f;   //   counts over the tokens generated so far
  std::vector<std::string> stop;    // stop strings (not included in the output)
  bool logprobs = false;            // report the chosen token's log-probability
  uint32_t top_logprobs = 0;        // and this many most likely alternatives (0..20)
  bool ignore_eos = false;          // keep going after end-of-generation tokens
};

struct TopLogprob {
  int32_t id = 0;
  std::string token;  // the token's bytes (may be a partial UTF-8 sequence)
  float logprob = 0;
};
struct TokenLogprob {
  int32_t id = 0;
  std::string token;
  float logprob = 0;
  std::vector<TopLogprob> top;
};

/// Output of a job, read by the HTTP thread in order.
struct JobEvent {
  std::string text;                   // new text (may be empty)
  std::vector<TokenLogprob> logprobs; // tokens whose text is released with this event
};

enum class Finish { None, Stop, Length, Cancelled, Error };
const char* finish_name(Finish f);

/// One request's generation, shared by the HTTP thread that waits on it and the scheduler.
struct Job {
  std::vector<int32_t> prompt;
  GenParams params;
  std::chrono::steady_clock::time_point arrival = std::chrono::steady_clock::now();
  std::atomic<bool> cancel{false};  // set by the HTTP side (client gone); the scheduler drops the job

  // Guarded by mu.
  std::mutex mu;
  std::condition_variable cv;
  std::deque<JobEvent> events;
  bool done = false;
  Finish finish = Finish::None;
  std::string error;          // Finish::Error
  uint32_t cached_tokens = 0; // prompt tokens reused from cached state
  uint32_t completion_tokens = 0;
  uint32_t slot = 0;

  /// Waits up to `timeout` for events or the end; moves the events out. Returns done.
  bool wait(std::chrono::milliseconds timeout, std::deque<JobEvent>& out);
};

struct SchedulerOptions {
  uint32_t slots = 1;          // sequences decoded together (--parallel)
  uint32_t max_queue = 64;     // jobs waiting while every slot is taken; more are refused (429)
  uint32_t context = 0;        // tokens per sequence (0: the model's default)
  // Prompt tokens per step, over all slots (decode tokens come on top). 2048 (was 256 until
  // 2026-12-03): on the H200 with 16 clients arriving together, TTFT p99 42-51 ms vs 105-371 ms
  // (SmolLM2 shape) and 163-164 vs 239-374 ms (Qwen2.5-1.5B shape); at 64 clients aggregate decode
  // +38% / +8%, ITL p99 46-63 vs 288-289 ms (SmolLM2) and 143-153 vs 274-283 ms (Qwen2.5); the cost:
  // TTFT p50 on Qwen2.5-1.5B at 16 / 64 clients 126 / 313 ms vs 64 / 126
  // (bench/results/2026-12-03-h200-serve-peers/, raw/prefill_chunk).
  uint32_t prefill_chunk = 2048;
  uint64_t snapshot_cap_bytes = 1ull << 30;  // PrefixCache caps
  uint32_t snapshot_cap_count = 256;
  bool prefix_reuse = true;    // off: every request starts from the empty state (for tests)
  bool batch = true;           // off: one forward per slot and step, in turn (--no-batch, for comparisons)
};

class Scheduler {
 public:
  Scheduler(Model& model, const Tokenizer& tok, const SchedulerOptions& opt, Metrics& metrics);
  ~Scheduler();  // stop()s
  /// Queues a job; false when the queue is full (the caller answers 429) or the scheduler stopped.
  bool submit(const std::shared_ptr<Job>& job);
  /// Cancels every queued and active job (each ends with Finish::Cancelled) and joins the thread.
  void stop();
  uint32_t context_length() const { return ctx_len_; }

 private:
  struct Slot;
  void run();
  void admit();
  void start(Slot& s, std::shared_ptr<Job> job);
  /// One forward for every active slot's step (plan(), Model::forward_batch, after()).
  void step_all();
  /// Slot s's input for this step (a prompt chunk of at most `budget` tokens, taken from it, or
  /// its last sampled token) and what it needs back; false when the slot has no step (finished at
  /// the context's end, or no prompt rows left in this step's budget).
  bool plan(Slot& s, BatchItem& it, uint32_t& budget);
  /// Slot s after the forward of its item: token bookkeeping, prefix-cache snapshot, sampling,
  /// latency metrics, emit().
  void after(Slot& s, const BatchItem& it);
  /// Samples the next token from `logits` for slot s (penalties, sampler, logprobs).
  int32_t pick(Slot& s, std::vector<float>& logits, TokenLogprob* lp);
  /// Handles a sampled token: stop checks, text, events. Returns false when the job is finished.
  bool emit(Slot& s, int32_t tok, TokenLogprob* lp);
  void finish(Slot& s, Finish f, const std::string& error = {});
  void reset_slot(Slot& s);
  /// A job taken from the queue no longer holds a slot.
  void release();
  void update_memory();
  bool can_truncate() const { return truncatable_; }

  Model& model_;
  const Tokenizer& tok_;
  SchedulerOptions opt_;
  Metrics& metrics_;
  uint32_t ctx_len_ = 0;
  bool truncatable_ = true;
  std::vector<std::unique_ptr<Slot>> slots_;
  PrefixCache cache_;
  uint64_t use_clock_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  size_t holding_ = 0;  // jobs taken from the queue that hold (or are about to hold) a slot
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace wgllm::server
