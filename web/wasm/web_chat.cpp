#include "web_chat.h"

#include <algorithm>
#include <random>

#include "models/model.h"
#include "runtime/generate.h"
#include "tokenizer/tokenizer.h"

namespace wgllm::web {
namespace {

using nlohmann::json;

std::vector<ChatMessage> parse_messages(const json& req) {
  if (!req.is_object()) throw BadRequest("request: expected a JSON object");
  if (!req.contains("messages") || !req["messages"].is_array() || req["messages"].empty())
    throw BadRequest("request.messages: expected a non-empty array of {role, content}");
  std::vector<ChatMessage> out;
  const json& ms = req["messages"];
  for (size_t i = 0; i < ms.size(); ++i) {
    const std::string where = "request.messages[" + std::to_string(i) + "]";
    const json& m = ms[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      throw BadRequest(where + ".role: expected \"system\", \"user\" or \"assistant\"");
    if (!m.contains("content") || !m["content"].is_string()) throw BadRequest(where + ".content: expected a string");
    const std::string role = m["role"];
    if (role != "system" && role != "user" && role != "assistant")
      throw BadRequest(where + ".role: '" + role + "' is not \"system\", \"user\" or \"assistant\"");
    if (role == "system" && i != 0) throw BadRequest(where + ": a system message must come first");
    out.push_back({role, m["content"]});
  }
  if (out.back().role != "user") throw BadRequest("request.messages: the last message must have role \"user\"");
  return out;
}

template <class T>
T field(const json& req, const char* name, T def) {
  if (!req.contains(name) || req[name].is_null()) return def;
  try {
    return req[name].get<T>();
  } catch (const std::exception&) {
    throw BadRequest(std::string("request.") + name + ": wrong type");
  }
}

GenerateOptions options(const json& req) {
  GenerateOptions g;
  const int64_t max_tokens = field<int64_t>(req, "max_tokens", 256);
  if (max_tokens < 1) throw BadRequest("request.max_tokens: must be >= 1");
  g.max_new_tokens = uint32_t(std::min<int64_t>(max_tokens, 1 << 20));
  g.sampler.temperature = field<float>(req, "temperature", 0.0f);
  if (!(g.sampler.temperature >= 0.0f)) throw BadRequest("request.temperature: must be >= 0");
  g.sampler.top_p = field<float>(req, "top_p", 1.0f);
  if (!(g.sampler.top_p > 0.0f && g.sampler.top_p <= 1.0f)) throw BadRequest("request.top_p: must be in (0, 1]");
  const int64_t top_k = field<int64_t>(req, "top_k", 0);
  if (top_k < 0) throw BadRequest("request.top_k: must be >= 0");
  g.sampler.top_k = uint32_t(top_k);
  g.sampler.seed = field<uint64_t>(req, "seed", 0);
  g.stop_at_eog = !field<bool>(req, "ignore_eos", false);
  return g;
}

bool same(const ChatMessage& a, const ChatMessage& b) { return a.role == b.role && a.content == b.content; }

// A generation's token callback (Session::send, generate()): each id's newly completed text
// (StreamDecoder: valid UTF-8) goes to the sink and into `text`; the sink's false stops the
// generation (`aborted`). finish() sends the held-back tail as id -1.
struct Streamer {
  Streamer(const Tokenizer& tok, const TokenSink& sink) : dec(tok, true), sink(sink) {}
  bool operator()(int32_t id) {
    std::string piece = dec.push(id);
    text += piece;
    aborted = !sink(id, piece);
    return !aborted;
  }
  void finish() {
    const std::string tail = dec.flush();
    if (tail.empty()) return;
    text += tail;
    sink(-1, tail);
  }
  StreamDecoder dec;
  const TokenSink& sink;
  std::string text;
  bool aborted = false;
};

}  // namespace

void Conversation::open(Model& model, const Tokenizer& tok, const ChatTemplate* tmpl, uint32_t context) {
  model_ = &model;
  tok_ = &tok;
  tmpl_ = tmpl;
  context_ = context;
  reset();
}

void Conversation::reset() {
  visible_.clear();
  session_.reset();
  if (!tmpl_) return;  // a base model: no chat, so no sequence held for it
  SessionOptions so;
  so.context_length = context_;
  session_ = std::make_unique<Session>(*model_, *tok_, tmpl_, so);
}

nlohmann::json Conversation::turn(const json& req, const TokenSink& sink) {
  if (!tmpl_)
    throw BadRequest("this model has no chat template (tokenizer.chat_template), so it cannot take chat messages: "
                     "use completions.create({prompt}) to continue a text");
  std::vector<ChatMessage> msgs = parse_messages(req);
  const GenerateOptions g = options(req);
  const ChatMessage user = msgs.back();
  msgs.pop_back();  // the history the request builds on
  size_t n_asst = 0;
  for (const auto& m : msgs) n_asst += m.role == "assistant";
  if (n_asst == 0) {  // a new conversation (possibly with a system message)
    const std::string sys = msgs.empty() ? "" : msgs[0].content;
    if (!(visible_.empty() && session_->n_turns() == 0 && session_->messages().empty() && sys.empty())) reset();
    if (!msgs.empty()) session_->set_system(sys);
  } else {
    for (size_t i = 0; i < msgs.size(); ++i)
      if (i >= visible_.size() || !same(msgs[i], visible_[i]))
        throw BadRequest("request.messages[" + std::to_string(i) +
                         "] differs from the conversation the engine holds: continue it by appending "
                         "messages (or drop later turns), or call resetChat() to start a new one");
    if (msgs.back().role != "assistant")
      throw BadRequest("request.messages: a user message must follow an assistant message");
    if (n_asst < session_->n_turns()) session_->rollback(n_asst);
  }
  visible_ = msgs;

  Streamer st(*tok_, sink);
  const TurnResult r = session_->send(user.content, g, [&](int32_t id) { return st(id); });
  st.finish();
  const std::string& streamed = st.text;
  const bool aborted = st.aborted;
  visible_.push_back(user);
  visible_.push_back({"assistant", streamed});

  const uint32_t prompt_tokens = r.n_new + r.n_reused;
  const char* finish = aborted ? "abort" : (r.context_full || r.reply.size() >= g.max_new_tokens) ? "length" : "stop";
  json extra = {{"prefill_tokens_processed", r.n_new},
                {"reused_tokens", r.n_reused},
                {"ttft_ms", r.stats.ttft_ms},
                {"decode_tokens_per_s", r.stats.decode_tokens_per_s()},
                {"prefill_tokens_per_s", r.stats.prefill_tokens_per_s()}};
  return json{{"text", streamed},
              {"token_ids", r.reply},
              {"finish_reason", finish},
              {"usage",
               {{"prompt_tokens", prompt_tokens},
                {"completion_tokens", r.reply.size()},
                {"total_tokens", prompt_tokens + r.reply.size()},
                {"extra", extra}}}};
}

json complete(Model& model, const Tokenizer& tok, uint32_t context, const json& req, const TokenSink& sink) {
  if (!req.is_object()) throw BadRequest("request: expected a JSON object");
  if (!req.contains("prompt") || !req["prompt"].is_string()) throw BadRequest("request.prompt: expected a string");
  GenerateOptions g = options(req);
  // Without a seed each request samples afresh (as the server's /v1/completions); a seed repeats.
  if (!req.contains("seed") || req["seed"].is_null())
    g.sampler.seed = (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
  const std::vector<int32_t> ids = tok.encode_prompt(req["prompt"].get<std::string>());
  if (ids.empty()) throw BadRequest("request.prompt: empty (no tokens)");
  if (ids.size() + 1 > context)
    throw ContextFull("the prompt is " + std::to_string(ids.size()) + " tokens + 1 to generate, the context holds " +
                      std::to_string(context));
  // Sized to the request, so that a completion beside a conversation costs only what it needs.
  const uint64_t need = uint64_t(ids.size()) + g.max_new_tokens;
  auto seq = model.new_sequence(uint32_t(std::min<uint64_t>(need, context)));
  Streamer stream(tok, sink);
  GenerateStats st;
  const std::vector<int32_t> out = generate(model, *seq, tok, ids, g, [&](int32_t id) { return stream(id); }, &st);
  stream.finish();
  const std::string& text = stream.text;
  const bool aborted = stream.aborted;
  // generate() stops when the next token would not fit (runtime/generate.cpp): then P + k - 1
  // positions hold the prompt and k - 1 fed replies, the sequence full; an end of generation sampled
  // right after the step that filled it leaves P + k (a stop). A request that fits the context
  // never fills its sequence (prompt + max_tokens positions, the last token not fed).
  const bool full = ids.size() + out.size() > seq->context_length();
  const char* finish = aborted ? "abort" : (out.size() >= g.max_new_tokens || full) ? "length" : "stop";
  const json extra = {{"prefill_tokens_processed", ids.size()},
                      {"reused_tokens", 0},
                      {"ttft_ms", st.ttft_ms},
                      {"decode_tokens_per_s", st.decode_tokens_per_s()},
                      {"prefill_tokens_per_s", st.prefill_tokens_per_s()}};
  return json{{"text", text},
              {"token_ids", out},
              {"finish_reason", finish},
              {"usage",
               {{"prompt_tokens", ids.size()},
                {"completion_tokens", out.size()},
                {"total_tokens", ids.size() + out.size()},
                {"extra", extra}}}};
}

}  // namespace wgllm::web
