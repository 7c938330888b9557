// `wgllm chat`: the interactive loop over a Session (src/runtime/session.h), split so that its
// logic (input reading with """ blocks, commands, Ctrl-C) is testable without a process: the loop
// reads from a LineSource and writes to two streams; main.cpp wires it to stdin, stdout, stderr
// and SIGINT. Native only (POSIX poll/pipe/sigaction).
//
// Input. One line is one message; an empty (or blank) line does nothing. Lines between two lines
// that are exactly `"""` form one message (joined with "\n", blank lines kept): the way to send
// text with line breaks, or text starting with "/". Other lines starting with "/" are commands:
//   /regen          generate the last reply again (fresh random draw when sampling)
//   /undo           remove the last turn (user message and reply)
//   /edit N [TEXT]  replace user message N (1-based) with TEXT (or the next message) and continue
//   /new            start the conversation over (the system message is kept)
//   /save FILE      write the session (tokens, KV cache, states, snapshots) to FILE
//   /load FILE      replace the conversation with FILE's (checked in full first; on any error the
//                   conversation is unchanged)
//   /history  /stats  /help  /quit
// Any error in a command or turn is reported as one line on the log stream; the chat goes on with
// the conversation as it was.
// Ctrl-C. During a reply: stops it at the next token (a long prompt's prefill finishes first);
// the partial reply is kept as the turn's reply (/regen for a new one, /undo to drop the turn). At the prompt: the first press says how to quit (and drops an
// unfinished """ block), a second press in a row quits. End of input (Ctrl-D) quits.
#pragma once
#include <signal.h>

#include <functional>
#include <iosfwd>
#include <string>

#include "runtime/session.h"

namespace wgllm {
class Tokenizer;
}

namespace wgllm::cli {

/// What reading the user's input produced.
enum class Input { Line, Interrupted, Eof };

/// The user's input, one line at a time.
class LineSource {
 public:
  virtual ~LineSource() = default;
  /// The next line without its end ("\n" or "\r\n"); Input::Interrupted for a Ctrl-C while waiting;
  /// Input::Eof at the end of input.
  virtual Input read_line(std::string& line) = 0;
};

/// While alive, SIGINT (Ctrl-C) raises a flag instead of ending the process (SA_RESTART, so
/// blocking writes are not cut short) and wakes FdLineSource through a self-pipe. One at a time;
/// the destructor restores the previous handler.
class SigintCatcher {
 public:
  SigintCatcher();
  ~SigintCatcher();
  SigintCatcher(const SigintCatcher&) = delete;
  SigintCatcher& operator=(const SigintCatcher&) = delete;
  /// True if SIGINT arrived since the last call (clears the flag). Async-signal-safe state.
  static bool take();
  /// Read end of the self-pipe (readable after a SIGINT).
  int wake_fd() const { return pipe_[0]; }

 private:
  int pipe_[2] = {-1, -1};
  struct ::sigaction old_ {};
};

/// Lines from a file descriptor (stdin) with poll(2) + read(2): a Ctrl-C while waiting returns
/// Input::Interrupted (a plain blocking read would be restarted and wait for Enter). Bytes already
/// read stay buffered across interrupts. Throws wgllm::Error on a read error other than EINTR.
class FdLineSource final : public LineSource {
 public:
  /// `sigint` may be null (no Ctrl-C handling); it must outlive this object.
  FdLineSource(int fd, const SigintCatcher* sigint) : fd_(fd), sigint_(sigint) {}
  Input read_line(std::string& line) override;

 private:
  int fd_;
  const SigintCatcher* sigint_;
  std::string buf_;
  bool eof_ = false;
};

class ChatLoop {
 public:
  /// `session`, `tok`, the streams and `in` of run() must outlive the loop. `out` receives the
  /// prompts and the streamed replies; `log` the notes, statistics and errors. `interrupted` is
  /// polled once per generated token: true stops the reply (Ctrl-C; SigintCatcher::take).
  ChatLoop(Session& session, const Tokenizer& tok, GenerateOptions gen, std::string backend, std::ostream& out,
           std::ostream& log, std::function<bool()> interrupted);
  /// Reads and handles messages until end of input, /quit, or two Ctrl-C in a row at the prompt.
  /// Returns the exit code (0).
  int run(LineSource& in);
  /// Handles one message: a /command or a user message (a turn; always when `block`, the text of a
  /// """ block). Every error is reported as one line on `log`. Returns false for /quit. `in`
  /// supplies the text of `/edit N` without TEXT.
  bool handle(const std::string& message, LineSource& in, bool block = false);
  /// Reads one message (see the header comment): prints `prompt` before the first line and "> "
  /// before each line after an empty one, "... " inside a block; `*block` (if given) tells whether
  /// the message was a block. Input::Interrupted drops an unfinished block; so does the end of
  /// input (with a note on `log`).
  Input read_message(LineSource& in, std::string& text, const char* prompt, bool* block = nullptr);

 private:
  void turn(const std::function<TurnResult(const TokenCallback&)>& run);
  void command(const std::string& cmd, const std::string& arg, LineSource& in);

  Session& s_;
  const Tokenizer& tok_;
  GenerateOptions gen_;
  std::string backend_;
  std::ostream& out_;
  std::ostream& log_;
  std::function<bool()> interrupted_;
  bool quit_ = false;
};

}  // namespace wgllm::cli
