// `wgllm bench diverge`: the first generated token at which greedy decoding under configuration B
// departs from configuration A (issue 14 item 4). A is the command's own flags (-m, --backend,
// every switch flag); B is A with each `--b FIELD=VALUE` applied (a kernel- or model-level field
// of the switch table, kernels/switches.def, e.g. `--b fused_decode=1 --b fuse_norm=0`). Both
// models are loaded side by side. For each of --prompts prompts (the built-in list of 24 short
// chat requests, or the lines of --file), rendered through the model's chat template (raw text
// when it has none), each model prefills the prompt into a fresh sequence and decodes --gen tokens
// greedily (forward_argmax; stops after an end-of-generation token of A). Per prompt: the index of
// the first generated token that differs (null: none within the tokens both generated), the max
// |logit difference| of the first decode step (prefill, then A's first token as a one-token
// forward with logits, per model: the prefill kernels are not what a decode switch changes), the
// common text and both texts (invalid UTF-8 of a cut character replaced). Summary: prompts,
// diverged, the minimum, median and mean first divergence over the diverged prompts. JSON to
// --json (default stdout); one line per prompt on stderr.
#include "bench_diverge.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bench.h"
#include "core/error.h"
#include "models/switches.h"
#include "options.h"
#include "validate.h"

namespace wgllm::cli {

namespace {

struct DivergeOpts {
  CommonOptions common;
  std::vector<std::string> b_sets;  // FIELD=VALUE
  std::string file, json_path;
  uint32_t prompts = 24, gen = 64;
};

// Short, varied requests (facts, code, lists, arithmetic, stories): 24, more than the 20 issue 14 asks.
const char* const kPrompts[] = {
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "Explain what a hash table is in two sentences.",
    "List three primary colors.",
    "What is 17 times 23?",
    "Write a Python function that reverses a string.",
    "Tell me a short story about a robot who learns to paint.",
    "Why is the sky blue?",
    "Translate 'good morning' into Spanish and German.",
    "Give me a recipe for pancakes.",
    "What are the planets of the solar system?",
    "Summarize the plot of Romeo and Juliet.",
    "How do I make a cup of tea?",
    "Name five animals that live in the ocean.",
    "What is the difference between weather and climate?",
    "Write a limerick about a cat.",
    "Explain recursion to a five-year-old.",
    "What is the boiling point of water in Fahrenheit?",
    "Suggest three names for a bakery.",
    "Describe the water cycle.",
    "Write a SQL query that counts the rows of a table named users.",
    "What causes the seasons on Earth?",
    "Give two tips for better sleep.",
    "Who wrote Pride and Prejudice?",
};

// Greedy tokens after ids (at most gen; stops after an end-of-generation token).
std::vector<int32_t> greedy(Loaded& l, const std::vector<int32_t>& ids, uint32_t gen) {
  auto seq = l.model->new_sequence(uint32_t(ids.size() + gen + 1));
  std::vector<int32_t> out;
  int32_t t = l.model->forward_argmax(*seq, ids);
  for (uint32_t i = 0; i < gen; ++i) {
    out.push_back(t);
    if (l.tok->is_eog(t) || i + 1 == gen) break;
    t = l.model->forward_argmax(*seq, std::span<const int32_t>(&t, 1));
  }
  return out;
}

// The logits of the first decode step (a one-token forward: the decode kernels) after prefilling
// ids, with token t as its input.
std::vector<float> decode_logits(Loaded& l, const std::vector<int32_t>& ids, int32_t t) {
  auto seq = l.model->new_sequence(uint32_t(ids.size() + 2));
  l.model->forward(*seq, ids, nullptr);
  std::vector<float> logits;
  l.model->forward(*seq, std::span<const int32_t>(&t, 1), &logits);
  return logits;
}

int run_diverge(const DivergeOpts& b) {
  std::vector<std::string> prompts;
  if (!b.file.empty()) {
    std::istringstream in(read_file(b.file));
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) prompts.push_back(line);
    if (prompts.empty()) throw Error("bench diverge: " + b.file + " has no non-empty line");
    if (b.prompts > prompts.size())
      fmt::print(stderr, "bench diverge: {} has {} prompts; --prompts {} runs the list {} times over\n", b.file,
                 prompts.size(), b.prompts, (b.prompts + prompts.size() - 1) / prompts.size());
  } else {
    prompts.assign(std::begin(kPrompts), std::end(kPrompts));
  }
  CommonOptions ca = b.common, cb = b.common;
  for (const std::string& s : b.b_sets) {
    try {
      apply_switch_setting(cb.switches, s);
    } catch (const Error& e) {
      throw Error(std::string("bench diverge: --b: ") + e.what());
    }
  }
  Loaded a = load(ca), bm = load(cb);
  a.seq.reset();
  bm.seq.reset();
  nlohmann::json rows = nlohmann::json::array();
  std::vector<uint32_t> firsts;
  for (uint32_t i = 0; i < b.prompts; ++i) {
    const std::string& p = prompts[i % prompts.size()];
    const std::vector<int32_t> ids = a.tok->encode_prompt(a.chat ? a.render({{"user", p}}, true) : p);
    const std::vector<int32_t> ta = greedy(a, ids, b.gen), tb = greedy(bm, ids, b.gen);
    const std::vector<float> la = decode_logits(a, ids, ta[0]), lb = decode_logits(bm, ids, ta[0]);
    float max_diff = 0;
    for (size_t k = 0; k < std::min(la.size(), lb.size()); ++k) max_diff = std::max(max_diff, std::fabs(la[k] - lb[k]));
    size_t first = 0;
    const size_t n = std::min(ta.size(), tb.size());
    while (first < n && ta[first] == tb[first]) ++first;
    const bool diverged = first < n;
    if (diverged) firsts.push_back(uint32_t(first));
    const std::vector<int32_t> same(ta.begin(), ta.begin() + long(first));
    fmt::print(stderr, "prompt {:>2}: {:>4} tokens, {} ({} generated by A), first decode step's logits max |B - A| {:.3g}\n", i,
               ids.size(), diverged ? fmt::format("diverges at generated token {}", first) : std::string("identical"),
               ta.size(), max_diff);
    rows.push_back({{"prompt", p}, {"prompt_tokens", ids.size()}, {"generated_a", ta.size()}, {"generated_b", tb.size()},
                    {"first_divergence", diverged ? nlohmann::json(first) : nlohmann::json(nullptr)},
                    {"first_decode_logits_max_abs_diff", max_diff}, {"common_text", a.tok->decode(same, true)},
                    {"text_a", a.tok->decode(ta, true)}, {"text_b", bm.tok->decode(tb, true)}});
  }
  nlohmann::json summary = {{"prompts", b.prompts}, {"diverged", firsts.size()}};
  if (!firsts.empty()) {
    std::vector<uint32_t> s = firsts;
    std::sort(s.begin(), s.end());
    double mean = 0;
    for (uint32_t f : s) mean += f;
    summary["first_divergence_min"] = s.front();
    summary["first_divergence_median"] = s[s.size() / 2];
    summary["first_divergence_mean"] = mean / double(s.size());
  }
  fmt::print(stderr, "{} of {} prompts diverge within {} tokens\n", firsts.size(), b.prompts, b.gen);
  const CommonOptions& c = b.common;
  nlohmann::json j = {{"benchmark", "diverge"}, {"model", c.model}, {"backend", c.backend}, {"gen", b.gen},
                      {"a_switches", non_default_switches(ca)}, {"b_switches", non_default_switches(cb)},
                      {"b_sets", b.b_sets}, {"rows", rows}, {"summary", summary}};
  print_or_write_json(b.json_path, j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace));
  return 0;
}

}  // namespace

std::function<int()> add_bench_diverge(CLI::App& app) {
  CLI::App* bench = bench_subcommand(app);
  auto b = std::make_shared<DivergeOpts>();
  auto* cmd = bench->add_subcommand("diverge", "first generated token where greedy output of configuration B departs from A");
  add_common(*cmd, b->common);
  cmd->add_option("--b", b->b_sets, "B = A with this kernel/model switch set, FIELD=VALUE (repeatable), e.g. fused_decode=1")
      ->required();
  cmd->add_option("--prompts", b->prompts, "prompts to run, 1..4096 (default 24; the list repeats past its end)")
      ->transform(integer(1, 4096));
  cmd->add_option("--gen", b->gen, "tokens to decode per prompt, 1..4096 (default 64)")->transform(integer(1, 4096));
  cmd->add_option("-f,--file", b->file, "prompts, one per line (default: 24 built-in chat requests)")->check(CLI::ExistingFile);
  add_json_option(cmd, b->json_path);
  return [=]() -> int { return *cmd ? run_diverge(*b) : -1; };
}

}  // namespace wgllm::cli
