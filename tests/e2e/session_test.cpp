// Conversation sessions (src/runtime/session.h) on the real default model (SmolLM2-135M-Instruct):
//   - Sequence snapshots: restore + continue is bit-identical to never leaving; stale snapshots
//     are refused; export/import round-trips bit-exactly
//   - a session's incremental turns vs one prefill of the same tokens (parity tolerance, same
//     greedy tokens)
//   - a first prompt shorter than a chunk is snapshotted and reused; rollback to the middle of a
//     5-turn conversation then continue; regenerate; edit; two branches from one point; LRU
//     eviction recomputes from the nearest earlier point
//   - save -> load in a second process (fork) -> continue == never stopped; corrupt and foreign files
//   - two sessions interleaved give exactly what each gives alone; context-full behaviour
// Heavy checks run on the CPU reference backend; a few on WebGPU (software Vulkan is slow).
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "chat/chat_template.h"
#include "parity_util.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"

using namespace wgllm;
using namespace wgllm::test;

namespace {

constexpr float kTolSplit = 5e-4f;  // same backend, different chunking (smollm2_parity_test.cpp)

struct Fx {
  std::unique_ptr<ModelSource> src;
  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<ChatTemplate> tmpl;
  std::unique_ptr<Model> cpu, gpu;
  std::string fingerprint;
  Fx() {
    src = ModelSource::open(cache_file("models/SmolLM2-135M-Instruct.Q4_1.gguf"));
    tok = Tokenizer::from_gguf(*src->gguf);
    tmpl = std::make_unique<ChatTemplate>(src->chat_template(), tok->token_text(tok->bos_id()),
                                          tok->token_text(tok->eos_id()));
    fingerprint = model_fingerprint(*src);
    ModelOptions o;
    o.context_length = 512;
    o.backend = BackendKind::CPU;
    cpu = create_model(*src, o);
  }
  Model& webgpu() {
    if (!gpu) {
      ModelOptions o;
      o.context_length = 512;
      gpu = create_model(*src, o);
    }
    return *gpu;
  }
};
Fx& fx() {
  static Fx f;
  return f;
}

GenerateOptions greedy_opts(uint32_t n = 6) {
  GenerateOptions g;
  g.max_new_tokens = n;
  g.sampler.temperature = 0;
  return g;
}

SessionOptions sopts(bool kv_truncate = true, uint32_t cap_count = 64) {
  SessionOptions o;
  o.kv_truncate = kv_truncate;
  o.snapshot_cap_count = cap_count;
  o.fingerprint = fx().fingerprint;
  return o;
}

const std::vector<std::string> kUser = {"Hi", "What is the capital of France?", "And of Italy?",
                                        "Name a river there.", "Thanks. Say bye."};

/// Replies of a fresh session fed `users` in order.
std::vector<std::vector<int32_t>> alone(Model& m, const std::vector<std::string>& users, SessionOptions o = sopts(),
                                        uint32_t n = 6) {
  Session s(m, *fx().tok, fx().tmpl.get(), o);
  std::vector<std::vector<int32_t>> out;
  for (auto& u : users) out.push_back(s.send(u, greedy_opts(n)).reply);
  return out;
}

std::vector<std::string> first(size_t n, std::vector<std::string> extra = {}) {
  std::vector<std::string> v(kUser.begin(), kUser.begin() + n);
  v.insert(v.end(), extra.begin(), extra.end());
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

std::string tmp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("wgllm_session_" + std::to_string(getpid()) + "_" + name)).string();
}

void snapshot_restore_bit_identical(Model& m) {
  auto seq = m.new_sequence();
  const std::vector<int32_t> prompt = fx().tok->encode("The quick brown fox jumps over the lazy dog.");
  const std::vector<int32_t> cont = fx().tok->encode(" Then it ran away");
  m.forward(*seq, prompt, nullptr);
  auto snap = seq->snapshot();
  EXPECT_EQ(snap->n_past(), prompt.size());
  EXPECT_EQ(snap->bytes(), 0u);  // KV-only: the KV cache is referenced by length, not copied
  std::vector<float> a, b, c;
  m.forward(*seq, cont, &a);
  ASSERT_TRUE(seq->restorable(*snap));
  seq->restore(*snap);
  EXPECT_EQ(seq->n_past(), prompt.size());
  m.forward(*seq, cont, &b);
  EXPECT_TRUE(same_bits(a, b)) << "restore + continue differs from the run that never left";
  // A second continuation from the same point, then back to the first: still identical.
  seq->restore(*snap);
  m.forward(*seq, std::span<const int32_t>(cont.data(), 2), nullptr);
  seq->restore(*snap);
  m.forward(*seq, cont, &c);
  EXPECT_TRUE(same_bits(a, c));
  // Rewriting rows below the snapshot's length makes it unusable: refused, nothing changes.
  seq->truncate(3);
  m.forward(*seq, std::span<const int32_t>(cont.data(), 1), nullptr);
  EXPECT_FALSE(seq->restorable(*snap));
  EXPECT_THROW(seq->restore(*snap), Error);
  EXPECT_EQ(seq->n_past(), 4u);
  auto other = m.new_sequence();
  EXPECT_FALSE(other->restorable(*snap));
}

}  // namespace

TEST(Session, SequenceSnapshotRestoreIsBitIdenticalCpu) { snapshot_restore_bit_identical(*fx().cpu); }
TEST(Session, SequenceSnapshotRestoreIsBitIdenticalWebGPU) { snapshot_restore_bit_identical(fx().webgpu()); }

TEST(Session, ExportImportRoundTripsBitExactly) {
  for (Model* m : {fx().cpu.get(), &fx().webgpu()}) {
    auto a = m->new_sequence(), b = m->new_sequence();
    const std::vector<int32_t> p = fx().tok->encode("Once upon a time there was");
    m->forward(*a, p, nullptr);
    auto blobs = a->export_state();
    ASSERT_EQ(blobs.size(), 2u * m->config().n_layers);
    b->import_state(a->n_past(), blobs);
    EXPECT_EQ(b->n_past(), a->n_past());
    std::vector<float> la, lb;
    const int32_t t = 42;
    m->forward(*a, std::span<const int32_t>(&t, 1), &la);
    m->forward(*b, std::span<const int32_t>(&t, 1), &lb);
    EXPECT_TRUE(same_bits(la, lb)) << m->backend_name();
    // Layout errors are clear and change nothing.
    blobs.pop_back();
    EXPECT_THROW(b->import_state(3, blobs), Error);
    EXPECT_EQ(b->n_past(), p.size() + 1);
  }
}

TEST(Session, TurnsMatchOnePrefillOfTheWholeConversation) {
  Model& m = *fx().cpu;
  Session s(m, *fx().tok, fx().tmpl.get(), sopts());
  uint32_t fed = 0;
  for (size_t i = 0; i < 3; ++i) {
    TurnResult r = s.send(kUser[i], greedy_opts());
    EXPECT_GT(r.n_new, 0u);
    if (i > 0) {
      EXPECT_EQ(r.n_reused, fed) << "turn " << i << " reprocessed history";
    }
    fed = uint32_t(s.tokens().size());
  }
  // The same tokens in one prefill (a fresh sequence) vs the session's incremental cache.
  std::vector<int32_t> all = s.tokens();
  const int32_t probe = fx().tok->encode("\n")[0];
  all.push_back(probe);
  auto fresh = m.new_sequence();
  std::vector<float> one, inc;
  m.forward(*fresh, all, &one);
  m.forward(s.sequence(), std::span<const int32_t>(&probe, 1), &inc);
  Diff d = diff(inc, one);
  EXPECT_LE(d.max_abs, kTolSplit);
  EXPECT_EQ(d.argmax_a, d.argmax_b);
  // Greedy tokens after the whole conversation match too.
  std::vector<int32_t> g1 = greedy(m, all, 6), g2;
  int32_t t = int32_t(d.argmax_a);
  for (int i = 0; i < 6; ++i) {
    g2.push_back(t);
    t = m.forward_argmax(s.sequence(), std::span<const int32_t>(&t, 1));
  }
  EXPECT_EQ(g1, g2);
}

TEST(Session, ShortFirstPromptIsSnapshottedAndReused) {
  // kv_truncate off: KV-only rollback goes through the snapshots, like a recurrent model.
  Model& m = *fx().cpu;
  Session s(m, *fx().tok, fx().tmpl.get(), sopts(false));
  s.send("Hi", greedy_opts());
  const size_t end1 = s.tokens().size();
  ASSERT_LT(end1, 512u);  // shorter than the prefill chunk (ModelOptions::prefill_chunk)
  auto info = s.snapshots();
  ASSERT_EQ(info.size(), 1u);
  EXPECT_FALSE(info[0].evicted);
  EXPECT_EQ(info[0].n_past, end1);
  EXPECT_EQ(info[0].bytes, 0u);
  EXPECT_EQ(info[0].kv_bytes, end1 * 2ull * m.config().n_layers * m.config().kv_dim() * 4);
  s.send(kUser[1], greedy_opts());
  s.undo();
  TurnResult r = s.send(kUser[2], greedy_opts());
  EXPECT_EQ(r.n_reused, end1);  // restored from the turn-1 snapshot, not recomputed
  EXPECT_EQ(r.reply, alone(m, {"Hi", kUser[2]})[1]);
}

TEST(Session, RollbackToTheMiddleOfFiveTurnsThenContinue) {
  Model& m = *fx().cpu;
  const auto want = alone(m, first(2, {"Tell me a joke."}));
  for (bool truncate : {true, false}) {
    // Snapshot path with a cap of 2 snapshots: turn 2's snapshot is evicted by turns 4 and 5,
    // so rollback recomputes from the nearest earlier point (slower, never wrong). Without
    // truncation each turn takes two snapshots (end of the prompt, end of the reply): 10 taken,
    // 8 evicted.
    Session s(m, *fx().tok, fx().tmpl.get(), sopts(truncate, 2));
    std::vector<std::vector<int32_t>> replies;
    for (auto& u : kUser) replies.push_back(s.send(u, greedy_opts()).reply);
    EXPECT_EQ(replies[0], want[0]);
    EXPECT_EQ(replies[1], want[1]);
    EXPECT_EQ(s.n_turns(), 5u);
    if (!truncate) {
      EXPECT_EQ(s.stats().snapshots, 2u);
      EXPECT_EQ(s.stats().evictions, 8u);
      EXPECT_TRUE(s.snapshots()[1].evicted);
    }
    s.rollback(2);
    TurnResult r = s.send("Tell me a joke.", greedy_opts());
    EXPECT_EQ(r.reply, want[2]) << "kv_truncate=" << truncate;
    EXPECT_EQ(s.n_turns(), 3u);
    if (!truncate) {
      EXPECT_GT(s.stats().recomputed_tokens, 0u);
    }
  }
}

TEST(Session, RegenerateEditAndTwoBranchesFromOnePoint) {
  Model& m = *fx().cpu;
  for (bool truncate : {true, false}) {
    Session s(m, *fx().tok, fx().tmpl.get(), sopts(truncate));
    s.send(kUser[0], greedy_opts());
    const auto r2 = s.send(kUser[1], greedy_opts()).reply;
    const auto toks = s.tokens();
    // Regenerate (greedy): the same reply and the same tokens.
    EXPECT_EQ(s.regenerate(greedy_opts()).reply, r2);
    EXPECT_EQ(s.tokens(), toks);
    // Edit the second user message: equals a fresh conversation with the edited message.
    const auto e = s.edit(1, kUser[2], greedy_opts()).reply;
    EXPECT_EQ(e, alone(m, {kUser[0], kUser[2]})[1]);
    // Two continuations from one point, alternated: each is what it is alone.
    s.rollback(1);
    EXPECT_EQ(s.send(kUser[1], greedy_opts()).reply, r2);
    s.rollback(1);
    EXPECT_EQ(s.send(kUser[2], greedy_opts()).reply, e);
    s.rollback(1);
    EXPECT_EQ(s.send(kUser[1], greedy_opts()).reply, r2);
    EXPECT_EQ(s.tokens(), toks);
    EXPECT_THROW(s.edit(5, "x", greedy_opts()), Error);
  }
}

TEST(Session, SaveLoadInAnotherProcessThenContinue) {
  Model& m = *fx().cpu;
  const std::string path = tmp_path("a.wgs"), out = tmp_path("a.out");
  std::vector<int32_t> never_stopped;
  {
    Session s(m, *fx().tok, fx().tmpl.get(), sopts(false));
    s.set_system("You are terse.");
    s.send(kUser[1], greedy_opts());
    s.send(kUser[2], greedy_opts());
    s.save(path);
    never_stopped = s.send(kUser[3], greedy_opts()).reply;
  }
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // a new process: its own model and session, nothing shared but the file
    int rc = 1;
    try {
      auto src = ModelSource::open(cache_file("models/SmolLM2-135M-Instruct.Q4_1.gguf"));
      ModelOptions o;
      o.context_length = 512;
      o.backend = BackendKind::CPU;
      auto model = create_model(*src, o);
      SessionOptions so = sopts(false);
      so.fingerprint = model_fingerprint(*src);
      Session s(*model, *fx().tok, fx().tmpl.get(), so);
      s.load(path);
      TurnResult r = s.send(kUser[3], greedy_opts());
      if (s.n_turns() == 3 && r.n_reused > 0 && r.n_new < 40) {
        std::ofstream f(out);
        f << nlohmann::json(r.reply).dump();
        rc = 0;
      }
    } catch (...) {
    }
    _exit(rc);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child failed";
  EXPECT_EQ(read_json(out).get<std::vector<int32_t>>(), never_stopped);
  std::filesystem::remove(path);
  std::filesystem::remove(out);
}

TEST(Session, CorruptAndForeignFilesAreClearErrors) {
  Model& m = *fx().cpu;
  const std::string path = tmp_path("b.wgs");
  Session s(m, *fx().tok, fx().tmpl.get(), sopts());
  s.send("Hi", greedy_opts(3));
  s.save(path);
  std::string good;
  {
    std::ifstream in(path, std::ios::binary);
    good.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto expect_error = [&](const std::string& bytes, const std::string& needle, SessionOptions o = sopts()) {
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), std::streamsize(bytes.size()));
    Session t(m, *fx().tok, fx().tmpl.get(), o);
    try {
      t.load(path);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
    EXPECT_EQ(t.n_turns(), 0u);
  };
  std::string bad = good;
  bad[bad.size() / 2] ^= 1;
  expect_error(bad, "checksum");
  expect_error(good.substr(0, good.size() - 100), "checksum");
  expect_error("GGUF" + good.substr(4), "not a wgllm session file");
  bad = good;
  bad[8] = 9;  // version 9
  expect_error(bad, "newer");
  SessionOptions other = sopts();
  other.fingerprint = "some other model";
  expect_error(good, "another model", other);
  // The good file loads.
  Session t(m, *fx().tok, fx().tmpl.get(), sopts());
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(good.data(), std::streamsize(good.size()));
  t.load(path);
  EXPECT_EQ(t.n_turns(), 1u);
  EXPECT_EQ(t.tokens(), s.tokens());
  std::filesystem::remove(path);
}

TEST(Session, TwoInterleavedSessionsGiveWhatEachGivesAlone) {
  Model& m = *fx().cpu;
  const auto a_alone = alone(m, first(3)), b_alone = alone(m, {"Count to five.", "Now backwards."});
  Session a(m, *fx().tok, fx().tmpl.get(), sopts()), b(m, *fx().tok, fx().tmpl.get(), sopts());
  std::vector<std::vector<int32_t>> ra, rb;
  const std::vector<std::string> bu = {"Count to five.", "Now backwards."};
  size_t bi = 0;
  for (size_t i = 0; i < 3; ++i) {
    // Session b's turns run between a's decode steps (inside a's token callback).
    ra.push_back(a.send(kUser[i], greedy_opts(), [&](int32_t) {
                    if (bi < bu.size()) rb.push_back(b.send(bu[bi++], greedy_opts()).reply);
                    return true;
                  }).reply);
  }
  EXPECT_EQ(ra, a_alone);
  EXPECT_EQ(rb, b_alone);
}

TEST(Session, ContextFullIsRefusedWithAClearError) {
  Model& m = *fx().cpu;
  SessionOptions o = sopts();
  o.context_length = 64;
  Session s(m, *fx().tok, fx().tmpl.get(), o);
  std::string longer;
  for (int i = 0; i < 40; ++i) longer += "word ";
  EXPECT_THROW(s.send(longer, greedy_opts()), ContextFull);
  EXPECT_EQ(s.n_turns(), 0u);
  EXPECT_TRUE(s.messages().empty());
  // A reply that reaches the end of the context stops there; the next turn is refused.
  GenerateOptions g = greedy_opts(200);
  g.stop_at_eog = false;
  TurnResult r = s.send("Hi", g);
  EXPECT_TRUE(r.context_full);
  EXPECT_EQ(s.sequence().n_past(), 64u);
  EXPECT_THROW(s.send("More", greedy_opts()), ContextFull);
  EXPECT_EQ(s.n_turns(), 1u);
  s.undo();
  EXPECT_EQ(s.send("Hi", greedy_opts()).reply, alone(m, {"Hi"})[0]);
}

TEST(Session, WebGPUSessionRollbackAndSaveLoad) {
  Model& m = fx().webgpu();
  const std::string path = tmp_path("c.wgs");
  Session s(m, *fx().tok, fx().tmpl.get(), sopts(false));
  s.send("Hi", greedy_opts(3));
  const size_t r1_end = s.tokens().size();
  const auto r2 = s.send(kUser[1], greedy_opts(3)).reply;
  s.save(path);
  const size_t saved = s.tokens().size();
  s.rollback(1);
  const TurnResult again = s.send(kUser[1], greedy_opts(3));
  EXPECT_EQ(again.reply, r2);
  // The same prompt again: restored from the snapshot at its end (past the turn-1 snapshot).
  EXPECT_GT(again.n_reused, r1_end);
  EXPECT_EQ(again.n_new, 1u);
  EXPECT_EQ(s.sequence().n_past(), s.tokens().size());
  Session t(m, *fx().tok, fx().tmpl.get(), sopts(false));
  t.load(path);
  const auto cont = t.send(kUser[2], greedy_opts(3));
  EXPECT_EQ(cont.reply, s.send(kUser[2], greedy_opts(3)).reply);
  EXPECT_EQ(cont.n_reused, saved);  // nothing of the loaded conversation is recomputed
  EXPECT_EQ(t.sequence().n_past(), t.tokens().size());
  std::filesystem::remove(path);
}
