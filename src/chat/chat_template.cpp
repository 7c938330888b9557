#include "chat/chat_template.h"

#include "chat/jinja.h"

namespace wgllm {

ChatTemplate::ChatTemplate(std::string source, std::string bos_token, std::string eos_token)
    : source_(std::move(source)),
      bos_(std::move(bos_token)),
      eos_(std::move(eos_token)),
      tmpl_(std::make_unique<jinja::Template>(source_)) {}

ChatTemplate::~ChatTemplate() = default;
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate& ChatTemplate::operator=(ChatTemplate&&) noexcept = default;

std::string ChatTemplate::apply(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                const nlohmann::json& extra_context) const {
  return apply_ordered(messages, add_generation_prompt, nlohmann::ordered_json::parse(extra_context.dump()));
}

std::string ChatTemplate::apply_ordered(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                        const nlohmann::ordered_json& extra_context) const {
  if (!extra_context.is_object()) throw Error("chat template extra_context must be a JSON object");
  // transformers render_jinja_template: render(messages=..., tools=..., documents=...,
  // add_generation_prompt=..., **special_tokens_map, **kwargs).
  nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  auto msgs = nlohmann::ordered_json::array();
  for (const auto& m : messages) msgs.push_back({{"role", m.role}, {"content", m.content}});
  ctx["messages"] = std::move(msgs);
  ctx["tools"] = nullptr;
  ctx["documents"] = nullptr;
  ctx["add_generation_prompt"] = add_generation_prompt;
  // special_tokens_map only holds tokens that are set: an empty token stays undefined.
  if (!bos_.empty()) ctx["bos_token"] = bos_;
  if (!eos_.empty()) ctx["eos_token"] = eos_;
  for (auto it = extra_context.begin(); it != extra_context.end(); ++it)
    ctx[it.key()] = it.value();
  return render_ordered(ctx);
}

std::string ChatTemplate::render(const nlohmann::json& context) const {
  return tmpl_->render(jinja::from_json(context));
}

std::string ChatTemplate::render_ordered(const nlohmann::ordered_json& context) const {
  return tmpl_->render(jinja::from_json(context));
}

}  // namespace wgllm
