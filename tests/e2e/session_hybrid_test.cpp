// Sessions on hybrid models (recurrent state): tiny random LFM2 (conv rows) and Qwen3.5 (conv
// rows + Gated DeltaNet states) from tests/fixtures, on the CPU reference and WebGPU backends.
// Rolling back and re-sending must give exactly the replies of a session that never rolled back
// (the recurrent state is restored from the turn snapshot, not recomputed), and snapshots of
// these models must actually copy state (bytes > 0), of the same size at every turn.
// Replies are sanitised to valid UTF-8 (random models emit partial characters).
// Also on the CPU backend: regenerate() re-feeds one token (a snapshot at the end of the prompt,
// like a KV-only model's truncation), sampling draws fresh randomness per generation and replays
// from the seed (also across save/load), and load() checks every blob before replacing anything.
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "chat/chat_template.h"
#include "parity_util.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"

using namespace wgllm;
using namespace wgllm::test;

namespace {

std::string chatml_template() {
  std::ifstream in(fixture("lfm2_tiny/hf/tokenizer_config.json"));
  return nlohmann::json::parse(in)["chat_template"].get<std::string>();
}

GenerateOptions fixed(uint32_t n) {
  GenerateOptions g;
  g.max_new_tokens = n;
  g.stop_at_eog = false;  // random tiny models: keep reply lengths fixed
  return g;
}

void check(const std::string& dir, BackendKind backend) {
  auto src = ModelSource::open(fixture(dir));
  auto tok = Tokenizer::from_hf_json(*src->hf->tokenizer_json_path());
  ChatTemplate tmpl(chatml_template());
  ModelOptions mo;
  mo.backend = backend;
  mo.context_length = 512;
  auto model = create_model(*src, mo);
  SessionOptions so;
  so.fingerprint = dir;
  const std::vector<std::string> users = {"hello there", "how are you today", "tell me more", "bye"};

  Session ref(*model, *tok, &tmpl, so);
  std::vector<std::vector<int32_t>> want;
  for (auto& u : users) want.push_back(ref.send(u, fixed(5)).reply);
  // The last turn's snapshot always holds state; earlier ones count only while their tokens are
  // still a prefix of the conversation (a random model's reply can re-tokenize differently when
  // the next turn re-renders it; those points are then recomputed, never reused wrongly).
  auto snaps = ref.snapshots();
  ASSERT_FALSE(snaps.empty());
  EXPECT_GT(snaps.back().bytes, 0u) << "recurrent state must be copied";
  for (auto& s : snaps)
    if (!s.evicted) EXPECT_EQ(s.bytes, snaps.back().bytes) << "fixed-size snapshots";

  Session s(*model, *tok, &tmpl, so);
  s.send(users[0], fixed(5));
  s.send(users[1], fixed(5));
  s.send("a different turn", fixed(5));
  s.rollback(1);  // back to the end of turn 1: recurrent state restored from its snapshot
  EXPECT_EQ(s.send(users[1], fixed(5)).reply, want[1]);
  EXPECT_EQ(s.send(users[2], fixed(5)).reply, want[2]);
  s.undo();
  EXPECT_EQ(s.send(users[2], fixed(5)).reply, want[2]);
  EXPECT_EQ(s.regenerate(fixed(5)).reply, want[2]);  // greedy: the same reply again
  EXPECT_EQ(s.send(users[3], fixed(5)).reply, want[3]);
}

}  // namespace

TEST(SessionHybrid, Lfm2Cpu) { check("lfm2_tiny/hf", BackendKind::CPU); }
TEST(SessionHybrid, Lfm2WebGPU) { check("lfm2_tiny/hf", BackendKind::WebGPU); }
TEST(SessionHybrid, Qwen35Cpu) { check("qwen35_tiny", BackendKind::CPU); }
TEST(SessionHybrid, Qwen35WebGPU) { check("qwen35_tiny", BackendKind::WebGPU); }

namespace {

struct Tiny {
  std::unique_ptr<ModelSource> src;
  std::unique_ptr<Tokenizer> tok;
  ChatTemplate tmpl{chatml_template()};
  std::unique_ptr<Model> model;
  explicit Tiny(const std::string& dir) {
    src = ModelSource::open(fixture(dir));
    tok = Tokenizer::from_hf_json(*src->hf->tokenizer_json_path());
    ModelOptions mo;
    mo.backend = BackendKind::CPU;
    mo.context_length = 512;
    model = create_model(*src, mo);
  }
  std::unique_ptr<Session> session() {
    SessionOptions so;
    so.fingerprint = model_fingerprint(*src);
    return std::make_unique<Session>(*model, *tok, &tmpl, so);
  }
};

GenerateOptions sampled(uint32_t n, uint64_t seed) {
  GenerateOptions g = fixed(n);
  g.sampler.temperature = 1.5f;
  g.sampler.seed = seed;
  return g;
}

void regenerate_refeeds_one_token(const std::string& dir) {
  Tiny t(dir);
  auto s = t.session();
  s->send("hello there", fixed(5));
  const TurnResult first = s->send("how are you today, my friend?", fixed(5));
  ASSERT_GT(first.n_new, 5u);
  const TurnResult again = s->regenerate(fixed(5));
  EXPECT_EQ(again.n_new, 1u) << "regenerate re-prefilled the last user message";
  EXPECT_EQ(again.n_reused + again.n_new, first.n_reused + first.n_new);
  EXPECT_EQ(again.reply, first.reply);  // greedy: restoring the prompt snapshot changes nothing
  // The same after a rollback to the end of turn 1 and a new branch.
  s->rollback(1);
  const TurnResult other = s->send("something else entirely", fixed(5));
  EXPECT_EQ(s->regenerate(fixed(5)).n_new, 1u);
  // Switched off: the whole prompt is fed again (only the end-of-turn snapshot is reusable).
  SessionOptions so;
  so.fingerprint = model_fingerprint(*t.src);
  so.prompt_snapshot = false;
  Session off(*t.model, *t.tok, &t.tmpl, so);
  off.send("hello there", fixed(5));
  const TurnResult o1 = off.send("something else entirely", fixed(5));
  EXPECT_EQ(o1.reply, other.reply);
  EXPECT_EQ(off.regenerate(fixed(5)).n_new, o1.n_new);
}

/// A session file's parts, to rewrite one blob with valid checksums.
struct File {
  uint32_t version = 0;  // format version (bytes 8..11)
  nlohmann::json header;
  std::vector<std::string> blobs;
  static uint64_t fnv1a(const std::string& s, uint64_t h = 0xcbf29ce484222325ull) {
    for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
    return h;
  }
  static File read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::string f((std::istreambuf_iterator<char>(in)), {});
    File out;
    uint64_t hn = 0;
    std::memcpy(&out.version, f.data() + 8, 4);
    std::memcpy(&hn, f.data() + 16, 8);
    out.header = nlohmann::json::parse(f.substr(24, hn));
    size_t off = 24 + hn;
    for (auto& b : out.header["blobs"]) {
      const size_t n = b["size"].get<size_t>();
      out.blobs.push_back(f.substr(off, n));
      off += n;
    }
    return out;
  }
  void write(const std::string& path) {
    for (size_t i = 0; i < blobs.size(); ++i) {
      char h[17];
      std::snprintf(h, sizeof h, "%016llx", static_cast<unsigned long long>(fnv1a(blobs[i])));
      header["blobs"][i]["size"] = blobs[i].size();
      header["blobs"][i]["fnv1a"] = h;
    }
    const std::string hd = header.dump();
    std::string f = "WGLLMSES";
    const uint32_t v[2] = {version, 0};
    const uint64_t hn = hd.size();
    f.append(reinterpret_cast<const char*>(v), 8);
    f.append(reinterpret_cast<const char*>(&hn), 8);
    f += hd;
    for (auto& b : blobs) f += b;
    const uint64_t sum = fnv1a(f);
    f.append(reinterpret_cast<const char*>(&sum), 8);
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(f.data(), std::streamsize(f.size()));
  }
  size_t find(const std::string& prefix) const {
    for (size_t i = 0; i < blobs.size(); ++i)
      if (header["blobs"][i]["name"].get<std::string>().rfind(prefix, 0) == 0) return i;
    return blobs.size();
  }
};

std::string tmp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("wgllm_hybrid_" + std::to_string(getpid()) + "_" + name)).string();
}

}  // namespace

TEST(SessionHybrid, RegenerateRefeedsOneTokenLfm2Cpu) { regenerate_refeeds_one_token("lfm2_tiny/hf"); }
TEST(SessionHybrid, RegenerateRefeedsOneTokenQwen35Cpu) { regenerate_refeeds_one_token("qwen35_tiny"); }

TEST(SessionHybrid, SamplingIsFreshPerGenerationAndReplaysFromTheSeed) {
  Tiny t("lfm2_tiny/hf");
  const std::string path = tmp_path("seed.wgs");
  auto run = [&](uint64_t seed, bool save) {
    auto s = t.session();
    std::vector<std::vector<int32_t>> r;
    r.push_back(s->send("hello there", sampled(8, seed)).reply);
    r.push_back(s->regenerate(sampled(8, seed)).reply);
    if (save) s->save(path);
    r.push_back(s->regenerate(sampled(8, seed)).reply);
    s->undo();
    r.push_back(s->send("hello there", sampled(8, seed)).reply);  // the same message again
    return r;
  };
  const auto a = run(3, true);
  for (size_t i = 0; i < a.size(); ++i)
    for (size_t j = i + 1; j < a.size(); ++j) EXPECT_NE(a[i], a[j]) << "generations " << i << " and " << j;
  EXPECT_EQ(run(3, false), a);
  EXPECT_NE(run(4, false), a);
  // The generation counter travels in the file: a loaded session continues the same stream.
  auto s = t.session();
  s->load(path);
  EXPECT_EQ(s->generations(), 2u);
  EXPECT_EQ(s->regenerate(sampled(8, 3)).reply, a[2]);
  std::filesystem::remove(path);
}

TEST(SessionHybrid, LoadChecksEveryBlobBeforeReplacingTheConversation) {
  for (const char* dir : {"lfm2_tiny/hf", "qwen35_tiny"}) {
    Tiny t(dir);
    const std::string path = tmp_path("blob.wgs"), bad = tmp_path("bad.wgs");
    {
      auto a = t.session();
      a->send("hello there", fixed(4));
      a->send("how are you today", fixed(4));
      a->save(path);
    }
    const File good = File::read(path);
    ASSERT_LT(good.find("snap."), good.blobs.size()) << "no snapshot blob to break";
    // The running conversation that a bad file must not touch, and what it continues with.
    auto live = t.session();
    live->send("a different conversation", fixed(4));
    const auto msgs = live->messages();
    const auto toks = live->tokens();
    std::vector<int32_t> want;
    {
      auto ref = t.session();
      ref->send("a different conversation", fixed(4));
      want = ref->send("and on", fixed(4)).reply;
    }
    auto expect_refused = [&](File f, const std::string& needle) {
      f.write(bad);
      try {
        live->load(bad);
        ADD_FAILURE() << dir << ": no error for " << needle;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
      }
      EXPECT_EQ(live->n_turns(), 1u) << dir << ": " << needle;
      EXPECT_EQ(live->messages().size(), msgs.size());
      EXPECT_EQ(live->tokens(), toks);
    };
    File f = good;
    f.blobs[f.find("snap.")].resize(f.blobs[f.find("snap.")].size() - 4);  // one snapshot blob 4 bytes short
    expect_refused(f, "snapshot at");
    f = good;
    f.blobs[f.find("state.")] += std::string(4, '\0');  // a live-state blob 4 bytes long
    expect_refused(f, "saved state");
    f = good;
    f.header["turns"][0][0] = 0;  // a turn that ends before its messages
    expect_refused(f, "turn table");
    // Header numbers that are not non-negative integers (found by fuzz_session_file: a float such as
    // 1e300 was cast out of range, a negative number wrapped).
    for (const char* key : {"rendered_bytes", "n_past", "generations"}) {
      for (nlohmann::json v : {nlohmann::json(1e300), nlohmann::json(-1), nlohmann::json(2.5), nlohmann::json("7")}) {
        f = good;
        f.header[key] = v;
        expect_refused(f, "malformed header");
      }
    }
    // The conversation goes on exactly as if no load had been tried.
    EXPECT_EQ(live->send("and on", fixed(4)).reply, want) << dir;
    // The good file still loads.
    live->load(path);
    EXPECT_EQ(live->n_turns(), 2u);
    std::filesystem::remove(path);
    std::filesystem::remove(bad);
  }
}

TEST(SessionHybrid, VersionOneFilesStillLoad) {
  // Format v1 named state blobs "blk.N.k" / ".v" / ".conv" / ".ssm"; v2 names them after the layer
  // states ("layers.N.self_attn.keys", ...). A v1 file (this build's file with its names turned
  // back) loads and continues exactly like the v2 file.
  auto v1_name = [](std::string n) {
    for (const char* p : {"state.", "snap."}) {
      if (n.rfind(p, 0) != 0) continue;
      const size_t a = std::strlen(p), b = n.find('.', a + 7);  // "layers." then N
      const std::string layer = n.substr(a + 7, b - a - 7), rest = n.substr(b + 1);
      const std::string tag = rest == "self_attn.keys" ? "k" : rest == "self_attn.values" ? "v"
                            : rest == "linear_attn.recurrent_state" ? "ssm" : "conv";
      return std::string(p) + "blk." + layer + "." + tag;
    }
    return n;
  };
  for (const char* dir : {"lfm2_tiny/hf", "qwen35_tiny"}) {
    Tiny t(dir);
    const std::string path = tmp_path("v2.wgs"), old = tmp_path("v1.wgs");
    std::vector<int32_t> want;
    {
      auto a = t.session();
      a->send("hello there", fixed(4));
      a->save(path);
      want = a->send("how are you today", fixed(4)).reply;
    }
    File f = File::read(path);
    EXPECT_EQ(f.version, 2u);
    ASSERT_LT(f.find("state.layers."), f.blobs.size());
    ASSERT_LT(f.find("snap.layers."), f.blobs.size());
    for (auto& b : f.header["blobs"]) b["name"] = v1_name(b["name"].get<std::string>());
    ASSERT_EQ(f.find("state.layers."), f.blobs.size());
    f.version = 1;
    f.write(old);
    auto s = t.session();
    s->load(old);
    EXPECT_EQ(s->n_turns(), 1u);
    EXPECT_EQ(s->send("how are you today", fixed(4)).reply, want) << dir;
    // A rollback restores the end-of-turn-1 snapshot read from the v1 file.
    s->rollback(1);
    EXPECT_EQ(s->send("how are you today", fixed(4)).reply, want) << dir;
    std::filesystem::remove(path);
    std::filesystem::remove(old);
  }
}

TEST(SessionHybrid, LoadOfADirectoryIsAClearError) {
  Tiny t("lfm2_tiny/hf");
  auto s = t.session();
  s->send("hello there", fixed(3));
  try {
    s->load(std::filesystem::temp_directory_path().string());
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
  EXPECT_EQ(s->n_turns(), 1u);
}
