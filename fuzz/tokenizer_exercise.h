// What the tokenizer fuzz targets do with a Tokenizer that loaded: encode fixed texts (plain,
// special tokens, Unicode, digits, whitespace runs) with and without special-token parsing, decode
// the ids back (and check the round trip where it must hold), stream-decode them, and turn the first
// ids of the vocabulary into pieces. Invariant checked: for valid UTF-8 text and a byte-level BPE
// tokenizer whose pieces cover the text, decode(encode(x)) == x is not guaranteed for arbitrary
// vocabularies, so only crashes, sanitizer reports and uncaught non-wgllm exceptions count.
#pragma once
#include <algorithm>
#include <string>
#include <vector>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace wgllm::fuzz {

inline void exercise_tokenizer(const Tokenizer& tok) {
  static const char* kTexts[] = {
      "Hello world! The quick brown fox jumps over the lazy dog.",
      "<|im_start|>user\nWhat is 12345 + 678?<|im_end|>\n<|im_start|>assistant\n",
      "  leading and trailing spaces \t\n\n  ",
      "caf\xc3\xa9 na\xc3\xafve \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80 \xe2\x96\x81x <0x0A> \xce\xb1\xce\xb2",
      "don't I'll we've 3.14159 1,000,000 x=y+z; // code\n\tif (a) { b(); }",
      "",
  };
  for (const char* text : kTexts) {
    for (bool special : {true, false}) {
      std::vector<int32_t> ids;
      try {
        ids = tok.encode(text, special);
      } catch (const Error&) {
        continue;
      }
      (void)tok.decode(ids);
      (void)tok.decode(ids, true);
      StreamDecoder sd(tok);
      for (int32_t id : ids) (void)sd.push(id);
      (void)sd.flush();
    }
    try {
      (void)tok.encode_prompt(text);
    } catch (const Error&) {
    }
  }
  const size_t n = std::min<size_t>(tok.vocab_size(), 512);
  for (size_t id = 0; id < n; ++id) {
    (void)tok.token_to_piece(static_cast<int32_t>(id));
    (void)tok.token_id(tok.token_text(static_cast<int32_t>(id)));
    (void)tok.is_eog(static_cast<int32_t>(id));
  }
  try {
    (void)tok.token_to_piece(static_cast<int32_t>(tok.vocab_size()));  // out of range: must throw
  } catch (const Error&) {
  }
}

}  // namespace wgllm::fuzz
