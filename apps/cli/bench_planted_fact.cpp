// `wgllm bench planted-fact`: a needle-in-a-haystack retrieval check for --sparse-attn (issue 14
// item 2). For each --lengths L (prompt tokens, e.g. 8192 16384 32768) and --depths d (fractions of
// the haystack, e.g. 0.1 .. 0.9), the prompt is one user message through the model's chat template
// (a raw "Question/Answer" prompt when the model has none):
//   <haystack text, with " The secret code is NNNNN. " inserted at the first line break after the
//    fraction d of its characters>\n\n<question>
// The haystack is the start of --file (default: the cache's Moby-Dick, from --offset characters),
// as many characters as keep the rendered, tokenized prompt within L - --gen tokens (found by
// rescaling from the measured characters per token, a few rounds). The code is a 5-digit number
// that differs per (L, d) (derived from both; never 0-padded). Each prompt is prefilled into a
// fresh sequence, then --gen tokens are decoded greedily (forward_argmax; stops at an end-of-
// generation token); "found" means the decoded answer contains the code's digits. Each --modes
// entry (dense: --sparse-attn off; sparse: on, with the --sparse-* flags given) loads the model
// once. Writes JSON (--json, default stdout): one row per (mode, L, d) with the prompt's token
// count, the fact's character depth, the answer, found, and the prefill time; plus a found/total
// summary per mode. The quality answer is the table; the timing is incidental.
#include "bench_planted_fact.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "bench.h"
#include "core/error.h"
#include "model_registry.h"
#include "options.h"
#include "validate.h"

namespace wgllm::cli {

namespace {

struct PlantedOpts {
  CommonOptions common;
  std::vector<uint32_t> lengths = {8192, 16384, 32768};
  std::vector<double> depths = {0.1, 0.25, 0.5, 0.75, 0.9};
  std::vector<std::string> modes = {"dense", "sparse"};
  std::string file, json_path;
  uint64_t offset = 10000;
  uint32_t gen = 12;
};

const char* kQuestion = "What is the secret code mentioned in the text above? Answer with the number only.";

std::string code_for(uint32_t L, size_t depth_index) {
  const uint64_t h = (uint64_t(L) * 2654435761u + depth_index * 40503u + 12345u) % 90000u;
  return std::to_string(10000 + h);
}

// The prompt text for a haystack of `chars` characters with the fact at `depth`; *fact_char is
// where the fact starts within the haystack.
std::string build_prompt(const Loaded& l, const std::string& hay_src, size_t chars, double depth, const std::string& fact,
                         size_t* fact_char) {
  std::string hay = hay_src.substr(0, std::min(chars, hay_src.size()));
  size_t at = size_t(depth * double(hay.size()));
  const size_t nl = hay.find('\n', at);
  at = nl == std::string::npos ? hay.size() : nl + 1;
  hay.insert(at, " " + fact + " ");
  *fact_char = at;
  const std::string content = hay + "\n\n" + kQuestion;
  if (l.chat) return l.render({{"user", content}}, true);
  return content + "\nAnswer:";
}

int run_planted_fact(const PlantedOpts& b) {
  using clk = std::chrono::steady_clock;
  const std::string file = b.file.empty() ? cache_dir() + "/text/package/moby-dick/data/data.txt" : b.file;
  const std::string all = read_file(file);
  if (b.offset >= all.size()) throw Error(fmt::format("bench planted-fact: --offset {} is past the end of {}", b.offset, file));
  const std::string hay_src = all.substr(b.offset);
  const uint32_t max_len = *std::max_element(b.lengths.begin(), b.lengths.end());
  nlohmann::json rows = nlohmann::json::array(), summary = nlohmann::json::object();
  for (const std::string& mode : b.modes) {
    CommonOptions co = b.common;
    co.switches.kernels.sparse_attn = mode == "sparse";
    co.context = std::max(co.context, max_len);
    Loaded l = load(co);
    l.seq.reset();
    // Characters per token of this text under this tokenizer (first 20000 characters).
    const double cpt =
        double(std::min<size_t>(20000, hay_src.size())) / double(std::max<size_t>(1, l.tok->encode(hay_src.substr(0, 20000), false).size()));
    int found_n = 0, total = 0;
    for (uint32_t L : b.lengths) {
      if (L <= b.gen + 16) throw Error(fmt::format("bench planted-fact: length {} leaves no room for a haystack", L));
      const uint32_t budget = L - b.gen;
      for (size_t di = 0; di < b.depths.size(); ++di) {
        const double d = b.depths[di];
        const std::string code = code_for(L, di), fact = "The secret code is " + code + ".";
        size_t chars = size_t(double(budget) * cpt), fact_char = 0;
        std::vector<int32_t> ids;
        for (int round = 0; round < 8; ++round) {
          ids = l.tok->encode_prompt(build_prompt(l, hay_src, chars, d, fact, &fact_char));
          if (ids.size() <= budget && (ids.size() >= budget - budget / 50 || chars >= hay_src.size())) break;
          chars = size_t(double(chars) * double(budget) / double(ids.size()) * (ids.size() > budget ? 0.995 : 1.0));
        }
        if (ids.size() > budget)
          throw Error(fmt::format("bench planted-fact: could not fit a prompt of {} tokens into {}", ids.size(), budget));
        auto seq = l.model->new_sequence(L);
        if (seq->context_length() < ids.size() + b.gen)
          throw Error(fmt::format("bench planted-fact: the model holds at most {} positions, not {}", seq->context_length(), L));
        const auto t0 = clk::now();
        int32_t t = l.model->forward_argmax(*seq, ids);
        const double prefill_ms = std::chrono::duration<double, std::milli>(clk::now() - t0).count();
        std::vector<int32_t> out;
        for (uint32_t i = 0; i < b.gen && !l.tok->is_eog(t); ++i) {
          out.push_back(t);
          if (i + 1 < b.gen) t = l.model->forward_argmax(*seq, std::span<const int32_t>(&t, 1));
        }
        const std::string answer = l.tok->decode(out, true);
        const bool found = answer.find(code) != std::string::npos;
        found_n += found;
        ++total;
        fmt::print(stderr, "{:<6} L={:>6} depth {:.2f}: {:>6} prompt tokens, code {} -> {:<8} {:?}\n", mode, L, d,
                   ids.size(), code, found ? "FOUND" : "missed", answer);
        rows.push_back({{"mode", mode}, {"length", L}, {"depth", d}, {"prompt_tokens", ids.size()},
                        {"haystack_chars", chars}, {"fact_char", fact_char}, {"code", code}, {"answer", answer},
                        {"found", found}, {"prefill_ms", prefill_ms}, {"chat_template", bool(l.chat)}});
      }
    }
    summary[mode] = {{"found", found_n}, {"total", total}};
    fmt::print(stderr, "{}: found {}/{}\n", mode, found_n, total);
  }
  const CommonOptions& c = b.common;
  nlohmann::json j = {{"benchmark", "planted-fact"}, {"model", c.model}, {"backend", c.backend}, {"file", file},
                      {"offset", b.offset}, {"question", kQuestion}, {"gen", b.gen},
                      {"sparse_block", c.switches.kernels.sparse_block}, {"sparse_top_k", c.switches.kernels.sparse_top_k},
                      {"sparse_window", c.switches.kernels.sparse_window}, {"sparse_threshold", c.switches.kernels.sparse_threshold},
                      {"rows", rows}, {"summary", summary}};
  print_or_write_json(b.json_path, j.dump(1));
  return 0;
}

}  // namespace

std::function<int()> add_bench_planted_fact(CLI::App& app) {
  CLI::App* bench = bench_subcommand(app);
  auto b = std::make_shared<PlantedOpts>();
  auto* cmd = bench->add_subcommand("planted-fact", "retrieval of a fact planted at several depths of a long text: dense vs sparse attention");
  add_common(*cmd, b->common);
  cmd->add_option("--lengths", b->lengths, "prompt lengths in tokens (default 8192 16384 32768)")
      ->transform(integer(32, kMaxTokens))
      ->delimiter(',');
  cmd->add_option("--depths", b->depths, "where the fact goes, fractions of the haystack in [0, 1] (default 0.1 0.25 0.5 0.75 0.9)")
      ->check(real(0, 1))
      ->delimiter(',');
  cmd->add_option("--modes", b->modes, "attention modes to run: dense, sparse or both (default both)")
      ->check(CLI::IsMember({"dense", "sparse"}))
      ->delimiter(',');
  cmd->add_option("-f,--file", b->file, "haystack text (default: Moby-Dick from the cache, as `make setup` installs it)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--offset", b->offset, "skip this many characters of the text first (default 10000)")->transform(integer(0, 1ull << 40));
  cmd->add_option("--gen", b->gen, "tokens to decode for the answer, 1..256 (default 12)")->transform(integer(1, 256));
  add_json_option(cmd, b->json_path);
  return [=]() -> int { return *cmd ? run_planted_fact(*b) : -1; };
}

}  // namespace wgllm::cli
