// libFuzzer target: GGUF tokenizer.* metadata (tokenizer.ggml.model/pre/tokens/scores/token_type/
// merges, special ids, add_bos) -> Tokenizer::from_gguf, which then encodes and decodes fixed texts
// (tokenizer_exercise.h). Any input must give a Tokenizer or a wgllm::Error, never a crash.
// Seeds: fuzz/make_seeds.py (GGUF files holding only the tokenizer of the repo's fixtures).
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "formats/gguf.h"
#include "tokenizer_exercise.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto f = wgllm::GgufFile::from_memory(data, size, "fuzz.gguf");
    auto tok = wgllm::Tokenizer::from_gguf(*f);
    wgllm::fuzz::exercise_tokenizer(*tok);
  } catch (const wgllm::Error&) {
  }
  return 0;
}
