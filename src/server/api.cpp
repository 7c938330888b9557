#include "server/api.h"

#include <cmath>
#include <random>

#include <fmt/core.h>

namespace wgllm::server {

using nlohmann::json;

json error_body(const ApiError& e) {
  json err = {{"message", e.what()}, {"type", e.type}, {"param", nullptr}, {"code", nullptr}};
  if (!e.param.empty()) err["param"] = e.param;
  if (!e.code.empty()) err["code"] = e.code;
  return json{{"error", err}};
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json parse_body(const std::string& text) {
  if (text.find_first_not_of(" \t\r\n") == std::string::npos)
    throw ApiError(400, "the request body is empty: send a JSON object");
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) throw ApiError(400, "the request body is not valid JSON");
  if (!j.is_object()) throw ApiError(400, "the request body must be a JSON object");
  return j;
}

namespace {

[[noreturn]] void bad(const std::string& param, const std::string& msg) { throw ApiError(400, msg, param); }

bool present(const json& b, const char* k) { return b.contains(k) && !b[k].is_null(); }

/// A finite number in [lo, hi], or in (lo, hi] with lo_open.
double number(const json& b, const char* k, double lo, double hi, bool lo_open = false) {
  const json& v = b[k];
  if (!v.is_number()) bad(k, fmt::format("'{}' must be a number", k));
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < lo || (lo_open && d == lo) || d > hi)
    bad(k, fmt::format("'{}' must be in {}{}, {}]", k, lo_open ? "(" : "[", lo, hi));
  return d;
}

int64_t integer(const json& b, const char* k, int64_t lo, int64_t hi) {
  const json& v = b[k];
  if (!v.is_number_integer()) bad(k, fmt::format("'{}' must be an integer", k));
  // nlohmann-json parses non-negative literals as unsigned; above INT64_MAX is beyond every hi.
  const bool huge = v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX);
  const int64_t x = huge ? 0 : v.get<int64_t>();
  if (huge || x < lo || x > hi) bad(k, fmt::format("'{}' must be in [{}, {}]", k, lo, hi));
  return x;
}

bool boolean(const json& b, const char* k) {
  if (!b[k].is_boolean()) bad(k, fmt::format("'{}' must be true or false", k));
  return b[k].get<bool>();
}

/// Fields shared by both endpoints.
void parse_common(const json& b, ParsedRequest& r, const RequestDefaults& d) {
  if (present(b, "n") && integer(b, "n", 1, 1 << 20) != 1) bad("n", "only n = 1 is supported (one choice per request)");
  if (present(b, "best_of") && integer(b, "best_of", 1, 1 << 20) != 1) bad("best_of", "only best_of = 1 is supported");
  if (present(b, "model") && !b["model"].is_string()) bad("model", "'model' must be a string");
  if (present(b, "logit_bias") && !(b["logit_bias"].is_object() && b["logit_bias"].empty()))
    bad("logit_bias", "'logit_bias' is not supported");
  GenParams& p = r.params;
  p.sampler = d.sampler;
  p.ignore_eos = d.ignore_eos;
  if (present(b, "temperature")) p.sampler.temperature = float(number(b, "temperature", 0, 2));
  if (present(b, "top_p")) {
    p.sampler.top_p = float(number(b, "top_p", 0, 1, /*lo_open=*/true));
  }
  if (present(b, "top_k")) p.sampler.top_k = uint32_t(integer(b, "top_k", 0, UINT32_MAX));
  if (present(b, "min_p")) p.sampler.min_p = float(number(b, "min_p", 0, 1));
  if (present(b, "presence_penalty")) p.presence_penalty = float(number(b, "presence_penalty", -2, 2));
  if (present(b, "frequency_penalty")) p.frequency_penalty = float(number(b, "frequency_penalty", -2, 2));
  if (present(b, "seed")) p.sampler.seed = uint64_t(integer(b, "seed", INT64_MIN, INT64_MAX));
  else if (d.seed) p.sampler.seed = *d.seed;
  else p.sampler.seed = (uint64_t(std::random_device{}()) << 32) ^ std::random_device{}();
  for (const char* k : {"max_completion_tokens", "max_tokens"})
    if (present(b, k)) {
      p.max_tokens = uint32_t(integer(b, k, 1, 1 << 24));
      r.max_tokens_given = true;
      break;
    }
  if (!r.max_tokens_given && d.max_tokens) {
    p.max_tokens = *d.max_tokens;
    r.max_tokens_given = true;
  }
  if (present(b, "stop")) {
    const json& s = b["stop"];
    if (s.is_string()) {
      p.stop.push_back(s.get<std::string>());
    } else if (s.is_array()) {
      if (s.size() > 4) bad("stop", "'stop' takes at most 4 sequences");
      for (const json& x : s) {
        if (!x.is_string()) bad("stop", "'stop' must be a string or an array of strings");
        p.stop.push_back(x.get<std::string>());
      }
    } else {
      bad("stop", "'stop' must be a string or an array of strings");
    }
    for (const auto& x : p.stop)
      if (x.empty() || x.size() > 1024) bad("stop", "'stop' sequences must be 1 to 1024 bytes long");
  }
  if (present(b, "stream")) r.stream = boolean(b, "stream");
  if (present(b, "stream_options")) {
    const json& so = b["stream_options"];
    if (!so.is_object()) bad("stream_options", "'stream_options' must be an object");
    if (!r.stream) bad("stream_options", "'stream_options' is only allowed with 'stream': true");
    if (present(so, "include_usage")) {
      if (!so["include_usage"].is_boolean()) bad("stream_options.include_usage", "'include_usage' must be true or false");
      r.include_usage = so["include_usage"].get<bool>();
    }
  }
  if (present(b, "ignore_eos")) p.ignore_eos = boolean(b, "ignore_eos");
}

std::string message_content(const json& m, size_t i) {
  const std::string param = fmt::format("messages[{}].content", i);
  // OpenAI's API: only an assistant message may leave its content out (or null: a turn of tool calls).
  if (!m.contains("content") || m["content"].is_null()) {
    if (m["role"] == "assistant") return "";
    bad(param, fmt::format("a '{}' message needs its 'content'", m["role"].get<std::string>()));
  }
  const json& c = m["content"];
  if (c.is_string()) return c.get<std::string>();
  if (!c.is_array()) bad(param, "a message's 'content' must be a string or an array of text parts");
  std::string text;
  for (const json& part : c) {
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      bad(param, "each content part must be an object with a 'type'");
    const std::string type = part["type"].get<std::string>();
    if (type != "text") bad(param, fmt::format("content parts of type '{}' are not supported (text only)", type));
    if (!part.contains("text") || !part["text"].is_string()) bad(param, "a text part needs a string 'text'");
    text += part["text"].get<std::string>();
  }
  return text;
}

}  // namespace

ParsedRequest parse_chat_request(const json& b, const RequestDefaults& d) {
  ParsedRequest r;
  r.chat = true;
  if (!b.contains("messages")) bad("messages", "'messages' is required");
  const json& ms = b["messages"];
  if (!ms.is_array() || ms.empty()) bad("messages", "'messages' must be a non-empty array");
  for (size_t i = 0; i < ms.size(); ++i) {
    const json& m = ms[i];
    if (!m.is_object()) bad(fmt::format("messages[{}]", i), "each message must be an object");
    if (!m.contains("role") || !m["role"].is_string())
      bad(fmt::format("messages[{}].role", i), "each message needs a string 'role'");
    if (present(m, "tool_calls")) bad(fmt::format("messages[{}].tool_calls", i), "tool calls are not supported");
    if (present(m, "name") && !m["name"].is_string()) bad(fmt::format("messages[{}].name", i), "a message's 'name' must be a string");
    std::string role = m["role"].get<std::string>();
    if (role == "developer") role = "system";  // OpenAI's newer name for the system role
    if (role != "system" && role != "user" && role != "assistant" && role != "tool")
      bad(fmt::format("messages[{}].role", i),
          fmt::format("unknown role '{}' (system, developer, user, assistant or tool)", role));
    r.messages.push_back({role, message_content(m, i)});
  }
  if (present(b, "tools") && !(b["tools"].is_array() && b["tools"].empty())) bad("tools", "tools are not supported");
  if (present(b, "functions")) bad("functions", "functions are not supported");
  if (present(b, "response_format")) {
    const json& f = b["response_format"];
    if (!f.is_object() || !f.contains("type") || !f["type"].is_string())
      bad("response_format", "'response_format' must be an object with a 'type'");
    if (f["type"] != "text") bad("response_format", "only response_format type 'text' is supported");
  }
  if (present(b, "logprobs")) r.params.logprobs = boolean(b, "logprobs");
  if (present(b, "top_logprobs")) {
    r.params.top_logprobs = uint32_t(integer(b, "top_logprobs", 0, 20));
    if (!r.params.logprobs) bad("top_logprobs", "'top_logprobs' needs 'logprobs': true");
  }
  parse_common(b, r, d);
  return r;
}

ParsedRequest parse_completion_request(const json& b, const RequestDefaults& d) {
  ParsedRequest r;
  r.chat = false;
  if (!b.contains("prompt")) bad("prompt", "'prompt' is required");
  const json& p = b["prompt"];
  // A string, or token ids (OpenAI's array of integers), or a list of one of either.
  auto ids_of = [&](const json& a) {
    std::vector<int32_t> ids;
    for (const json& t : a) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() > INT32_MAX)
        bad("prompt", "a token-id prompt must hold non-negative integer ids");
      ids.push_back(int32_t(t.get<int64_t>()));
    }
    return ids;
  };
  const bool one_of_many = p.is_array() && p.size() == 1 && (p[0].is_string() || p[0].is_array());
  const json& q = one_of_many ? p[0] : p;
  if (p.is_array() && p.size() > 1 && (p[0].is_string() || p[0].is_array())) {
    bad("prompt", "only one prompt per request is supported");
  } else if (q.is_string()) {
    r.prompt = q.get<std::string>();
  } else if (q.is_array() && !q.empty() && q[0].is_number()) {
    r.prompt_ids = ids_of(q);
  } else {
    bad("prompt", "'prompt' must be a string or an array of token ids");
  }
  if (present(b, "suffix")) bad("suffix", "'suffix' is not supported");
  if (present(b, "echo")) r.echo = boolean(b, "echo");
  if (present(b, "logprobs")) {
    r.params.top_logprobs = uint32_t(integer(b, "logprobs", 0, 5));
    r.params.logprobs = true;
  }
  parse_common(b, r, d);
  return r;
}

}  // namespace wgllm::server
