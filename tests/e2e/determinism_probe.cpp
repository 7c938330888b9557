// determinism_probe MODEL [--sparse-attn THRESHOLD]: loads MODEL on WebGPU (context 256), runs a
// 40-token prefill and 8 greedy decode steps, and prints one line
//   tokens=<ids> logits_sha256=<digest of every logits vector's bytes>
// tests/e2e/determinism_test runs it twice in separate processes and compares the lines.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "core/sha256.h"
#include "models/model.h"
#include "models/source.h"

using namespace wgllm;

int main(int argc, char** argv) {
  if (argc != 2 && argc != 4) {
    std::fprintf(stderr, "usage: determinism_probe MODEL [--sparse-attn THRESHOLD]\n");
    return 2;
  }
  try {
    auto src = ModelSource::open(argv[1]);
    ModelOptions o;
    o.context_length = 256;
    if (argc == 4) {  // the sparse path past a small threshold, small blocks so several are skipped
      o.kernels.sparse_attn = true;
      o.kernels.sparse_threshold = uint32_t(std::atoi(argv[3]));
      o.kernels.sparse_block = 4;
      o.kernels.sparse_top_k = 2;
      o.kernels.sparse_window = 2;
    }
    auto m = create_model(*src, o);
    const uint32_t vocab = src->config.vocab;
    std::vector<int32_t> prompt;
    for (int i = 0; i < 40; ++i) prompt.push_back(int32_t((i * 131 + 7) % std::min<uint32_t>(vocab, 300)));
    auto seq = m->new_sequence();
    std::vector<float> l, all;
    m->forward(*seq, prompt, &l);
    std::string tokens;
    for (int i = 0; i < 8; ++i) {
      all.insert(all.end(), l.begin(), l.end());
      int32_t t = 0;
      for (size_t j = 1; j < l.size(); ++j)
        if (l[j] > l[size_t(t)]) t = int32_t(j);
      tokens += (tokens.empty() ? "" : ",") + std::to_string(t);
      m->forward(*seq, std::span<const int32_t>(&t, 1), &l);
    }
    all.insert(all.end(), l.begin(), l.end());
    std::printf("tokens=%s logits_sha256=%s\n", tokens.c_str(), sha256_hex(all.data(), all.size() * 4).c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "determinism_probe: %s\n", e.what());
    return 1;
  }
  return 0;
}
