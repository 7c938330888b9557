// Perplexity of a token sequence under a model, two ways:
//   - perplexity(): one window from position 0, every token after the first scored (as
//     transformers' `loss` on one window);
//   - perplexity_chunks(): llama.cpp's llama-perplexity method (tools/perplexity/perplexity.cpp,
//     perplexity(), llama.cpp as vendored in llama-cpp-python 0.3.36), so the two numbers are
//     directly comparable: the file's tokens (BOS first when the tokenizer adds one) cut into
//     n_chunk = floor(N / n_ctx) chunks of n_ctx tokens (at least 2 * n_ctx tokens needed), each
//     chunk a new sequence (KV cleared) whose first token is replaced by BOS when the model adds
//     one, each chunk one batched prefill; in chunk c the logits at positions
//     first = n_ctx / 2 .. n_ctx - 2 score the next token (n_ctx - first - 1 per chunk). Over all
//     scored tokens: mean NLL, PPL = exp(mean), and the standard error of PPL as llama.cpp prints
//     it: ppl * sqrt((E[nll^2] - E[nll]^2) / (count - 1)).
// The NLL of each position is computed where the logits are (Model::forward_nll: on the device
// for WebGPU) and accumulated in double on the host.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "models/model.h"

namespace wgllm {

struct PerplexityResult {
  double mean_nll = 0;    // mean negative log-likelihood, nats per scored token
  double ppl = 0;         // exp(mean_nll)
  double ppl_stderr = 0;  // standard error of ppl (llama.cpp's "+/-"); 0 for fewer than 2 tokens
  uint64_t scored = 0;    // tokens scored
  uint32_t chunks = 0;    // chunks evaluated (perplexity_chunks; 1 for perplexity())
  uint32_t n_ctx = 0;     // tokens per chunk (the window length for perplexity())
  std::vector<double> chunk_ppl;  // perplexity_chunks: running PPL after each chunk (llama.cpp's [i]x)
  std::vector<double> chunk_nll;  // perplexity_chunks: mean NLL of each chunk's scored tokens (paired
                                  // comparisons of two runs over the same chunks)
};

/// mean, PPL and its standard error from the sum and the sum of squares of `count` NLLs (llama.cpp:
/// nll /= count; nll2 /= count; nll2 -= nll^2; stderr = sqrt(nll2 / (count - 1)) * ppl, 0 when
/// that variance is <= 0 or count < 2).
PerplexityResult perplexity_stats(double sum, double sum2, uint64_t count);

/// Scores ids[1..N-1], each given all earlier ids, in one window starting at position 0 of a new
/// sequence (no BOS is added: put it in ids if the model wants one), through Model::forward_nll.
/// progress(done, total) is called once at the end when given. Throws wgllm::Error for fewer than
/// 2 ids or more than the model's context length, and whatever the forward throws.
PerplexityResult perplexity(Model& m, std::span<const int32_t> ids,
                            const std::function<void(uint32_t, uint32_t)>& progress = {});

struct PerplexityOptions {
  uint32_t n_ctx = 512;     // tokens per chunk (llama-perplexity -c; llama.cpp's default is 512)
  int64_t max_chunks = -1;  // evaluate at most this many chunks (--chunks; < 0: all)
  int32_t bos = -1;         // >= 0: the first token of every chunk is replaced by this id (add_bos)
  /// Tokens per forward within a chunk (llama-perplexity -ub): 0 = the whole chunk in one call
  /// (the model splits it into its prefill chunks); 1..8 run every position through the decode
  /// kernels (forwards of <= 8 tokens), so e.g. --matvec-int8's effect on quality is scored.
  uint32_t ubatch = 0;
};

/// Positions of one chunk under llama.cpp's method.
struct PerplexityPlan {
  uint32_t n_chunks = 0;  // chunks evaluated
  uint32_t n_ctx = 0;     // tokens per chunk
  uint32_t first = 0;     // first scored position in a chunk (n_ctx / 2)
  uint64_t scored() const { return uint64_t(n_chunks) * (n_ctx - first - 1); }
};
/// The plan for n_tokens tokens. Throws wgllm::Error when n_ctx < 4 or n_tokens < 2 * n_ctx
/// ("you need at least 2*n_ctx tokens", as llama.cpp) or max_chunks == 0.
PerplexityPlan perplexity_plan(uint64_t n_tokens, const PerplexityOptions& o);

/// The ids and targets of chunk c (tokens[c * n_ctx ...], the first replaced by o.bos when >= 0;
/// targets[t] = tokens[c * n_ctx + t + 1] for first <= t <= n_ctx - 2, -1 elsewhere).
void perplexity_chunk(std::span<const int32_t> tokens, const PerplexityPlan& p, const PerplexityOptions& o,
                      uint32_t c, std::vector<int32_t>* ids, std::vector<int32_t>* targets);

/// llama.cpp's llama-perplexity over `tokens` (the whole file, tokenized with BOS when the model
/// adds one; see above). Each chunk is a new sequence of n_ctx positions (the model's forward
/// splits it into prefill chunks, or o.ubatch tokens per forward). progress(chunks done, n_chunks, running ppl) after each chunk.
/// Throws as perplexity_plan(), for n_ctx beyond the model's context, and whatever the forward
/// throws.
PerplexityResult perplexity_chunks(Model& m, std::span<const int32_t> tokens, const PerplexityOptions& o,
                                   const std::function<void(uint32_t, uint32_t, double)>& progress = {});

}  // namespace wgllm
