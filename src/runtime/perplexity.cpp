#include "runtime/perplexity.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/error.h"

namespace wgllm {

PerplexityResult perplexity_stats(double sum, double sum2, uint64_t count) {
  PerplexityResult r;
  r.scored = count;
  if (count == 0) return r;
  r.mean_nll = sum / double(count);
  r.ppl = std::exp(r.mean_nll);
  const double var = sum2 / double(count) - r.mean_nll * r.mean_nll;
  if (var > 0 && count > 1) r.ppl_stderr = std::sqrt(var / double(count - 1)) * r.ppl;
  return r;
}

namespace {
std::unique_ptr<Sequence> new_sequence_of(Model& m, uint64_t n) {
  auto seq = m.new_sequence(uint32_t(std::min<uint64_t>(n, UINT32_MAX)));
  if (seq->context_length() < n)
    throw Error("perplexity: " + std::to_string(n) + " tokens exceed the context length " +
                std::to_string(seq->context_length()) + " of this model/backend");
  return seq;
}
}  // namespace

PerplexityResult perplexity(Model& m, std::span<const int32_t> ids, const std::function<void(uint32_t, uint32_t)>& progress) {
  if (ids.size() < 2) throw Error("perplexity needs at least 2 tokens, got " + std::to_string(ids.size()));
  auto seq = new_sequence_of(m, ids.size());
  const uint32_t n = uint32_t(ids.size()) - 1;
  std::vector<int32_t> targets(ids.size(), -1);
  std::copy(ids.begin() + 1, ids.end(), targets.begin());
  std::vector<float> nll;
  m.forward_nll(*seq, ids, targets, &nll);
  double sum = 0, sum2 = 0;
  for (uint32_t t = 0; t < n; ++t) {
    sum += nll[t];
    sum2 += double(nll[t]) * nll[t];
  }
  if (progress) progress(n, n);
  PerplexityResult r = perplexity_stats(sum, sum2, n);
  r.chunks = 1;
  r.n_ctx = uint32_t(ids.size());
  return r;
}

PerplexityPlan perplexity_plan(uint64_t n_tokens, const PerplexityOptions& o) {
  if (o.n_ctx < 4) throw Error("perplexity: n_ctx must be at least 4, got " + std::to_string(o.n_ctx));
  if (o.max_chunks == 0) throw Error("perplexity: --chunks must be at least 1");
  if (n_tokens < 2ull * o.n_ctx)
    throw Error("perplexity: you need at least " + std::to_string(2ull * o.n_ctx) +
                " tokens to evaluate perplexity with a context of " + std::to_string(o.n_ctx) +
                "; the file tokenizes to only " + std::to_string(n_tokens) + " tokens");
  PerplexityPlan p;
  p.n_ctx = o.n_ctx;
  p.first = o.n_ctx / 2;
  const uint64_t all = n_tokens / o.n_ctx;
  p.n_chunks = uint32_t(o.max_chunks < 0 ? all : std::min<uint64_t>(all, uint64_t(o.max_chunks)));
  return p;
}

void perplexity_chunk(std::span<const int32_t> tokens, const PerplexityPlan& p, const PerplexityOptions& o,
                      uint32_t c, std::vector<int32_t>* ids, std::vector<int32_t>* targets) {
  const uint64_t start = uint64_t(c) * p.n_ctx;
  if (c >= p.n_chunks || start + p.n_ctx > tokens.size()) throw Error("perplexity_chunk: chunk " + std::to_string(c) + " out of range");
  ids->assign(tokens.begin() + start, tokens.begin() + start + p.n_ctx);
  if (o.bos >= 0) (*ids)[0] = o.bos;
  targets->assign(p.n_ctx, -1);
  // The targets are the file's tokens (llama.cpp restores the token it replaced by BOS).
  for (uint32_t t = p.first; t + 1 < p.n_ctx; ++t) (*targets)[t] = tokens[start + t + 1];
}

PerplexityResult perplexity_chunks(Model& m, std::span<const int32_t> tokens, const PerplexityOptions& o,
                                   const std::function<void(uint32_t, uint32_t, double)>& progress) {
  const PerplexityPlan p = perplexity_plan(tokens.size(), o);
  std::vector<int32_t> ids, targets;
  std::vector<float> nll, part;
  std::vector<double> running, chunk_nll;
  double sum = 0, sum2 = 0;
  uint64_t count = 0;
  std::unique_ptr<Sequence> seq;
  for (uint32_t c = 0; c < p.n_chunks; ++c) {
    perplexity_chunk(tokens, p, o, c, &ids, &targets);
    // A fresh sequence per chunk (llama.cpp clears the KV cache): KV-only sequences are rolled
    // back to 0 (no reallocation), recurrent ones are made anew.
    const bool by_length = seq && std::all_of(seq->states().begin(), seq->states().end(),
                                              [](const auto& s) { return s->by_length(); });
    if (by_length)
      seq->truncate(0);
    else
      seq = new_sequence_of(m, p.n_ctx);
    // The chunk in forwards of o.ubatch tokens (0: one call; the model splits it into prefill chunks).
    const size_t step = o.ubatch ? o.ubatch : ids.size();
    nll.assign(ids.size(), 0.0f);
    for (size_t b = 0; b < ids.size(); b += step) {
      const size_t n = std::min(step, ids.size() - b);
      m.forward_nll(*seq, std::span<const int32_t>(ids).subspan(b, n), std::span<const int32_t>(targets).subspan(b, n), &part);
      std::copy(part.begin(), part.end(), nll.begin() + b);
    }
    double chunk_sum = 0;
    for (uint32_t t = p.first; t + 1 < p.n_ctx; ++t) {
      const double v = nll[t];
      sum += v;
      sum2 += v * v;
      chunk_sum += v;
    }
    count += p.n_ctx - p.first - 1;
    chunk_nll.push_back(chunk_sum / double(p.n_ctx - p.first - 1));
    running.push_back(std::exp(sum / double(count)));
    if (progress) progress(c + 1, p.n_chunks, running.back());
  }
  PerplexityResult r = perplexity_stats(sum, sum2, count);
  r.chunks = p.n_chunks;
  r.n_ctx = p.n_ctx;
  r.chunk_ppl = std::move(running);
  r.chunk_nll = std::move(chunk_nll);
  return r;
}

}  // namespace wgllm
