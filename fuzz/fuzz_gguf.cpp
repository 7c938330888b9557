// libFuzzer target: GGUF parsing from memory, then every metadata getter and the dequantization of
// every supported tensor. Any input must give a GgufFile or a wgllm::Error, never a crash.
// Build: make fuzz; run: build-fuzz/fuzz/fuzz_gguf fuzz/corpus/gguf -max_total_time=60
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "formats/gguf.h"
#include "formats/tensor_store.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    auto f = wgllm::GgufFile::from_memory(data, size, "fuzz.gguf");
    for (const auto& [k, v] : f->metadata()) {
      try { (void)f->get_u64(k); } catch (const wgllm::Error&) {}
      try { (void)f->get_i64(k); } catch (const wgllm::Error&) {}
      try { (void)f->get_f64(k); } catch (const wgllm::Error&) {}
      try { (void)f->get_str(k); } catch (const wgllm::Error&) {}
      try { (void)f->get_int_array(k); } catch (const wgllm::Error&) {}
    }
    wgllm::TensorStore store(*f);
    for (const auto& name : store.names()) {
      const wgllm::TensorRef r = store.get(name);
      if (!wgllm::dtype_supported(r.type) || r.n_elements() > (1u << 22)) continue;
      std::vector<float> v = wgllm::dequantize_tensor(r);
      volatile float sink = v.empty() ? 0.f : v.back();
      (void)sink;
    }
  } catch (const wgllm::Error&) {
  }
  return 0;
}
