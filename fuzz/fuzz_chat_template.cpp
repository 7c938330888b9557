// libFuzzer target: a chat template (the input bytes) parsed by ChatTemplate and rendered for a
// fixed conversation (system, user, assistant, user; bos/eos set; inputs of odd length render with
// add_generation_prompt and an extra context with enable_thinking and a tools list). Any input must render or give a
// wgllm::Error (syntax error, runtime error, raise_exception, or the interpreter's step, depth and
// size limits, see src/chat/jinja.h), never a crash or a hang.
// Seeds: fuzz/make_seeds.py (the repo's chat template fixtures) and fuzz/corpus/chat_template.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<wgllm::ChatMessage> kMessages = {
      {"system", "You are a helpful assistant."},
      {"user", "What is the capital of France?"},
      {"assistant", "<think>\nEasy.\n</think>\n\nParis."},
      {"user", "And of Italy? caf\xc3\xa9 \xf0\x9f\x98\x80"},
  };
  static const nlohmann::json kExtra = {
      {"enable_thinking", false},
      {"tools", nlohmann::json::array({{{"type", "function"},
                                        {"function", {{"name", "get_time"},
                                                      {"description", "Current time"},
                                                      {"parameters", {{"type", "object"}}}}}}})}};
  try {
    wgllm::ChatTemplate tmpl(std::string(reinterpret_cast<const char*>(data), size), "<s>", "</s>");
    const bool gen = size % 2;  // one render per input (a runaway one takes the whole step budget)
    (void)tmpl.apply(kMessages, gen, gen ? kExtra : nlohmann::json::object());
  } catch (const wgllm::Error&) {
  }
  return 0;
}
