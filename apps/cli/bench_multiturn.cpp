// `wgllm bench multi-turn`: a conversation of equal-sized turns (a user message of --turn-tokens
// tokens, a reply of exactly --reply-tokens tokens, end-of-generation ignored). For every turn it
// measures the time to first token (TTFT) of
//   - the session: only the new tokens are prefilled (the KV cache and snapshots hold the rest);
//   - full recompute: the same prompt tokens prefilled from an empty sequence;
// and checks both give the same first token (greedy). host_ms: the turn's host work outside the
// forwards (template rendering, tokenizing, seek, snapshot bookkeeping), which must stay flat.
// Per turn also the end-of-turn snapshot: snapshot_us (recording its copies), snapshot_done_us
// (until the device finished them; host_ms includes that wait) and snapshot_turn_bytes (bytes
// copied: the recurrent states; 0 for KV-only models). Writes JSON (--json, default stdout); plot
// it with tools/plots/plot_multiturn.py. With --profile, per turn also profile_gpu_us and
// profile_attention_us (GPU time of the turn's prefill forward, all kernels and attention's; see
// below) and the per-kernel table of the last turn. Not a timed test: numbers depend on the machine.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <map>

#include <nlohmann/json.hpp>

#include "bench.h"
#include "bench_multiturn.h"
#include "runtime/session.h"
#include "validate.h"

namespace wgllm::cli {

namespace {

struct MultiTurnOpts {
  CommonOptions common;
  uint32_t turns = 30, turn_tokens = 64, reply_tokens = 16;
  std::string json_path;
  bool session_only = false;  // skip the full-recompute comparison (slow software adapters)
};

/// A user message of exactly n tokens (alone), deterministic per turn.
std::string user_message(const Tokenizer& tok, uint32_t turn, uint32_t n) {
  static const char* words[] = {"river", "mountain", "lantern", "orbit", "violet", "harbor", "engine", "meadow",
                                "signal", "copper", "willow", "canyon", "ember", "glacier", "pixel", "thunder"};
  std::string s = "Question " + std::to_string(turn + 1) + ":";
  for (uint32_t i = 0; tok.encode(s).size() < n; ++i) s += std::string(" ") + words[(turn * 7 + i * 3) % 16];
  while (tok.encode(s).size() > n && s.find(' ') != std::string::npos) s.erase(s.rfind(' '));
  return s;
}

int run_multiturn(const MultiTurnOpts& b) {
  using clk = std::chrono::steady_clock;
  Loaded l = load(b.common);
  if (!l.chat) throw Error("bench multi-turn needs a model with a chat template");
  l.seq.reset();
  SessionOptions so;
  so.context_length = b.common.context;
  so.fingerprint = model_fingerprint(*l.src);
  so.time_snapshot_copies = true;  // snapshot_done_us: each turn waits for its snapshot's copies (the
                                   // next forward would wait for them anyway: same queue)
  Session s(*l.model, *l.tok, l.chat.get(), so);
  auto fresh = l.model->new_sequence(b.common.context);
  GenerateOptions g = b.common.gen;
  g.max_new_tokens = b.reply_tokens;
  g.stop_at_eog = false;
  g.sampler.temperature = 0;  // greedy: the recompute's first token must match

  nlohmann::json turns = nlohmann::json::array();
  uint32_t mismatches = 0, last_new = 0, last_prompt = 0;
  std::vector<int32_t> first_tokens;  // per turn: the session's first reply token
  // Warm-up (pipelines, caches) outside the measurement.
  {
    std::vector<int32_t> w = l.tok->encode("warm up");
    fresh = l.model->new_sequence(b.common.context);  // (truncate() refuses recurrent state)
    w.resize(std::min<size_t>(w.size(), fresh->context_length()));  // (a tiny --context: the first turn reports it)
    if (!w.empty()) l.model->forward_argmax(*fresh, w);
  }
  for (uint32_t t = 0; t < b.turns; ++t) {
    const std::string msg = user_message(*l.tok, t, b.turn_tokens);
    TurnResult r;
    const auto ts0 = clk::now();
    try {
      r = s.send(msg, g);
    } catch (const ContextFull& e) {
      // No turn measured is no result (an empty table with status 0 would read as a success).
      if (t == 0)
        throw Error(fmt::format("bench multi-turn: the first turn does not fit the context of {} tokens ({}); raise --context",
                                s.context_length(), e.what()));
      fmt::print(stderr, "turn {}: {} (stopping; raise --context)\n", t + 1, e.what());
      break;
    }
    // Host work of the turn outside the model's forwards: template rendering, tokenizing the new
    // text, seek, snapshot bookkeeping (send() wall time minus prefill-to-first-token and decode).
    const double send_ms = std::chrono::duration<double, std::milli>(clk::now() - ts0).count();
    const double host_ms = send_ms - r.stats.ttft_ms - r.stats.decode_ms;
    const uint32_t prompt_len = r.n_reused + r.n_new;
    last_new = r.n_new;
    last_prompt = prompt_len;
    const SessionStats st = s.stats();
    first_tokens.push_back(r.reply.empty() ? -1 : r.reply[0]);
    turns.push_back({{"turn", t + 1},
                     {"prompt_tokens", prompt_len},
                     {"new_tokens", r.n_new},
                     {"ttft_session_ms", r.stats.ttft_ms},
                     {"ttft_recompute_ms", 0.0},
                     {"host_ms", host_ms},
                     {"first_token_match", true},
                     {"reply_ids", r.reply},  // greedy: A/B runs of equal-output switches must agree
                     {"snapshot_bytes", st.snapshot_bytes},
                     {"snapshot_us", st.last_snapshot_us},
                     {"snapshot_done_us", st.last_snapshot_done_us},
                     {"snapshot_turn_bytes", st.last_snapshot_turn_bytes},
                     {"kv_bytes_in_use", s.snapshots().empty() ? 0 : s.snapshots().back().kv_bytes}});
    fmt::print(stderr, "turn {:>2}: prompt {:>5} tokens (+{:>3} new) | TTFT session {:>8.1f} ms, host {:>5.2f} ms | "
               "snapshot {:.1f} us (done {:.1f} us), {} B this turn, {} B live\n", t + 1, prompt_len, r.n_new, r.stats.ttft_ms,
               host_ms, st.last_snapshot_us, st.last_snapshot_done_us, st.last_snapshot_turn_bytes, st.snapshot_bytes);
  }
  // The full-recompute arm runs after the whole conversation, not between its turns: interleaved,
  // each recompute (up to a 1,800-token prefill) perturbed the next session turn's timing (H200:
  // turn-30 session TTFT 11.8-13.2 ms interleaved vs 10.9-11.4 ms without the recompute arm).
  if (!b.session_only) {
    for (size_t i = 0; i < turns.size(); ++i) {
      const uint32_t n = turns[i]["prompt_tokens"].get<uint32_t>();
      const std::vector<int32_t> prompt(s.tokens().begin(), s.tokens().begin() + n);
      fresh = l.model->new_sequence(b.common.context);  // (truncate() refuses recurrent state)
      const auto t0 = clk::now();
      const int32_t first = l.model->forward_argmax(*fresh, prompt);
      const double recompute_ms = std::chrono::duration<double, std::milli>(clk::now() - t0).count();
      const bool match = first_tokens[i] >= 0 && first == first_tokens[i];
      mismatches += !match;
      turns[i]["ttft_recompute_ms"] = recompute_ms;
      turns[i]["first_token_match"] = match;
      fmt::print(stderr, "turn {:>2}: recompute {:>5} tokens {:>8.1f} ms{}\n", i + 1, n, recompute_ms,
                 match ? "" : "  FIRST TOKEN DIFFERS");
    }
  }
  // --profile, per turn: GPU time of the turn's prefill forward (its new tokens over the cache of
  // everything before them) and the part of it in attention kernels (labels attention*: the
  // attention op and its split combine), replayed on one fresh sequence: each turn's reply tokens
  // (decoded one by one in the session) go in as one unprofiled forward, then the turn's new tokens
  // as the profiled one. The growth of attention_us over the turns is what the session TTFT gains.
  if (b.common.profile) {
    fresh = l.model->new_sequence(b.common.context);  // (truncate() refuses recurrent state)
    uint32_t done = 0;
    for (size_t i = 0; i < turns.size(); ++i) {
      const uint32_t n = turns[i]["prompt_tokens"].get<uint32_t>(), start = n - turns[i]["new_tokens"].get<uint32_t>();
      if (start > done)
        l.model->forward_argmax(*fresh, std::vector<int32_t>(s.tokens().begin() + done, s.tokens().begin() + start));
      l.model->forward_argmax(*fresh, std::vector<int32_t>(s.tokens().begin() + start, s.tokens().begin() + n));
      done = n;
      double gpu = 0, attn = 0;
      for (const auto& k : l.model->last_profile()) {
        gpu += k.us;
        if (k.label.rfind("attention", 0) == 0) attn += k.us;
      }
      turns[i]["profile_gpu_us"] = gpu;
      turns[i]["profile_attention_us"] = attn;
      fmt::print(stderr, "turn {:>2}: profile: {:>3} new tokens at position {:>5}: GPU {:>9.1f} us, attention {:>9.1f} us ({:.1f}%)\n",
                 i + 1, n - start, start, gpu, attn, gpu > 0 ? 100 * attn / gpu : 0.0);
    }
  }
  // --profile: per-kernel GPU time of one forward of the last turn's new tokens over the cache of
  // everything before them (the recompute sequence cut back), the session's turn-prefill shape.
  nlohmann::json profile = nlohmann::json::object();
  if (b.common.profile && last_new > 0 && last_prompt > last_new) {
    const uint32_t n = last_prompt;
    const std::vector<int32_t> head(s.tokens().begin(), s.tokens().begin() + (n - last_new));
    const std::vector<int32_t> tail(s.tokens().begin() + (n - last_new), s.tokens().begin() + n);
    fresh = l.model->new_sequence(b.common.context);  // (truncate() refuses recurrent state)
    l.model->forward_argmax(*fresh, head);
    l.model->forward_argmax(*fresh, tail);
    KernelTotals by;
    add_kernel_times(by, l.model->last_profile());
    fmt::print(stderr, "profile: forward of {} new tokens at position {}:\n", last_new, n - last_new);
    for (const auto& [name, v] : by) {
      profile[name] = {{"us", v.first}, {"dispatches", v.second}};
      fmt::print(stderr, "  {:<20} x{:<4} {:>10.1f} us\n", name, v.second, v.first);
    }
    profile["new_tokens"] = last_new;
    profile["position"] = n - last_new;
  }
  nlohmann::json j = {{"benchmark", "multi-turn"},
                      {"model", l.src->config.name},
                      {"backend", l.model->backend_name()},
                      {"turn_tokens", b.turn_tokens},
                      {"reply_tokens", b.reply_tokens},
                      {"context", s.context_length()},
                      {"attn_tiled", b.common.switches.kernels.attention_tiled_prefill},
                      {"attn_decode_split", b.common.switches.kernels.attention_decode_split},
                      {"attn_prefill_split", b.common.switches.kernels.attention_prefill_split},
                      {"attn_chunk", b.common.switches.kernels.attention_chunk},
                      {"first_token_mismatches", mismatches},
                      {"turns", turns},
                      {"profile_last_turn_forward", profile}};
  // A compact summary (what `bench ab` reads from the last stdout line, as `bench`'s): the session TTFT
  // of turn 2 and of the last turn, their ratio (issue 11's turn 30 / turn 2), and the medians over
  // turns 2..6 and over the last 5 turns (steadier meters than one turn's single sample). With --json
  // it is printed alone; without, its keys join the document, printed on one line.
  nlohmann::json summary = nlohmann::json::object();
  if (turns.size() >= 2) {
    auto ttft = [&](size_t i) { return turns[i]["ttft_session_ms"].get<double>(); };
    auto median = [&](size_t from, size_t to) {  // turns[from .. to)
      std::vector<double> v;
      for (size_t i = from; i < to; ++i) v.push_back(ttft(i));
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    const size_t n = turns.size();
    summary = {{"ttft_turn2_ms", ttft(1)}, {"ttft_last_ms", ttft(n - 1)}, {"ttft_last_over_turn2", ttft(n - 1) / ttft(1)},
               {"ttft_first5_median_ms", median(1, std::min<size_t>(n, 6))},
               {"ttft_last5_median_ms", median(n > 6 ? n - 5 : 1, n)}};
  }
  if (b.json_path.empty()) {
    j.update(summary);
    std::cout << j.dump() << std::endl;
  } else {
    write_file(b.json_path, j.dump(1) + "\n");
    fmt::print(stderr, "wrote {} (plot: python3 tools/plots/plot_multiturn.py {} out.png)\n", b.json_path, b.json_path);
    std::cout << summary.dump() << std::endl;
  }
  return mismatches ? 3 : 0;
}

}  // namespace

std::function<int()> add_bench_multiturn(CLI::App& app) {
  CLI::App* bench = bench_subcommand(app);
  auto b = std::make_shared<MultiTurnOpts>();
  auto* cmd = bench->add_subcommand("multi-turn", "per-turn TTFT of a multi-turn chat: session (snapshots) vs full recompute");
  add_common(*cmd, b->common);
  cmd->add_option("--turns", b->turns, "number of turns, 1..100000")->transform(integer(1, 100000));
  cmd->add_option("--turn-tokens", b->turn_tokens, "tokens of each user message, 1..16384")->transform(integer(1, 16384));
  cmd->add_option("--reply-tokens", b->reply_tokens, "tokens of each reply (end-of-generation ignored), 1..16384")
      ->transform(integer(1, 16384));
  add_json_option(cmd, b->json_path);
  cmd->add_flag("--session-only", b->session_only, "skip the full-recompute comparison (ttft_recompute_ms = 0)");
  return [=]() -> int { return *cmd ? run_multiturn(*b) : -1; };
}

}  // namespace wgllm::cli
