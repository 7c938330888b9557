// OpenAI-compatible request parsing and error bodies (POST /v1/chat/completions, /v1/completions).
//
// Field checks follow OpenAI's API reference: a field of the wrong type or out of range is a 400
// `invalid_request_error` naming the field (`param`); unknown fields are ignored; features the
// engine does not have (n > 1, tools, images, json response formats, best_of, suffix) are refused
// with a 400 that says so, never silently dropped. Sampling: temperature [0, 2], top_p (0, 1],
// top_k >= 0 (extension), min_p [0, 1] (extension), presence/frequency penalties [-2, 2], seed,
// stop (a string or up to 4, 1..1024 bytes each), max_tokens / max_completion_tokens >= 1, logprobs + top_logprobs 0..20 (completions: logprobs
// 0..5), ignore_eos (extension, as llama.cpp's server). A field left out takes the server's default
// (RequestDefaults below: OpenAI's, or `wgllm serve`'s flags).
#pragma once
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "chat/chat_template.h"
#include "core/error.h"
#include "server/scheduler.h"

namespace wgllm::server {

/// An error answered to the client: HTTP status and OpenAI's error object fields.
struct ApiError : std::runtime_error {
  ApiError(int status, std::string message, std::string param = {}, std::string code = {},
           std::string type = "invalid_request_error")
      : std::runtime_error(escape_nul(message)), status(status), type(std::move(type)), param(std::move(param)), code(std::move(code)) {}
  int status;
  std::string type, param, code;
};

/// {"error": {"message", "type", "param", "code"}} (param/code null when empty).
nlohmann::json error_body(const ApiError& e);

struct ParsedRequest {
  bool chat = true;
  std::vector<ChatMessage> messages;  // chat
  std::string prompt;                 // completions
  std::optional<std::vector<int32_t>> prompt_ids;  // completions: the prompt as token ids (unchecked against the vocabulary)
  GenParams params;
  bool max_tokens_given = false;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool echo = false;           // completions: prepend the prompt to the text
};

/// What a request that leaves a field out gets (`wgllm serve`'s generation flags): temperature 1
/// (OpenAI's default) unless the server was started with --temp; top-k / top-p / min-p off unless
/// given; a fresh random seed per request unless --seed; max_tokens up to the end of the context
/// unless -n; ignore_eos false unless --ignore-eos.
struct RequestDefaults {
  SamplerConfig sampler{.temperature = 1.0f};
  std::optional<uint64_t> seed;
  std::optional<uint32_t> max_tokens;
  bool ignore_eos = false;
};

/// Parses a request body; fields it leaves out take `defaults`. Throws ApiError (400) naming the
/// offending field.
ParsedRequest parse_chat_request(const nlohmann::json& body, const RequestDefaults& defaults = {});
ParsedRequest parse_completion_request(const nlohmann::json& body, const RequestDefaults& defaults = {});

/// Parses text as JSON; ApiError 400 when it is not valid JSON or not an object.
nlohmann::json parse_body(const std::string& text);

/// JSON text with invalid UTF-8 replaced by U+FFFD (token pieces can be partial sequences).
std::string dump(const nlohmann::json& j);

}  // namespace wgllm::server
