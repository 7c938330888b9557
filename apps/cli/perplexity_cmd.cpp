// wgllm perplexity -m MODEL -f TEXT [-c N_CTX] [--chunks N] [--ubatch-size N] [--json FILE]: llama.cpp's
// llama-perplexity method (runtime/perplexity.h, perplexity_chunks): the file read as
// llama-perplexity reads it (one trailing newline dropped), tokenized with BOS when the model adds
// one and special tokens as plain text, cut into chunks of n_ctx tokens (-c; default 512 as in
// llama.cpp), the second half of every chunk scored; prints llama.cpp's "Final estimate: PPL = X
// +/- Y" and one JSON line (ppl, stderr, tokens scored, seconds) on stdout; a progress bar with
// ETA on a terminal. --window N keeps the older mode: one window of the first N tokens, all scored.
#include "perplexity_cmd.h"

#include <fmt/core.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "options.h"
#include "runtime/perplexity.h"
#include "validate.h"

namespace wgllm::cli {

namespace {
std::string clock_text(double s) {
  const long t = long(s + 0.5);
  return t >= 3600 ? fmt::format("{}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60) : fmt::format("{}:{:02}", t / 60, t % 60);
}
}  // namespace

std::function<int()> add_perplexity(CLI::App& app) {
  struct State {
    CommonOptions o;
    std::string file, json;
    uint32_t window = 0, ctx_size = 0, ubatch = 0;
    int64_t chunks = -1;
  };
  auto s = std::make_shared<State>();
  auto* cmd = app.add_subcommand("perplexity", "perplexity of a text file under the model (llama-perplexity's method)");
  add_common(*cmd, s->o, GenFlags::None);
  cmd->get_option("--context")->description("tokens per chunk, n_ctx (llama-perplexity -c; default 512 here)")->default_str("512");
  cmd->add_option("-f,--file", s->file, "text file (UTF-8)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--ctx-size,--ctx", s->ctx_size, "same as -c (llama.cpp's long name)")
      ->transform(integer(4, kMaxTokens))
      ->excludes(cmd->get_option("--context"));
  cmd->add_option("--chunks", s->chunks, "evaluate at most this many chunks (default: all)")->transform(integer(1, 1u << 30));
  cmd->add_option("--ubatch-size", s->ubatch,
                  "tokens per forward within a chunk (llama-perplexity -ub; default: the whole chunk); 1..8 score the "
                  "decode kernels (e.g. --matvec-int8)")
      ->transform(integer(1, kMaxTokens));
  cmd->add_option("--window", s->window, "older mode: score the first N tokens in one window")->transform(integer(2, 1u << 20));
  cmd->add_option("--json", s->json, "also write the result as JSON to this file")->check(OutputFile);
  return [s, cmd]() -> int {
    if (!*cmd) return -1;
    std::string text = read_file(s->file);
    if (!text.empty() && text.back() == '\n') text.pop_back();  // as llama.cpp's -f
    CommonOptions o = s->o;
    const bool window = s->window > 0;
    const uint32_t n_ctx = s->ctx_size ? s->ctx_size : cmd->get_option("--context")->count() ? o.context : 512;
    if (!window && n_ctx < 4) {  // a command-line error (exit 2), found before the load
      fmt::print(stderr, "wgllm perplexity: error: -c must be at least 4 (tokens per chunk), got {}\n", n_ctx);
      return 2;
    }
    o.context = window ? std::max(o.context, s->window) : n_ctx;
    Loaded l = load(o);
    l.seq.reset();  // perplexity makes its own sequences
    std::vector<int32_t> ids = l.tok->encode_prompt(text, /*parse_special=*/false);
    const auto t0 = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
    PerplexityResult r;
    if (window) {
      if (ids.size() > s->window) ids.resize(s->window);
      r = perplexity(*l.model, ids);
    } else {
      PerplexityOptions po;
      po.n_ctx = n_ctx;
      po.max_chunks = s->chunks;
      po.bos = l.tok->add_bos() ? l.tok->bos_id() : -1;
      po.ubatch = s->ubatch;
      const PerplexityPlan plan = perplexity_plan(ids.size(), po);
      fmt::print(stderr, "[wgllm] perplexity: {} tokens, {} chunks of n_ctx={}, {} tokens scored\n", ids.size(),
                 plan.n_chunks, n_ctx, plan.scored());
      const bool tty = isatty(STDERR_FILENO) != 0;
      r = perplexity_chunks(*l.model, ids, po, [&](uint32_t done, uint32_t total, double ppl) {
        const double sec = elapsed(), eta = sec / done * (total - done);
        if (tty) {
          const int w = 30, fill = int(double(w) * done / total);
          fmt::print(stderr, "\r\033[K[{}{}] {}/{} chunks  ppl {:.4f}  {} elapsed  ETA {}", std::string(fill, '#'),
                     std::string(w - fill, '.'), done, total, ppl, clock_text(sec), clock_text(eta));
          if (done == total) fmt::print(stderr, "\n");
        } else if (done == 1 || done == total || done % 16 == 0) {
          fmt::print(stderr, "[{}]{:.4f} ({} s, ETA {})\n", done, ppl, clock_text(sec), clock_text(eta));
        }
      });
    }
    const double sec = elapsed();
    fmt::print("[{}] {} tokens scored: mean NLL {:.6f} nats, perplexity {:.4f} ({:.1f} s)\n", l.model->backend_name(),
               r.scored, r.mean_nll, r.ppl, sec);
    if (!window) fmt::print("Final estimate: PPL = {:.4f} +/- {:.5f}\n", r.ppl, r.ppl_stderr);
    nlohmann::json j{{"model", o.model.empty() ? default_model_path() : o.model},
                     {"backend", l.model->backend_name()},
                     {"file", s->file},
                     {"method", window ? "window" : "llama.cpp chunks"},
                     {"n_ctx", r.n_ctx},
                     {"chunks", r.chunks},
                     {"tokens", ids.size()},
                     {"tokens_scored", r.scored},
                     {"mean_nll", r.mean_nll},
                     {"ppl", r.ppl},
                     {"perplexity", r.ppl},
                     {"stderr", r.ppl_stderr},
                     {"ubatch", s->ubatch},
                     {"sparse_attn", o.switches.kernels.sparse_attn},
                     {"seconds", sec},
                     {"tokens_per_second", sec > 0 ? double(r.chunks) * r.n_ctx / sec : 0.0},
                     {"chunk_nll", r.chunk_nll}};
    fmt::print("{}\n", j.dump());
    if (!s->json.empty()) write_file(s->json, j.dump(1) + "\n");
    return 0;
  };
}

}  // namespace wgllm::cli
