// GPT-2 byte <-> unicode mapping. There is no packaged C/C++ library for this 256-entry table;
// it is defined by openai/gpt-2 src/encoder.py bytes_to_unicode (also HF tokenizers
// src/pre_tokenizers/byte_level.rs, llama.cpp unicode.cpp unicode_byte_to_utf8_map).
#include <array>
#include <string>
#include <unordered_map>

#include "tokenizer/tokenizer_impl.h"

namespace wgllm::tok {
namespace {

std::string utf8_of(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else if (cp < 0x800) {
    s += char(0xC0 | (cp >> 6));
    s += char(0x80 | (cp & 0x3F));
  } else {  // the table only uses code points < U+0144
    s += char(0xE0 | (cp >> 12));
    s += char(0x80 | ((cp >> 6) & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

struct Tables {
  std::array<std::string, 256> to_unicode;
  std::unordered_map<std::string, uint8_t> from_unicode;
  Tables() {
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      uint32_t cp = printable(b) ? uint32_t(b) : uint32_t(256 + n++);
      to_unicode[b] = utf8_of(cp);
      from_unicode.emplace(to_unicode[b], uint8_t(b));
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

const std::string& byte_to_unicode(uint8_t b) { return tables().to_unicode[b]; }

std::string byte_level_decode(std::string_view s) {
  const auto& from = tables().from_unicode;
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 1;
    if (i + len > s.size()) len = 1;
    std::string ch(s.substr(i, len));
    auto it = from.find(ch);
    if (it != from.end()) {
      out += char(it->second);
    } else {
      out += ch;
    }
    i += len;
  }
  return out;
}

}  // namespace wgllm::tok
