// Conversation: OpenAI-shaped chat requests ({messages, max_tokens, temperature, ...}) mapped onto
// one wgllm::Session, so that a request that appends to the conversation the engine already holds
// processes only its new tokens. Platform-independent (no Emscripten), used by web/wasm/engine.cpp.
//
// Matching a request to the session: the request's messages minus the last (which must be a user
// message) are compared with the conversation as the client saw it (assistant messages hold the
// streamed text). Equal: one new turn. A prefix ending after an assistant message (the client
// dropped or edited later turns): the session rolls back to that turn first. Only a system
// message, or nothing: a new conversation. Anything else is a BadRequest naming the first
// differing message (the engine cannot re-create replies it did not generate).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "core/error.h"
#include "runtime/session.h"

namespace wgllm {
class Model;
class Tokenizer;
}  // namespace wgllm

namespace wgllm::web {

/// A request the engine cannot serve as given (bad field, history that does not match).
struct BadRequest : Error {
  using Error::Error;
};

/// Receives each generated token id with its newly completed text (possibly empty; id -1 with the
/// held-back tail at the end). Returns false to stop generating (abort).
using TokenSink = std::function<bool(int32_t id, const std::string& text)>;

class Conversation {
 public:
  /// `model`, `tok` and `tmpl` must outlive the conversation. context: KV cache length in tokens.
  /// tmpl may be null (a base model without tokenizer.chat_template): every turn() is then a
  /// BadRequest pointing at complete(), and no session (no sequence) is held.
  void open(Model& model, const Tokenizer& tok, const ChatTemplate* tmpl, uint32_t context);
  /// Forgets everything (the next turn starts from an empty cache).
  void reset();
  /// The conversation's session (none for a model without a chat template: throws wgllm::Error).
  Session& session() {
    if (!session_) throw Error("this model has no chat template: no conversation");
    return *session_;
  }
  /// Runs one turn (see the header comment). Result: {text, token_ids, finish_reason ("stop",
  /// "length", "abort"), usage: {prompt_tokens, completion_tokens, total_tokens, extra:
  /// {prefill_tokens_processed, reused_tokens, ttft_ms, decode_tokens_per_s, prefill_tokens_per_s}}}.
  /// Throws BadRequest, ContextFull (conversation unchanged), wgllm::Error.
  nlohmann::json turn(const nlohmann::json& request, const TokenSink& sink);

 private:
  Model* model_ = nullptr;
  const Tokenizer* tok_ = nullptr;
  const ChatTemplate* tmpl_ = nullptr;
  uint32_t context_ = 0;
  std::unique_ptr<Session> session_;
  std::vector<ChatMessage> visible_;  // the conversation as the client saw it
};

/// One raw text completion (the shape of OpenAI's completions endpoint; the browser's
/// engine.completions.create, as the native `wgllm run --raw` and the server's /v1/completions):
/// `request` {prompt (string), max_tokens, temperature, top_p, top_k, seed, ignore_eos} (the chat
/// requests' sampling fields; without a seed, a random one per request, as the server's
/// /v1/completions). The prompt is tokenized as is (Tokenizer::encode_prompt: the model's
/// BOS rule, special tokens parsed) and continued on a new sequence of `model` sized to the request
/// (at most `context` positions), freed afterwards: a conversation on the same model is untouched.
/// Result: {text, token_ids, finish_reason ("stop", "length", "abort"), usage: {prompt_tokens,
/// completion_tokens, total_tokens, extra: {prefill_tokens_processed (all of the prompt),
/// reused_tokens (0), ttft_ms, decode_tokens_per_s, prefill_tokens_per_s}}} (a chat turn's fields).
/// Throws BadRequest (a missing, non-string or empty prompt, bad sampling fields), ContextFull (the
/// prompt leaves no room for one token in `context`), wgllm::Error.
nlohmann::json complete(Model& model, const Tokenizer& tok, uint32_t context, const nlohmann::json& request,
                        const TokenSink& sink);

}  // namespace wgllm::web
