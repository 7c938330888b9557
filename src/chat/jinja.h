// A compact Jinja2-subset interpreter for model chat templates.
//
// Why a hand-written interpreter: models ship their prompt format as a Jinja2 template
// (GGUF `tokenizer.chat_template`, HF `tokenizer_config.json` `chat_template`), and transformers'
// apply_chat_template is the reference rendering. Debian packages no C++ Jinja2 implementation, the
// engine must not embed Python, and chat templates use a small, stable part of the language. So this
// module implements exactly that part with jinja2 3.1 semantics as configured by transformers
// (utils/chat_template_utils.py: ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
// extensions=[loopcontrols, AssistantTracker]), filter `tojson` = json.dumps(ensure_ascii=False, ...),
// globals `raise_exception` and `strftime_now`), aiming at byte-identical output.
//
// Pipeline: jinja_lexer (whitespace control) -> jinja_parser (AST, jinja_ast.h) -> jinja_eval
// (scopes, statements, operators) with jinja_builtins / jinja_filters / jinja_methods.
//
// Not supported: template inheritance/includes/imports (extends, block, include, import), `recursive`
// loops, *args/**kwargs in calls, macro varargs/kwargs, autoescaping, line statements, custom
// delimiters, i18n, `{% do %}`, filters outside the documented list (see jinja_filters.cpp).
//
// Limits. A chat template is untrusted input (it ships inside a model file), so parsing and
// rendering are bounded whatever the template does; exceeding a limit throws wgllm::Error
// ("chat template error at LINE:COL: ..." or "chat template syntax error at ..."):
//   - steps: a render may take at most kMaxRenderSteps steps, a step being one statement or
//     expression evaluation (a for-loop iteration counts 4), plus one step per
//     kRenderBytesPerStep bytes of every string it produces or copies (and of every list a
//     literal, `+` or `*` builds). The model templates of
//     tests/fixtures/chat need about 60-120 steps per 200-byte message (qwen3: an 8000-message
//     conversation, ~400k tokens, fits); an endless-looking loop (nested range(100000)) or a
//     doubling string stops with "exceeded the render step limit" after ~1 s instead of hanging;
//   - nesting: at most kMaxRenderNesting nested evaluation frames (expressions, statements,
//     macro calls) while rendering, and kMaxParseNesting nested constructs while parsing (both
//     bound the C++ stack), and 256 nested calls (Python's "maximum recursion depth exceeded");
//   - size: no single string or list repetition ('x' * n) above kMaxRenderValueBytes; range()
//     is capped at 100000 items like jinja2's sandbox; 64-bit integer overflow is an error
//     (Python integers are unbounded).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/jinja_ast.h"
#include "chat/jinja_value.h"

namespace wgllm::jinja {

inline constexpr int64_t kMaxRenderSteps = 1'000'000;
inline constexpr int64_t kRenderBytesPerStep = 64;
inline constexpr int kMaxRenderNesting = 500;  // also bounds the browser build's 5 MB stack
inline constexpr int kMaxParseNesting = 200;
inline constexpr int64_t kMaxRenderValueBytes = 64ll << 20;

/// A parsed template; immutable and reusable for any number of renders (thread-compatible).
class Template {
 public:
  /// Throws wgllm::Error("chat template syntax error at LINE:COL: ...").
  explicit Template(const std::string& source);
  /// Renders with `context` (a dict Value) as the template's variables. Runtime errors throw
  /// wgllm::Error ("chat template error at LINE:COL: ..."); raise_exception(msg) throws
  /// wgllm::Error whose what() is exactly msg.
  std::string render(const Value& context) const;

 private:
  std::shared_ptr<const Body> body_;
};

}  // namespace wgllm::jinja

namespace wgllm {
/// One-shot helper: parse `source` and render it with the JSON object `ctx`.
std::string render_jinja(const std::string& source, const nlohmann::json& ctx);
std::string render_jinja(const std::string& source, const nlohmann::ordered_json& ctx);
}  // namespace wgllm
