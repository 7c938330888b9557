// Chat templates: renders a model's Jinja2 chat template the way transformers'
// apply_chat_template(tokenize=False) does (see jinja.h for the interpreter and its limits).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace wgllm {

namespace jinja {
class Template;
}

struct ChatMessage {
  std::string role;
  std::string content;
};  // extensible later (tool calls)

class ChatTemplate {
 public:
  /// Parses the template once; throws wgllm::Error with line:column on syntax errors.
  explicit ChatTemplate(std::string source, std::string bos_token = "", std::string eos_token = "");
  ~ChatTemplate();
  ChatTemplate(ChatTemplate&&) noexcept;
  ChatTemplate& operator=(ChatTemplate&&) noexcept;

  /// Renders messages (multi-turn, optional system message) like transformers'
  /// apply_chat_template(tokenize=False): context = {messages, tools: None, documents: None,
  /// add_generation_prompt, bos_token, eos_token (each only when non-empty, like transformers'
  /// special_tokens_map)} updated with `extra_context` (e.g. enable_thinking, tools). Throws wgllm::Error; a template's raise_exception(msg) gives what() == msg.
  std::string apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                    const nlohmann::json& extra_context = nlohmann::json::object()) const;

  /// apply() with an insertion-ordered extra context: keeps the key order of e.g. `tools` schemas,
  /// which `tojson` prints (Python dicts keep insertion order; nlohmann::json sorts keys).
  std::string apply_ordered(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                            const nlohmann::ordered_json& extra_context) const;

  /// General entry: render with an arbitrary JSON object as context (keys of nlohmann::json objects
  /// iterate sorted, which matters only for `tojson` / dict iteration; use render_ordered to keep
  /// insertion order like Python dicts).
  std::string render(const nlohmann::json& context) const;
  std::string render_ordered(const nlohmann::ordered_json& context) const;

  const std::string& source() const { return source_; }
  const std::string& bos_token() const { return bos_; }
  const std::string& eos_token() const { return eos_; }

 private:
  std::string source_, bos_, eos_;
  std::unique_ptr<jinja::Template> tmpl_;
};

/// One-shot helper: parse `source` and render it with the JSON object `ctx`.
std::string render_jinja(const std::string& source, const nlohmann::json& ctx);
std::string render_jinja(const std::string& source, const nlohmann::ordered_json& ctx);

}  // namespace wgllm
