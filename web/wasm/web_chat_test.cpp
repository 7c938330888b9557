// web::Conversation (OpenAI-shaped requests on a Session) on the tiny random LFM2 fixture, CPU
// reference backend: request validation names the field, an appended request processes only its
// new tokens, a kept prefix rolls back (same reply as a conversation that never went further), a
// foreign history is refused, a system-only history starts over, a sink returning false aborts;
// web::complete (raw text completions, base models without a chat template): the ids of generate()
// on the same tokens, validation, a prompt beyond the context, abort, a chat conversation left as
// it was, and a conversation without a template refusing chat requests.
#include <gtest/gtest.h>

#include <fstream>

#include "models/model.h"
#include "models/source.h"
#include "runtime/generate.h"
#include "tokenizer/tokenizer.h"
#include "web_chat.h"

using namespace wgllm;
using nlohmann::json;

namespace {

const std::string kDir = std::string(WGLLM_SOURCE_DIR) + "/tests/fixtures/lfm2_tiny/hf";

struct Fixture {
  std::unique_ptr<ModelSource> src = ModelSource::open(kDir);
  std::unique_ptr<Tokenizer> tok = Tokenizer::from_hf_json(*src->hf->tokenizer_json_path());
  ChatTemplate tmpl{[] {
    std::ifstream in(kDir + "/tokenizer_config.json");
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

json request(const json& messages, int n = 4) {
  return {{"messages", messages}, {"max_tokens", n}, {"ignore_eos", true}, {"temperature", 0}};
}
json msg(const char* role, const std::string& content) { return {{"role", role}, {"content", content}}; }
const web::TokenSink kAll = [](int32_t, const std::string&) { return true; };

web::Conversation open() {
  web::Conversation c;
  c.open(*fx().model, *fx().tok, &fx().tmpl, 512);
  return c;
}

std::string bad_request(web::Conversation& c, const json& req) {
  try {
    c.turn(req, kAll);
  } catch (const web::BadRequest& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(WebChat, BadRequestsNameTheField) {
  auto c = open();
  EXPECT_NE(bad_request(c, json::object()).find("request.messages"), std::string::npos);
  EXPECT_NE(bad_request(c, request(json::array({msg("bot", "x")}))).find("messages[0].role"), std::string::npos);
  EXPECT_NE(bad_request(c, request(json::array({msg("user", "a"), msg("system", "s")}))).find("system"), std::string::npos);
  EXPECT_NE(bad_request(c, request(json::array({msg("assistant", "a")}))).find("last message"), std::string::npos);
  EXPECT_NE(bad_request(c, request(json::array({msg("user", "a")}), 0)).find("max_tokens"), std::string::npos);
  json r = request(json::array({msg("user", "a")}));
  r["top_p"] = 1.5;
  EXPECT_NE(bad_request(c, r).find("top_p"), std::string::npos);
  r = request(json::array({{{"role", "user"}, {"content", 3}}}));
  EXPECT_NE(bad_request(c, r).find("messages[0].content"), std::string::npos);
}

TEST(WebChat, AppendedTurnProcessesOnlyNewTokens) {
  auto c = open();
  json m = json::array({msg("user", "hello there")});
  const json r1 = c.turn(request(m), kAll);
  const json& u1 = r1["usage"];
  EXPECT_EQ(u1["extra"]["reused_tokens"], 0);
  EXPECT_EQ(u1["extra"]["prefill_tokens_processed"], u1["prompt_tokens"]);
  EXPECT_EQ(u1["completion_tokens"], 4);
  m.push_back(msg("assistant", r1["text"]));
  m.push_back(msg("user", "how are you"));
  const json r2 = c.turn(request(m), kAll);
  const json& u2 = r2["usage"];
  const int history = u1["prompt_tokens"].get<int>() + u1["completion_tokens"].get<int>();
  // Everything fed in turn 1 (its prompt and the reply tokens but the last, sampled one) is reused.
  EXPECT_GE(u2["extra"]["reused_tokens"].get<int>(), history - 1);
  EXPECT_EQ(u2["extra"]["prefill_tokens_processed"].get<int>(),
            u2["prompt_tokens"].get<int>() - u2["extra"]["reused_tokens"].get<int>());
  EXPECT_LT(u2["extra"]["prefill_tokens_processed"].get<int>(), u2["prompt_tokens"].get<int>() - u1["prompt_tokens"].get<int>());
}

TEST(WebChat, KeptPrefixRollsBackAndForeignHistoryIsRefused) {
  auto ref = open();
  json m = json::array({msg("user", "hello there")});
  const json a1 = ref.turn(request(m), kAll);
  m.push_back(msg("assistant", a1["text"]));
  json m2 = m;
  m2.push_back(msg("user", "second question"));
  const json want = ref.turn(request(m2), kAll);

  auto c = open();
  json h = json::array({msg("user", "hello there")});
  const json b1 = c.turn(request(h), kAll);
  ASSERT_EQ(b1["token_ids"], a1["token_ids"]);
  h.push_back(msg("assistant", b1["text"]));
  json h2 = h;
  h2.push_back(msg("user", "a different question"));
  const json b2 = c.turn(request(h2), kAll);
  h2.push_back(msg("assistant", b2["text"]));
  h2.push_back(msg("user", "third"));
  c.turn(request(h2), kAll);
  EXPECT_EQ(c.session().n_turns(), 3u);
  // Back to the end of turn 1 with another second question: the reply of a conversation that
  // never went further.
  const json got = c.turn(request(m2), kAll);
  EXPECT_EQ(got["token_ids"], want["token_ids"]);
  EXPECT_EQ(c.session().n_turns(), 2u);
  EXPECT_GT(got["usage"]["extra"]["reused_tokens"].get<int>(), 0);

  json foreign = json::array({msg("user", "hello there"), msg("assistant", "not what you said"), msg("user", "x")});
  EXPECT_NE(bad_request(c, request(foreign)).find("messages[1]"), std::string::npos);
  // A system message and a user message only: a new conversation.
  const json fresh = c.turn(request(json::array({msg("system", "be brief"), msg("user", "hi")})), kAll);
  EXPECT_EQ(fresh["usage"]["extra"]["reused_tokens"], 0);
  EXPECT_EQ(c.session().n_turns(), 1u);
}

TEST(WebChat, SinkReturningFalseAborts) {
  auto c = open();
  int seen = 0;
  const json r = c.turn(request(json::array({msg("user", "hello there")}), 16),
                        [&](int32_t id, const std::string&) { return id < 0 || ++seen < 2; });
  EXPECT_EQ(r["finish_reason"], "abort");
  EXPECT_EQ(r["usage"]["completion_tokens"], 2);
}

namespace {

json completion(const std::string& prompt, int n = 6) {
  return {{"prompt", prompt}, {"max_tokens", n}, {"ignore_eos", true}, {"temperature", 0}};
}

std::string complete_error(const json& req, uint32_t context = 512) {
  try {
    web::complete(*fx().model, *fx().tok, context, req, kAll);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST(WebComplete, GreedyIdsEqualGenerateOnTheSamePrompt) {
  const std::string prompt = "Once upon a time";
  std::vector<std::string> pieces;
  std::string streamed;
  const json r = web::complete(*fx().model, *fx().tok, 512, completion(prompt), [&](int32_t id, const std::string& t) {
    if (id >= 0) pieces.push_back(t);
    streamed += t;
    return true;
  });
  const std::vector<int32_t> ids = fx().tok->encode_prompt(prompt);
  auto seq = fx().model->new_sequence(512);
  GenerateOptions g;
  g.max_new_tokens = 6;
  g.stop_at_eog = false;
  const std::vector<int32_t> want = generate(*fx().model, *seq, *fx().tok, ids, g);
  EXPECT_EQ(r["token_ids"].get<std::vector<int32_t>>(), want);
  EXPECT_EQ(r["finish_reason"], "length");
  EXPECT_EQ(r["usage"]["prompt_tokens"], ids.size());
  EXPECT_EQ(r["usage"]["completion_tokens"], 6);
  EXPECT_EQ(pieces.size(), 6u) << "one streamed piece per token";
  EXPECT_EQ(r["text"], streamed) << "the result's text is what was streamed (valid UTF-8, StreamDecoder)";
}

TEST(WebComplete, BadRequestsContextAndAbort) {
  EXPECT_NE(complete_error(json::object()).find("request.prompt"), std::string::npos);
  EXPECT_NE(complete_error({{"prompt", 3}}).find("request.prompt"), std::string::npos);
  EXPECT_NE(complete_error(completion("")).find("empty"), std::string::npos);
  EXPECT_NE(complete_error(completion("hi", 0)).find("max_tokens"), std::string::npos);
  json r = completion("hi");
  r["temperature"] = -1;
  EXPECT_NE(complete_error(r).find("temperature"), std::string::npos);
  // A prompt that leaves no room for one token is ContextFull, not a truncated answer.
  try {
    web::complete(*fx().model, *fx().tok, 4, completion("one two three four five six seven"), kAll);
    ADD_FAILURE() << "expected ContextFull";
  } catch (const ContextFull& e) {
    EXPECT_NE(std::string(e.what()).find("context holds 4"), std::string::npos) << e.what();
  }
  // A context shorter than prompt + max_tokens: stops when full, finish_reason "length".
  const size_t P = fx().tok->encode_prompt("hello there").size();
  const json full = web::complete(*fx().model, *fx().tok, uint32_t(P + 2), completion("hello there", 16), kAll);
  EXPECT_EQ(full["finish_reason"], "length");
  EXPECT_EQ(full["usage"]["completion_tokens"], 3) << "P + 2 positions: P prompt tokens, 2 fed replies, 3 sampled";
  int seen = 0;
  const json ab = web::complete(*fx().model, *fx().tok, 512, completion("hello there", 16),
                                [&](int32_t id, const std::string&) { return id < 0 || ++seen < 2; });
  EXPECT_EQ(ab["finish_reason"], "abort");
  EXPECT_EQ(ab["usage"]["completion_tokens"], 2);
}

TEST(WebComplete, LeavesTheConversationAndNeedsNoTemplate) {
  auto c = open();
  json m = json::array({msg("user", "hello there")});
  const json r1 = c.turn(request(m), kAll);
  web::complete(*fx().model, *fx().tok, 512, completion("unrelated text"), kAll);
  m.push_back(msg("assistant", r1["text"]));
  m.push_back(msg("user", "how are you"));
  const json r2 = c.turn(request(m), kAll);
  EXPECT_GT(r2["usage"]["extra"]["reused_tokens"].get<int>(), 0) << "the completion must not disturb the conversation";
  auto ref = open();
  ref.turn(request(json::array({msg("user", "hello there")})), kAll);
  EXPECT_EQ(ref.turn(request(m), kAll)["token_ids"], r2["token_ids"]);
  // A base model (no chat template): chat requests are refused with a pointer to completions, and
  // no session (no KV sequence) is held for chat.
  web::Conversation base;
  base.open(*fx().model, *fx().tok, nullptr, 512);
  EXPECT_THROW(base.session(), Error);
  try {
    base.turn(request(json::array({msg("user", "hi")})), kAll);
    ADD_FAILURE() << "expected BadRequest";
  } catch (const web::BadRequest& e) {
    EXPECT_NE(std::string(e.what()).find("completions.create"), std::string::npos) << e.what();
  }
}

TEST(WebComplete, SampledWithoutSeedDiffersWithSeedRepeats) {
  json r = completion("hello there", 16);
  r["temperature"] = 2.0;
  auto ids = [&](const json& req) { return web::complete(*fx().model, *fx().tok, 512, req, kAll)["token_ids"]; };
  EXPECT_NE(ids(r), ids(r)) << "two unseeded sampled completions should differ (16 tokens at temperature 2)";
  r["seed"] = 7;
  EXPECT_EQ(ids(r), ids(r)) << "a seeded completion should repeat";
}
