// Pre-tokenization (PCRE2 regex splitting), NFC normalization (utf8proc) and the llama.cpp
// pre-tokenizer presets selected by GGUF tokenizer.ggml.pre.
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include <cstdlib>
#include <memory>

#include "core/error.h"
#include "tokenizer/tokenizer_impl.h"

namespace wgllm::tok {

// HF tokenizers src/pre_tokenizers/byte_level.rs (GPT-2 encoder.py pattern).
const char* const kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

struct MatchDataDeleter {
  void operator()(pcre2_match_data* m) const { pcre2_match_data_free(m); }
};

// One match block per thread: only the overall match (ovector pair 0) is used.
pcre2_match_data* thread_match_data() {
  thread_local std::unique_ptr<pcre2_match_data, MatchDataDeleter> md(
      pcre2_match_data_create(1, nullptr));
  return md.get();
}

size_t utf8_char_len(unsigned char c) {
  return c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : 4;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof buf);
  return reinterpret_cast<const char*>(buf);
}

}  // namespace

Regex::Regex(const std::string& pattern) : pattern_(pattern) {
  int err = 0;
  PCRE2_SIZE off = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &err, &off, nullptr);
  if (!code) {
    throw Error("tokenizer: cannot compile pre-tokenizer regex /" + pattern + "/ at offset " +
                std::to_string(off) + ": " + pcre2_message(err));
  }
  // JIT is optional (not built on every platform); the interpreter gives the same results.
  (void)pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
  code_ = code;
}

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

void Regex::split(std::string_view text, std::vector<std::string_view>& out) const {
  auto* code = static_cast<pcre2_code*>(code_);
  pcre2_match_data* md = thread_match_data();
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0, gap = 0;
  while (pos < text.size()) {
    int rc = pcre2_match(code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) throw Error("tokenizer: regex /" + pattern_ + "/ failed: " + pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    size_t b = ov[0], e = ov[1];
    if (e == b) {  // empty match: skip one character, produce nothing
      pos = b + utf8_char_len(static_cast<unsigned char>(text[b]));
      continue;
    }
    if (b > gap) out.push_back(text.substr(gap, b - gap));
    out.push_back(text.substr(b, e - b));
    pos = gap = e;
  }
  if (gap < text.size()) out.push_back(text.substr(gap));
}

void pre_tokenize(const std::vector<std::unique_ptr<Regex>>& regexes, std::string_view text,
                  std::vector<std::string_view>& out) {
  out.clear();
  if (text.empty()) return;
  if (regexes.empty()) {
    out.push_back(text);
    return;
  }
  regexes[0]->split(text, out);
  std::vector<std::string_view> next;
  for (size_t r = 1; r < regexes.size(); ++r) {
    next.clear();
    for (std::string_view p : out) regexes[r]->split(p, next);
    out.swap(next);
  }
}

std::string nfc(std::string_view text) {
  bool ascii = true;
  for (char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) {
      ascii = false;
      break;
    }
  }
  if (ascii) return std::string(text);
  utf8proc_uint8_t* dst = nullptr;
  utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                    static_cast<utf8proc_ssize_t>(text.size()), &dst,
                                    static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) throw Error(std::string("tokenizer: NFC normalization failed: ") + utf8proc_errmsg(n));
  std::string out(reinterpret_cast<const char*>(dst), static_cast<size_t>(n));
  std::free(dst);
  return out;
}

std::vector<std::string> gguf_pre_regexes(const std::string& pre, bool* ignore_merges,
                                          bool* add_bos_default) {
  // Patterns as in llama.cpp src/llama-vocab.cpp (llm_tokenizer_bpe constructor). llama.cpp's
  // splitter keeps unmatched spans as pieces, as Regex::split does, so its patterns (which
  // omit GPT-2's trailing `|\s+`) give identical pieces here.
  static const char* gpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))";
  static const char* llama3 =
      R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  static const char* qwen2 =
      R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  *ignore_merges = false;
  *add_bos_default = false;
  auto is = [&](std::initializer_list<const char*> names) {
    for (const char* n : names)
      if (pre == n) return true;
    return false;
  };
  if (pre.empty() || pre == "default") {
    return {R"([\p{P}\$\+<=>\^~\|]+)", gpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"};
  }
  if (is({"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0",
          "lfm2"})) {
    *ignore_merges = true;
    *add_bos_default = true;
    return {llama3};
  }
  if (is({"dbrx", "smaug-bpe"})) return {llama3};
  if (is({"qwen2", "stablelm2", "deepseek-r1-qwen", "hunyuan"})) return {qwen2};
  if (is({"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"})) {
    return {R"(\p{N})", gpt2};
  }
  if (is({"gpt2", "gpt-2", "phi-2", "jina-es", "jina-de", "jina-v2-es", "jina-v2-de",
          "jina-v2-code", "mpt", "olmo", "jais", "trillion"})) {
    return {gpt2};
  }
  throw Error("tokenizer: unsupported tokenizer.ggml.pre '" + pre +
              "' (supported: default, gpt2, llama3/llama-bpe, qwen2, smollm and aliases)");
}

}  // namespace wgllm::tok
