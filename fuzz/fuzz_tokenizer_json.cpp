// libFuzzer target: a HuggingFace tokenizer.json (the input bytes, written to a scratch file because
// Tokenizer::from_hf_json takes a path) loaded into a Tokenizer, which then encodes and decodes fixed
// texts (tokenizer_exercise.h). Any input must give a Tokenizer or a wgllm::Error, never a crash.
// Seeds: fuzz/make_seeds.py (the repo's tokenizer.json fixtures).
#include <cstddef>
#include <cstdint>

#include "core/error.h"
#include "fuzz_util.h"
#include "tokenizer_exercise.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = wgllm::fuzz::write_scratch("tokenizer.json", data, size);
  try {
    auto tok = wgllm::Tokenizer::from_hf_json(path);
    wgllm::fuzz::exercise_tokenizer(*tok);
  } catch (const wgllm::Error&) {
  }
  return 0;
}
