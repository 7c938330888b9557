#include "runtime/warmup.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "core/error.h"

namespace wgllm {
namespace {
bool is_kv_blob(const std::string& n) {
  return n.size() > 2 && (n.compare(n.size() - 2, 2, ".k") == 0 || n.compare(n.size() - 2, 2, ".v") == 0);
}
}  // namespace

double warm_up(Model& m) {
  if (m.backend_name() == "cpu") return 0;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<float> logits;
  const std::vector<int32_t> two(2, 0);
  const std::span<const int32_t> one(two.data(), 1);
  auto seq = m.new_sequence(256);
  m.forward_argmax(*seq, two);   // prefill near position 0: no key split
  // A prefill of more than 8 tokens: the tiled prefill matmul (kernels/matmul_tiled.h).
  const std::vector<int32_t> nine(9, 0);
  m.forward_argmax(*seq, nine);
  m.forward(*seq, one, &logits);  // decode near position 0, logits head
  // Jump to a far position without computing it (the scratch sequence's values are irrelevant):
  // KV rows past the 3 real ones are zeros; recurrent states stay as they are.
  const uint32_t far = std::min<uint32_t>(150, seq->context_length() > 3 ? seq->context_length() - 3 : 0);
  if (far > seq->n_past()) {
    std::vector<StateBlob> blobs;
    try {
      blobs = seq->export_state();
    } catch (const Error&) {
      blobs.clear();  // a model without state export: the split variants compile at first use
    }
    if (!blobs.empty()) {
      const uint32_t n = seq->n_past();
      for (auto& b : blobs)
        if (is_kv_blob(b.name)) b.data.resize(b.data.size() / n * far, 0);
      seq->import_state(far, blobs);
      m.forward_argmax(*seq, two);   // prefill past 64 keys: tiled attention with key split + combine
      m.forward(*seq, one, &logits);  // decode past 128 keys: per-row attention with key split
    }
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace wgllm
