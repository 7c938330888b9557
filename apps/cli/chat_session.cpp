// `wgllm chat` loop: input, commands, Ctrl-C (see chat_session.h).
#include "chat_session.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <ostream>
#include <sstream>

#include <fmt/core.h>

#include "tokenizer/tokenizer.h"

namespace wgllm::cli {

namespace {

std::atomic<bool> g_sigint{false};
std::atomic<int> g_wake_fd{-1};
static_assert(std::atomic<bool>::is_always_lock_free && std::atomic<int>::is_always_lock_free,
              "the SIGINT handler needs lock-free atomics");

extern "C" void on_sigint(int) {
  const int saved = errno;
  g_sigint.store(true);
  if (const int fd = g_wake_fd.load(); fd >= 0) {
    const char c = 1;
    [[maybe_unused]] const ssize_t n = ::write(fd, &c, 1);  // non-blocking: a full pipe already wakes
  }
  errno = saved;
}

bool blank(const std::string& s) { return s.find_first_not_of(" \t\r\f\v") == std::string::npos; }

std::string rtrim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.pop_back();
  return s;
}

/// Error texts as one line (some carry newlines, e.g. from a parser).
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

constexpr const char* kHelp =
    "commands: /regen | /undo | /edit N [TEXT] | /new | /save FILE | /load FILE | /history | /stats | /help | /quit\n"
    "a line that is \"\"\" starts a multi-line message, ended by another \"\"\" line; empty lines do nothing\n"
    "Ctrl-C stops a reply (the partial reply is kept); at the prompt, Ctrl-C twice or Ctrl-D quits\n";

}  // namespace

// --- SigintCatcher ---

SigintCatcher::SigintCatcher() {
  if (::pipe(pipe_) != 0) throw Error(std::string("chat: cannot create a pipe for Ctrl-C: ") + std::strerror(errno));
  // With standard input/output/error closed, pipe() reuses fds 0..2 and the chat would read its
  // own wake-up pipe as input (and hang): keep the pipe above them.
  for (int& fd : pipe_)
    if (fd <= 2) {
      const int moved = ::fcntl(fd, F_DUPFD, 3);
      if (moved < 0) throw Error(std::string("chat: cannot move the Ctrl-C pipe: ") + std::strerror(errno));
      ::close(fd);
      fd = moved;
    }
  for (int fd : pipe_) {
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  }
  g_sigint.store(false);
  g_wake_fd.store(pipe_[1]);
  struct ::sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // writes and reads restart; poll() in FdLineSource still wakes (EINTR)
  if (::sigaction(SIGINT, &sa, &old_) != 0) {
    g_wake_fd.store(-1);
    ::close(pipe_[0]);
    ::close(pipe_[1]);
    throw Error(std::string("chat: cannot install the Ctrl-C handler: ") + std::strerror(errno));
  }
}

SigintCatcher::~SigintCatcher() {
  ::sigaction(SIGINT, &old_, nullptr);
  g_wake_fd.store(-1);
  ::close(pipe_[0]);
  ::close(pipe_[1]);
}

bool SigintCatcher::take() { return g_sigint.exchange(false); }

// --- FdLineSource ---

Input FdLineSource::read_line(std::string& line) {
  while (true) {
    if (const size_t nl = buf_.find('\n'); nl != std::string::npos) {
      line.assign(buf_, 0, nl);
      buf_.erase(0, nl + 1);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      return Input::Line;
    }
    if (eof_) {
      if (buf_.empty()) return Input::Eof;
      line = std::move(buf_);  // a last line without "\n"
      buf_.clear();
      if (!line.empty() && line.back() == '\r') line.pop_back();
      return Input::Line;
    }
    if (sigint_ && SigintCatcher::take()) return Input::Interrupted;
    // Wait for input or a Ctrl-C (the self-pipe closes the race between take() and poll()).
    pollfd fds[2] = {{fd_, POLLIN, 0}, {sigint_ ? sigint_->wake_fd() : -1, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      throw Error(std::string("reading input: ") + std::strerror(errno));
    }
    if (fds[1].revents & POLLIN) {
      char drain[64];
      while (::read(fds[1].fd, drain, sizeof drain) > 0) {
      }
    }
    if (fds[0].revents & POLLNVAL) {
      eof_ = true;  // the descriptor is closed: no more input
    } else if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
      char tmp[4096];
      const ssize_t n = ::read(fd_, tmp, sizeof tmp);
      if (n < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        throw Error(std::string("reading input: ") + std::strerror(errno));
      }
      if (n == 0) eof_ = true;
      else buf_.append(tmp, size_t(n));
    }
  }
}

// --- ChatLoop ---

ChatLoop::ChatLoop(Session& session, const Tokenizer& tok, GenerateOptions gen, std::string backend, std::ostream& out,
                   std::ostream& log, std::function<bool()> interrupted)
    : s_(session), tok_(tok), gen_(std::move(gen)), backend_(std::move(backend)), out_(out), log_(log),
      interrupted_(std::move(interrupted)) {}

Input ChatLoop::read_message(LineSource& in, std::string& text, const char* prompt, bool* block) {
  text.clear();
  if (block) *block = false;
  std::string line;
  out_ << prompt << std::flush;
  while (true) {
    const Input r = in.read_line(line);
    if (r != Input::Line) return r;
    if (rtrim(line) == "\"\"\"") break;  // a block
    if (!blank(line)) {
      text = std::move(line);
      return Input::Line;
    }
    out_ << "> " << std::flush;  // an empty line does nothing
  }
  std::vector<std::string> lines;
  while (true) {
    out_ << "... " << std::flush;
    const Input r = in.read_line(line);
    if (r == Input::Interrupted) {
      log_ << "\n(the unfinished \"\"\" block was dropped)\n" << std::flush;
      return r;
    }
    if (r == Input::Eof) {
      log_ << "\n(end of input inside a \"\"\" block: the block was not sent)\n" << std::flush;
      return r;
    }
    if (rtrim(line) == "\"\"\"") break;
    lines.push_back(std::move(line));
  }
  for (size_t i = 0; i < lines.size(); ++i) text += (i ? "\n" : "") + lines[i];
  if (blank(text)) return read_message(in, text, "> ", block);  // an empty block does nothing either
  if (block) *block = true;
  return Input::Line;
}

int ChatLoop::run(LineSource& in) {
  bool armed = false;  // the last input was a Ctrl-C at the prompt
  quit_ = false;
  while (!quit_) {
    std::string msg;
    bool block = false;
    Input r;
    try {
      r = read_message(in, msg, "\n> ", &block);
    } catch (const std::exception& e) {
      log_ << "error: " << one_line(e.what()) << "\n" << std::flush;
      return 1;  // the input itself failed: nothing more can be read
    }
    if (r == Input::Eof) {
      out_ << std::endl;
      break;
    }
    if (r == Input::Interrupted) {
      if (armed) {
        out_ << std::endl;
        break;
      }
      armed = true;
      log_ << "\n(Ctrl-C again or Ctrl-D to quit; /help for commands)\n" << std::flush;
      continue;
    }
    armed = false;
    if (!handle(msg, in, block)) break;
  }
  return 0;
}

void ChatLoop::turn(const std::function<TurnResult(const TokenCallback&)>& run) {
  StreamDecoder dec(tok_, true);
  TurnResult r;
  try {
    r = run([&](int32_t t) {
      out_ << dec.push(t) << std::flush;
      return !(interrupted_ && interrupted_());
    });
  } catch (...) {
    out_ << dec.flush() << std::endl;  // end the partial line before the error
    throw;
  }
  out_ << dec.flush() << std::endl;
  if (r.stopped) log_ << "(stopped: the partial reply is kept; /regen for a new reply, /undo to drop the turn)\n";
  log_ << fmt::format("[{}] prompt +{} tokens ({} reused), TTFT {:.1f} ms | generated {} tokens, decode {:.2f} tok/s\n", backend_,
                      r.n_new, r.n_reused, r.stats.ttft_ms, r.stats.n_generated, r.stats.decode_tokens_per_s());
  if (r.context_full) log_ << "(the context is full: the reply stopped there; /undo, /edit or /new to continue)\n";
  log_ << std::flush;
}

bool ChatLoop::handle(const std::string& message, LineSource& in, bool block) {
  try {
    if (block || message.empty() || message[0] != '/') {
      turn([&](const TokenCallback& cb) { return s_.send(message, gen_, cb); });
    } else {
      std::istringstream line(message);
      std::string cmd, arg;
      line >> cmd;
      std::getline(line >> std::ws, arg);
      command(cmd, rtrim(arg), in);
    }
  } catch (const ContextFull& e) {
    log_ << "refused: " << one_line(e.what()) << "\n";
  } catch (const std::exception& e) {
    log_ << "error: " << one_line(e.what()) << "\n";
  } catch (...) {
    log_ << "error: unknown exception\n";
  }
  log_ << std::flush;
  return !quit_;
}

void ChatLoop::command(const std::string& cmd, const std::string& arg, LineSource& in) {
  if (cmd == "/regen") {
    turn([&](const TokenCallback& cb) { return s_.regenerate(gen_, cb); });
  } else if (cmd == "/undo") {
    s_.undo();
    log_ << fmt::format("removed the last turn; {} turns left\n", s_.n_turns());
  } else if (cmd == "/edit") {
    std::istringstream a(arg);
    size_t n = 0;
    if (s_.n_turns() == 0) throw Error("/edit: there is no message to edit yet");
    if (!(a >> n) || n == 0 || n > s_.n_turns())
      throw Error("/edit N [TEXT]: N is a turn number from 1 to " + std::to_string(s_.n_turns()));
    std::string text;
    std::getline(a >> std::ws, text);
    if (blank(text)) {
      const std::string prompt = "new message " + std::to_string(n) + "> ";
      if (read_message(in, text, prompt.c_str()) != Input::Line) {
        log_ << "\n(edit cancelled)\n";
        return;
      }
    }
    turn([&](const TokenCallback& cb) { return s_.edit(n - 1, text, gen_, cb); });
  } else if (cmd == "/new") {
    s_.rollback(0);
    log_ << "new conversation" << (!s_.messages().empty() ? " (same system message)" : "") << "\n";
  } else if (cmd == "/save") {
    if (arg.empty()) throw Error("/save FILE");
    s_.save(arg);
    log_ << fmt::format("saved {} turns ({} tokens) to {}\n", s_.n_turns(), s_.tokens().size(), arg);
  } else if (cmd == "/load") {
    if (arg.empty()) throw Error("/load FILE");
    s_.load(arg);
    log_ << fmt::format("loaded {} turns ({} tokens) from {}\n", s_.n_turns(), s_.tokens().size(), arg);
  } else if (cmd == "/history") {
    size_t turn = 0;
    for (const ChatMessage& m : s_.messages()) {
      if (m.role == "user") ++turn;
      log_ << fmt::format("{:>3} {:<9} {}\n", m.role == "user" ? std::to_string(turn) : "", m.role, m.content);
    }
  } else if (cmd == "/stats") {
    const SessionStats st = s_.stats();
    log_ << fmt::format("{} tokens of {} | {} snapshots, {} bytes of copies, {} evicted, {} tokens recomputed\n",
                        s_.tokens().size(), s_.context_length(), st.snapshots, st.snapshot_bytes, st.evictions,
                        st.recomputed_tokens);
    int i = 0;
    for (const SnapshotInfo& si : s_.snapshots())
      log_ << fmt::format("  turn {:>3}: {:>6} tokens, copy {} bytes, KV {} bytes (shared){}\n", ++i, si.n_past, si.bytes,
                          si.kv_bytes, si.evicted ? ", evicted" : "");
  } else if (cmd == "/help") {
    log_ << kHelp;
  } else if (cmd == "/quit" || cmd == "/exit") {
    quit_ = true;
  } else {
    log_ << "unknown command " << cmd << "\n" << kHelp;
  }
}

}  // namespace wgllm::cli
