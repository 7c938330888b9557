// wgllm perplexity -m MODEL -f TEXT [--window N] [--json FILE]: tokenizes the file as is (no
// chat template, BOS only if the model's tokenizer adds one), scores its first N tokens in one
// window (runtime/perplexity.h) and prints the mean NLL and perplexity.
#include "perplexity_cmd.h"

#include <fmt/core.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <memory>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "options.h"
#include "runtime/perplexity.h"
#include "validate.h"

namespace wgllm::cli {

std::function<int()> add_perplexity(CLI::App& app) {
  struct State {
    CommonOptions o;
    std::string file, json;
    uint32_t max_tokens = 512;
  };
  auto s = std::make_shared<State>();
  auto* cmd = app.add_subcommand("perplexity", "perplexity of a text file under the model (one window)");
  add_common(*cmd, s->o);
  cmd->add_option("-f,--file", s->file, "text file (UTF-8)")->required()->check(CLI::ExistingFile);
  cmd->add_option("--window", s->max_tokens, "score at most this many tokens (the window length; default 512)")->transform(integer(2, 1u << 20));
  cmd->add_option("--json", s->json, "also write the result as JSON to this file")->check(OutputFile);
  return [s, cmd]() -> int {
    if (!*cmd) return -1;
    const std::string text = read_file(s->file);
    CommonOptions o = s->o;
    o.context = std::max(o.context, s->max_tokens);
    Loaded l = load(o);
    std::vector<int32_t> ids = l.tok->encode_prompt(text);
    if (ids.size() > s->max_tokens) ids.resize(s->max_tokens);
    const auto t0 = std::chrono::steady_clock::now();
    const PerplexityResult r = perplexity(*l.model, ids);
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fmt::print("[{}] {} tokens scored: mean NLL {:.6f} nats, perplexity {:.4f} ({:.1f} s)\n", l.model->backend_name(),
               r.scored, r.mean_nll, r.ppl, sec);
    if (!s->json.empty()) {
      nlohmann::json j{{"model", o.model.empty() ? default_model_path() : o.model}, {"backend", l.model->backend_name()},
                       {"file", s->file}, {"tokens_scored", r.scored}, {"mean_nll", r.mean_nll}, {"perplexity", r.ppl}};
      write_file(s->json, j.dump(1) + "\n");
    }
    return 0;
  };
}

}  // namespace wgllm::cli
