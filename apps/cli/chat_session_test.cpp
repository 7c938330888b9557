// `wgllm chat` (apps/cli/chat_session.h). The loop's logic on scripted input with the tiny random
// LFM2 fixture on the CPU reference backend: empty lines do nothing, """ blocks are one message,
// a Ctrl-C mid-reply stops it and keeps the turn, Ctrl-C twice at the prompt quits, /new keeps the
// system message, every failing command is one error line and the chat goes on, /load of a
// directory or of a bad file leaves the conversation as it was, /regen draws a fresh reply when
// sampling and the same seed replays the same transcript. Then the binary itself: scripted stdin
// through a pipe, and SIGINT in the middle of a reply (the session continues, EOF exits with 0).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <thread>

#include "chat_session.h"
#include "models/model.h"
#include "models/source.h"
#include "tokenizer/tokenizer.h"

using namespace wgllm;
using namespace wgllm::cli;
using nlohmann::json;

namespace {

// WGLLM_SOURCE_DIR / WGLLM_BIN in the environment override the build-time paths (e.g. to run the
// binary tests against another build).
std::string env_or(const char* name, const char* def) {
  const char* v = std::getenv(name);
  return v && *v ? v : def;
}
const std::string kSrc = env_or("WGLLM_SOURCE_DIR", WGLLM_SOURCE_DIR);
const std::string kBin = env_or("WGLLM_BIN", WGLLM_BIN);
const std::string kTiny = kSrc + "/tests/fixtures/lfm2_tiny/hf";

struct Fixture {
  std::unique_ptr<ModelSource> src = ModelSource::open(kTiny);
  std::unique_ptr<Tokenizer> tok = Tokenizer::from_hf_json(*src->hf->tokenizer_json_path());
  ChatTemplate tmpl{[] {
    std::ifstream in(kTiny + "/tokenizer_config.json");
    return json::parse(in)["chat_template"].get<std::string>();
  }()};
  std::unique_ptr<Model> model = [this] {
    ModelOptions mo;
    mo.backend = BackendKind::CPU;
    mo.context_length = 512;
    return create_model(*src, mo);
  }();
};

Fixture& fx() {
  static Fixture f;
  return f;
}

/// Scripted input: lines, std::nullopt for a Ctrl-C while waiting, then end of input.
class Script final : public LineSource {
 public:
  Script(std::initializer_list<std::optional<std::string>> ev) : ev_(ev) {}
  Input read_line(std::string& line) override {
    if (ev_.empty()) return Input::Eof;
    auto e = ev_.front();
    ev_.pop_front();
    if (!e) return Input::Interrupted;
    line = *e;
    return Input::Line;
  }
  size_t left() const { return ev_.size(); }

 private:
  std::deque<std::optional<std::string>> ev_;
};

GenerateOptions gen(uint32_t n, float temp = 0, uint64_t seed = 0) {
  GenerateOptions g;
  g.max_new_tokens = n;
  g.stop_at_eog = false;  // random tiny model: fixed reply lengths
  g.sampler.temperature = temp;
  g.sampler.seed = seed;
  return g;
}

struct Chat {
  Session s;
  std::ostringstream out, log;
  int polls = 0;
  int stop_at = -1;  // the token poll that reports a Ctrl-C (-1: never)
  ChatLoop loop;
  explicit Chat(GenerateOptions g = gen(4), const std::string& system = "")
      : s(*fx().model, *fx().tok, &fx().tmpl, SessionOptions{}),
        loop(s, *fx().tok, g, "cpu", out, log, [this] { return ++polls == stop_at; }) {
    s.set_system(system);
  }
  int run(Script in) { return loop.run(in); }
  size_t lines_with(const std::string& needle) const {
    std::istringstream in(log.str());
    size_t n = 0;
    for (std::string l; std::getline(in, l);) n += l.find(needle) != std::string::npos;
    return n;
  }
};

std::string tmp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("wgllm_chat_" + std::to_string(getpid()) + "_" + name)).string();
}

}  // namespace

TEST(ChatLoop, EmptyLinesDoNothingAndBlocksAreOneMessage) {
  Chat c;
  EXPECT_EQ(c.run({"", "   ", "hello", "", "\"\"\"", "line one", "", "/not a command", "\"\"\"", "", "bye"}), 0);
  ASSERT_EQ(c.s.n_turns(), 3u);
  EXPECT_EQ(c.s.messages()[0].content, "hello");
  EXPECT_EQ(c.s.messages()[2].content, "line one\n\n/not a command");  // blank line kept, no command
  EXPECT_EQ(c.s.messages()[4].content, "bye");
  EXPECT_EQ(c.lines_with("error"), 0u) << c.log.str();
}

TEST(ChatLoop, UnfinishedBlockIsDroppedNotSent) {
  Chat c;
  EXPECT_EQ(c.run({"\"\"\"", "half a message", std::nullopt, "hi", "\"\"\"", "never closed"}), 0);
  EXPECT_EQ(c.s.n_turns(), 1u);  // only "hi"
  EXPECT_EQ(c.s.messages()[0].content, "hi");
  EXPECT_EQ(c.lines_with("dropped"), 1u);
  EXPECT_EQ(c.lines_with("not sent"), 1u);
}

TEST(ChatLoop, CtrlCStopsTheReplyKeepsTheTurnAndTheChatGoesOn) {
  Chat c(gen(50));
  c.stop_at = 3;  // a Ctrl-C arrives while the 3rd token is streamed
  Script in{"hello", "/history", "more"};
  EXPECT_EQ(c.loop.run(in), 0);
  ASSERT_EQ(c.s.n_turns(), 2u);
  const auto& m = c.s.messages();
  EXPECT_EQ(c.lines_with("(stopped"), 1u) << c.log.str();
  // The partial reply (3 tokens) is the first turn's reply; the next message ran in full.
  Session ref(*fx().model, *fx().tok, &fx().tmpl);
  EXPECT_EQ(ref.send("hello", gen(3)).text, m[1].content);
  EXPECT_EQ(m[2].content, "more");
  EXPECT_EQ(c.lines_with("generated 50 tokens"), 1u);
}

TEST(ChatLoop, CtrlCTwiceAtThePromptQuitsOnceDoesNot) {
  Chat c;
  Script in{std::nullopt, "hi", std::nullopt, std::nullopt, "never read"};
  EXPECT_EQ(c.loop.run(in), 0);
  EXPECT_EQ(c.s.n_turns(), 1u);
  EXPECT_EQ(in.left(), 1u);
  EXPECT_EQ(c.lines_with("Ctrl-C again"), 2u);
}

TEST(ChatLoop, NewKeepsTheSystemMessageQuitEnds) {
  Chat c(gen(3), "You are terse.");
  Script in{"hi", "again", "/new", "hi", "/quit", "never read"};
  EXPECT_EQ(c.loop.run(in), 0);
  EXPECT_EQ(in.left(), 1u);
  ASSERT_EQ(c.s.n_turns(), 1u);
  ASSERT_EQ(c.s.messages().size(), 3u);
  EXPECT_EQ(c.s.messages()[0].role, "system");
  EXPECT_EQ(c.s.messages()[0].content, "You are terse.");
  EXPECT_EQ(c.s.messages()[1].content, "hi");
}

TEST(ChatLoop, EveryFailingCommandIsOneErrorLineAndTheChatGoesOn) {
  Chat c;
  const std::string dir = std::filesystem::temp_directory_path().string();
  EXPECT_EQ(c.run({"/regen", "/undo", "/edit 1 x", "hi", "/edit 7 x", "/edit one", "/save", "/load",
                   "/save /nonexistent-dir/x.wgs", "/load " + dir, "/load /nonexistent-file", "/frobnicate", "again"}),
            0);
  EXPECT_EQ(c.lines_with("error: "), 10u) << c.log.str();
  EXPECT_EQ(c.lines_with("unknown command /frobnicate"), 1u);
  EXPECT_EQ(c.lines_with("is a directory"), 1u) << c.log.str();
  EXPECT_EQ(c.s.n_turns(), 2u);
  EXPECT_EQ(c.s.messages()[2].content, "again");
}

TEST(ChatLoop, TemplateRefusalIsNamedAndTheConversationKept) {
  // A template's raise_exception (as real templates do for roles they do not support) is one error line
  // naming the template, and the refused message leaves the conversation as it was.
  ChatTemplate refusing{
      "{% for m in messages %}{% if m.content == 'no' %}{{ raise_exception('no thanks') }}{% endif %}"
      "{% if m.content == 'boom' %}{{ 1 / 0 }}{% endif %}"
      "<{{ m.role }}>{{ m.content }}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}"};
  Session s(*fx().model, *fx().tok, &refusing, SessionOptions{});
  std::ostringstream out, log;
  ChatLoop loop(s, *fx().tok, gen(2), "cpu", out, log, [] { return false; });
  Script in{"hi", "no", "boom", "again"};
  EXPECT_EQ(loop.run(in), 0);
  EXPECT_NE(log.str().find("error: the chat template refused the conversation: no thanks"), std::string::npos) << log.str();
  // A template that fails (not a refusal) is reported as its error, not as a refusal.
  EXPECT_NE(log.str().find("error: chat template error at"), std::string::npos) << log.str();
  EXPECT_EQ(log.str().find("refused the conversation: chat template error"), std::string::npos) << log.str();
  ASSERT_EQ(s.n_turns(), 2u);
  EXPECT_EQ(s.messages()[0].content, "hi");
  EXPECT_EQ(s.messages()[2].content, "again");
}

TEST(ChatLoop, EditWithoutTextReadsTheNextMessage) {
  Chat c;
  EXPECT_EQ(c.run({"one", "two", "/edit 1", "\"\"\"", "first,", "edited", "\"\"\""}), 0);
  ASSERT_EQ(c.s.n_turns(), 1u);
  EXPECT_EQ(c.s.messages()[0].content, "first,\nedited");
}

TEST(ChatLoop, RegenDrawsAFreshReplyAndTheSeedReplaysTheTranscript) {
  // `wgllm chat -n 8 --temp 1.5`: a message, then /regen twice.
  auto transcript = [](uint64_t seed) {
    Chat c(gen(8, 1.5f, seed));
    std::vector<std::string> replies;
    Script in{"hello"};
    c.loop.run(in);
    replies.push_back(c.s.messages().back().content);
    for (int i = 0; i < 2; ++i) {
      c.loop.handle("/regen", in);
      replies.push_back(c.s.messages().back().content);
    }
    c.loop.handle("and then?", in);
    replies.push_back(c.s.messages().back().content);
    return std::make_pair(replies, c.out.str());
  };
  const auto [a, out_a] = transcript(7);
  EXPECT_NE(a[0], a[1]);
  EXPECT_NE(a[1], a[2]);
  EXPECT_NE(a[0], a[2]);
  const auto [b, out_b] = transcript(7);
  EXPECT_EQ(a, b) << "the same seed and inputs must give the same transcript";
  EXPECT_EQ(out_a, out_b);
  EXPECT_NE(transcript(8).first, a);
}

TEST(ChatLoop, FailedLoadLeavesTheConversation) {
  Chat c;
  const std::string path = tmp_path("conv.wgs");
  c.run({"hello", "/save " + path, "more"});
  ASSERT_EQ(c.s.n_turns(), 2u);
  const auto msgs = c.s.messages();
  const auto toks = c.s.tokens();
  {  // a file that is not a session
    std::ofstream(path + ".bad") << "not a session";
  }
  Script in{"/load " + path + ".bad", "/load " + std::filesystem::temp_directory_path().string()};
  c.loop.run(in);
  EXPECT_EQ(c.lines_with("error: "), 2u) << c.log.str();
  EXPECT_EQ(c.s.messages().size(), msgs.size());
  EXPECT_EQ(c.s.tokens(), toks);
  // The good file still loads (one turn), and the chat continues from it.
  Script in2{"/load " + path, "next"};
  c.loop.run(in2);
  ASSERT_EQ(c.s.n_turns(), 2u);
  EXPECT_EQ(c.s.messages()[1].content, msgs[1].content);
  EXPECT_EQ(c.s.messages()[2].content, "next");
  std::filesystem::remove(path);
  std::filesystem::remove(path + ".bad");
}

TEST(FdLineSource, LinesInterruptsAndEndOfInput) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  SigintCatcher sigint;
  FdLineSource in(fds[0], &sigint);
  const std::string a = "one\r\ntw", b = "o\nthree";
  ASSERT_EQ(write(fds[1], a.data(), a.size()), ssize_t(a.size()));
  std::string line;
  ASSERT_EQ(in.read_line(line), Input::Line);
  EXPECT_EQ(line, "one");
  // Blocked in poll() with half a line buffered: a SIGINT from another thread wakes it.
  std::thread t([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    kill(getpid(), SIGINT);
  });
  EXPECT_EQ(in.read_line(line), Input::Interrupted);
  t.join();
  ASSERT_EQ(write(fds[1], b.data(), b.size()), ssize_t(b.size()));
  close(fds[1]);
  ASSERT_EQ(in.read_line(line), Input::Line);
  EXPECT_EQ(line, "two");  // nothing read before the interrupt was lost
  ASSERT_EQ(in.read_line(line), Input::Line);
  EXPECT_EQ(line, "three");  // a last line without "\n"
  EXPECT_EQ(in.read_line(line), Input::Eof);
  close(fds[0]);
}

// --- the binary ---

namespace {

/// `wgllm` with piped stdin and stdout+stderr merged into one pipe.
class Proc {
 public:
  explicit Proc(const std::vector<std::string>& args) {
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0) throw std::runtime_error("pipe");
    pid_ = fork();
    if (pid_ == 0) {
      dup2(in[0], 0);
      dup2(out[1], 1);
      dup2(out[1], 2);
      for (int fd : {in[0], in[1], out[0], out[1]}) close(fd);
      std::vector<char*> argv;
      argv.push_back(const_cast<char*>(kBin.c_str()));
      for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(kBin.c_str(), argv.data());
      _exit(127);
    }
    close(in[0]);
    close(out[1]);
    in_ = in[1];
    out_ = out[0];
    signal(SIGPIPE, SIG_IGN);
  }
  ~Proc() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close_stdin();
    if (out_ >= 0) close(out_);
  }
  pid_t pid() const { return pid_; }
  void write(const std::string& s) { ASSERT_EQ(::write(in_, s.data(), s.size()), ssize_t(s.size())); }
  void close_stdin() {
    if (in_ >= 0) close(in_);
    in_ = -1;
  }
  /// Reads until `done(output)` or the timeout; returns done(output).
  template <class F>
  bool read_until(F done, double seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (!done(out)) {
      const int ms = int(std::chrono::duration<double, std::milli>(end - std::chrono::steady_clock::now()).count());
      if (ms <= 0) return false;
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, ms) <= 0) continue;
      char buf[4096];
      const ssize_t n = read(out_, buf, sizeof buf);
      if (n <= 0) return done(out);
      out.append(buf, size_t(n));
    }
    return true;
  }
  bool wait_for(const std::string& needle, double seconds, size_t from = 0) {
    return read_until([&](const std::string& o) { return o.find(needle, from) != std::string::npos; }, seconds);
  }
  /// Waits for the exit; the raw waitpid status, or -1 on timeout.
  int wait_exit(double seconds) {
    read_until([](const std::string&) { return false; }, 0);  // drain what is there
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
      int st = 0;
      if (waitpid(pid_, &st, WNOHANG) == pid_) {
        pid_ = -1;
        return st;
      }
      read_until([](const std::string&) { return false; }, 0.05);
    }
    return -1;
  }
  std::string out;

 private:
  pid_t pid_ = -1;
  int in_ = -1, out_ = -1;
};

}  // namespace

TEST(ChatBinary, ScriptedStdinEmptyLinesBlocksLoadOfADirectory) {
  // The reported failures: an empty line quit, a pasted blank line dropped the rest, /load of a
  // directory ended the process with "internal error".
  Proc p({"chat", "--backend", "cpu", "-m", kTiny, "-n", "4", "--ignore-eos", "-s", "Be brief."});
  p.write("hello\n\n\"\"\"\nfirst paragraph\n\nsecond paragraph\n\"\"\"\n/load " +
          std::filesystem::temp_directory_path().string() + "\n/new\n/history\n");
  p.close_stdin();
  const int st = p.wait_exit(60);
  ASSERT_NE(st, -1) << "no exit; output:\n" << p.out;
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << p.out;
  EXPECT_EQ(p.out.find("internal error"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("is a directory"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find("new conversation (same system message)"), std::string::npos) << p.out;
  // Two replies (the message and the block), and /history after /new lists only the system message.
  size_t n = 0;
  for (size_t at = 0; (at = p.out.find("generated 4 tokens", at)) != std::string::npos; ++at) ++n;
  EXPECT_EQ(n, 2u) << p.out;
  const size_t hist = p.out.rfind("new conversation");
  EXPECT_NE(p.out.find("system    Be brief.", hist), std::string::npos) << p.out;
  EXPECT_EQ(p.out.find("user", hist), std::string::npos) << p.out;
}

TEST(ChatBinary, CtrlCStopsTheReplyTheSessionGoesOnEofExitsCleanly) {
  // A reply that runs until the context is full (2048 tokens of the small trained LFM2), Ctrl-C
  // once it streams, then more input in the same session, then EOF.
  Proc p({"chat", "--backend", "cpu", "-m", kSrc + "/tests/fixtures/lfm2_trained/hf", "-c", "2048", "-n", "100000",
          "--ignore-eos"});
  ASSERT_TRUE(p.wait_for("\n> ", 60)) << p.out;
  const size_t mark = p.out.size();
  p.write("Once upon a time\n");
  ASSERT_TRUE(p.read_until([&](const std::string& o) { return o.size() > mark + 40; }, 60)) << p.out;
  ASSERT_EQ(kill(p.pid(), SIGINT), 0);
  ASSERT_TRUE(p.wait_for("(stopped", 30, mark)) << "the reply did not stop on SIGINT:\n" << p.out;
  EXPECT_EQ(p.out.find("context is full", mark), std::string::npos) << "the reply ended before the SIGINT";
  const size_t after = p.out.size();
  p.write("/history\n");
  ASSERT_TRUE(p.wait_for("assistant", 30, after)) << "the session did not continue:\n" << p.out;
  EXPECT_NE(p.out.find("Once upon a time", after), std::string::npos);
  p.close_stdin();
  const int st = p.wait_exit(30);
  ASSERT_NE(st, -1) << "no exit after EOF:\n" << p.out;
  EXPECT_TRUE(WIFEXITED(st)) << "killed by signal " << (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
  EXPECT_EQ(WEXITSTATUS(st), 0) << p.out;
}

TEST(ChatBinary, CtrlCTwiceAtThePromptQuitsCleanly) {
  Proc p({"chat", "--backend", "cpu", "-m", kTiny, "-n", "2"});
  ASSERT_TRUE(p.wait_for("\n> ", 60)) << p.out;
  ASSERT_EQ(kill(p.pid(), SIGINT), 0);
  ASSERT_TRUE(p.wait_for("Ctrl-C again", 30)) << p.out;
  const size_t mark = p.out.size();
  p.write("hi\n");  // a message in between: the next Ctrl-C is a first one again
  ASSERT_TRUE(p.wait_for("generated 2 tokens", 30, mark)) << p.out;
  ASSERT_TRUE(p.wait_for("\n> ", 30, p.out.find("generated 2 tokens", mark))) << p.out;
  ASSERT_EQ(kill(p.pid(), SIGINT), 0);
  ASSERT_TRUE(p.wait_for("Ctrl-C again", 30, mark)) << p.out;
  ASSERT_EQ(kill(p.pid(), SIGINT), 0);
  const int st = p.wait_exit(30);
  ASSERT_NE(st, -1) << "no exit after two Ctrl-C:\n" << p.out;
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << p.out;
}
