// llama-greedy: greedy continuation with llama.cpp (CPU), for the agreement test
// (tests/e2e/llamacpp_agreement_test.cpp). Built by tools/peers/build_llamacpp_cpu.sh against the
// llama.cpp of the llama-cpp-python 0.3.36 sdist.
//   llama-greedy MODEL N_GEN PROMPT_FILE
// The prompt is tokenized with add_special = true (BOS when the model adds one), parse_special =
// false; it is prefilled in one batch, then N_GEN tokens are chosen by argmax (lowest id on ties),
// one llama_decode each. Prints one JSON object on stdout:
//   {"prompt": [ids], "tokens": [ids], "margin": [top-1 minus top-2 logit at each step]}
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "llama.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s MODEL N_GEN PROMPT_FILE\n", argv[0]);
    return 2;
  }
  const int n_gen = std::stoi(argv[2]);
  std::ifstream f(argv[3], std::ios::binary);
  const std::string prompt((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  llama_log_set([](ggml_log_level, const char*, void*) {}, nullptr);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* model = llama_model_load_from_file(argv[1], mp);
  if (!model) {
    std::fprintf(stderr, "cannot load %s\n", argv[1]);
    return 1;
  }
  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int n_prompt = -llama_tokenize(vocab, prompt.data(), int32_t(prompt.size()), nullptr, 0, true, false);
  std::vector<llama_token> ids(size_t(n_prompt > 0 ? n_prompt : 0));
  if (n_prompt <= 0 || llama_tokenize(vocab, prompt.data(), int32_t(prompt.size()), ids.data(), n_prompt, true, false) < 0) {
    std::fprintf(stderr, "tokenization failed\n");
    return 1;
  }
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = uint32_t(n_prompt + n_gen + 8);
  cp.n_batch = uint32_t(n_prompt);
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) return 1;
  const int n_vocab = llama_vocab_n_tokens(vocab);
  std::vector<llama_token> batch_ids = ids, out;
  std::vector<float> margins;
  for (int i = 0; i < n_gen; ++i) {
    if (llama_decode(ctx, llama_batch_get_one(batch_ids.data(), int32_t(batch_ids.size())))) {
      std::fprintf(stderr, "decode failed\n");
      return 1;
    }
    const float* l = llama_get_logits_ith(ctx, -1);
    int best = 0;
    for (int v = 1; v < n_vocab; ++v)
      if (l[v] > l[best]) best = v;
    float second = -3.4e38f;
    for (int v = 0; v < n_vocab; ++v)
      if (v != best && l[v] > second) second = l[v];
    out.push_back(best);
    margins.push_back(l[best] - second);
    batch_ids.assign(1, best);
  }
  auto list = [](const auto& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
    return s + "]";
  };
  std::printf("{\"prompt\": %s, \"tokens\": %s, \"margin\": %s}\n", list(ids).c_str(), list(out).c_str(), list(margins).c_str());
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
