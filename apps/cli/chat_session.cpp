// `wgllm chat`: interactive multi-turn chat over a Session (src/runtime/session.h), with
// commands for rollback, branching and persistence:
//   /regen          generate the last reply again (same prompt; differs only when sampling)
//   /undo           remove the last turn (user message and reply)
//   /edit N [TEXT]  replace user message N (1-based; TEXT or the next line) and continue from there
//   /save FILE      write the session (tokens, KV cache, states, snapshots) to FILE
//   /load FILE      replace the session with FILE (same model; clear error otherwise)
//   /history        list the turns;  /stats  snapshot memory;  /help
// Context full: a turn that does not fit is refused with a message (nothing changes); /undo or
// /edit free room. A reply that reaches the end of the context stops there with a note.
#include <fmt/core.h>

#include <iostream>
#include <sstream>

#include "chat_session.h"
#include "runtime/session.h"

namespace wgllm::cli {

namespace {

void print_turn_stats(const Loaded& l, const TurnResult& r) {
  fmt::print(stderr, "\n[{}] prompt +{} tokens ({} reused), TTFT {:.1f} ms | generated {} tokens, decode {:.2f} tok/s\n",
             l.model->backend_name(), r.n_new, r.n_reused, r.stats.ttft_ms, r.stats.n_generated,
             r.stats.decode_tokens_per_s());
  if (r.context_full)
    fmt::print(stderr, "(the context is full: the reply stopped there; /undo or /edit to continue)\n");
}

void help() {
  fmt::print(stderr,
             "commands: /regen | /undo | /edit N [TEXT] | /save FILE | /load FILE | /history | /stats | /help\n"
             "an empty line or Ctrl-D quits\n");
}

}  // namespace

int run_chat(const CommonOptions& o, const std::string& system) {
  Loaded l = load(o);
  if (!l.chat) throw Error("this model has no chat template; use `wgllm run --raw`");
  l.seq.reset();  // the session owns its own sequence
  SessionOptions so;
  so.context_length = o.context;
  so.fingerprint = model_fingerprint(*l.src);
  Session s(*l.model, *l.tok, l.chat.get(), so);
  s.set_system(system);
  fmt::print(stderr, "wgllm chat on {} ({}), context {} tokens. /help for commands; empty line or Ctrl-D to quit.\n",
             l.src->config.name, l.model->backend_name(), s.context_length());
  auto stream = [&](auto&& turn) {
    StreamDecoder dec(*l.tok, true);
    TurnResult r = turn([&](int32_t t) {
      std::cout << dec.push(t) << std::flush;
      return true;
    });
    std::cout << dec.flush() << std::endl;
    print_turn_stats(l, r);
  };
  std::string line;
  while (true) {
    std::cout << "\n> " << std::flush;
    if (!std::getline(std::cin, line) || line.empty()) break;
    try {
      if (line[0] != '/') {
        stream([&](const TokenCallback& cb) { return s.send(line, o.gen, cb); });
        continue;
      }
      std::istringstream in(line);
      std::string cmd, arg;
      in >> cmd;
      std::getline(in >> std::ws, arg);
      if (cmd == "/regen") {
        stream([&](const TokenCallback& cb) { return s.regenerate(o.gen, cb); });
      } else if (cmd == "/undo") {
        s.undo();
        fmt::print(stderr, "removed the last turn; {} turns left\n", s.n_turns());
      } else if (cmd == "/edit") {
        std::istringstream a(arg);
        size_t n = 0;
        if (!(a >> n) || n == 0 || n > s.n_turns())
          throw Error("/edit N [TEXT]: N is a turn number from 1 to " + std::to_string(s.n_turns()));
        std::string text;
        std::getline(a >> std::ws, text);
        if (text.empty()) {
          std::cout << "new message " << n << "> " << std::flush;
          if (!std::getline(std::cin, text) || text.empty()) continue;
        }
        stream([&](const TokenCallback& cb) { return s.edit(n - 1, text, o.gen, cb); });
      } else if (cmd == "/save") {
        if (arg.empty()) throw Error("/save FILE");
        s.save(arg);
        fmt::print(stderr, "saved {} turns ({} tokens) to {}\n", s.n_turns(), s.tokens().size(), arg);
      } else if (cmd == "/load") {
        if (arg.empty()) throw Error("/load FILE");
        s.load(arg);
        fmt::print(stderr, "loaded {} turns ({} tokens) from {}\n", s.n_turns(), s.tokens().size(), arg);
      } else if (cmd == "/history") {
        size_t turn = 0;
        for (const ChatMessage& m : s.messages()) {
          if (m.role == "user") ++turn;
          fmt::print(stderr, "{:>3} {:<9} {}\n", m.role == "user" ? std::to_string(turn) : "", m.role, m.content);
        }
      } else if (cmd == "/stats") {
        const SessionStats st = s.stats();
        fmt::print(stderr, "{} tokens of {} | {} snapshots, {} bytes of copies, {} evicted, {} tokens recomputed\n",
                   s.tokens().size(), s.context_length(), st.snapshots, st.snapshot_bytes, st.evictions, st.recomputed_tokens);
        int i = 0;
        for (const SnapshotInfo& si : s.snapshots())
          fmt::print(stderr, "  turn {:>3}: {:>6} tokens, copy {} bytes, KV {} bytes (shared){}\n", ++i, si.n_past, si.bytes,
                     si.kv_bytes, si.evicted ? ", evicted" : "");
      } else if (cmd == "/help") {
        help();
      } else {
        fmt::print(stderr, "unknown command {}\n", cmd);
        help();
      }
    } catch (const ContextFull& e) {
      fmt::print(stderr, "refused: {}\n", e.what());
    } catch (const Error& e) {
      fmt::print(stderr, "error: {}\n", e.what());
    }
  }
  return 0;
}

}  // namespace wgllm::cli
