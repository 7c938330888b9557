// libFuzzer target: safetensors parsing from memory and dequantization of every F32/F16/BF16
// tensor. Any input must give a SafetensorsFile or a wgllm::Error, never a crash.
// Build: make fuzz; run: build-fuzz/fuzz/fuzz_safetensors fuzz/corpus/safetensors -max_total_time=60
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "formats/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto f = wgllm::SafetensorsFile::from_memory(data, size, "fuzz.safetensors");
    std::vector<float> v;
    for (const auto& t : f->tensors()) {
      if (!t.supported() || t.n_elements() > (1u << 22)) continue;
      v.resize(t.n_elements());
      wgllm::dequantize(t.type, t.data, v.data(), t.n_elements());
    }
    for (const auto& [k, s] : f->metadata()) (void)s.size();
  } catch (const wgllm::Error&) {
  }
  return 0;
}
