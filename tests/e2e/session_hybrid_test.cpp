// Sessions on hybrid models (recurrent state): tiny random LFM2 (conv rows) and Qwen3.5 (conv
// rows + Gated DeltaNet states) from tests/fixtures, on the CPU reference and WebGPU backends.
// Rolling back and re-sending must give exactly the replies of a session that never rolled back
// (the recurrent state is restored from the turn snapshot, not recomputed), and snapshots of
// these models must actually copy state (bytes > 0), of the same size at every turn.
// Replies are sanitised to valid UTF-8 (random models emit partial characters).
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
