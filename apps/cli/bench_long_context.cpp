// `wgllm bench long-context`: cold prefill of a long context (issue 14), dense vs block-sparse
// attention (--sparse-attn, kernels/sparse_attention.h). For each mode (dense: the switch off;
// sparse: on, with the --sparse-* flags given) the model is loaded and warmed up once, then for each
// --contexts length L a NEW sequence of L positions is prefilled from empty with L synthetic token
// ids ((i * 7919 + 13) mod min(vocab, 32000)) in chunks of the model's prefill chunk (Model::prefill_chunk(): --prefill-chunk, by default 2048 on hardware GPUs).
// Each chunk is one forward_argmax (the 4-byte readback waits for the GPU), timed on the wall clock:
// per chunk its first position, milliseconds and whether the sparse path ran (pos0 + T >= the
// threshold). Per length: total ms, tokens/s, the last chunk's ms, and memory: the backend's
// weights + scratch + the sequence's KV cache (bytes resident on the device), the process's peak
// resident set and its swap use (Linux /proc/self/status: VmHWM, VmSwap; flat and zero expected).
// The summary gives the sparse/dense speedup of the last chunk and of the whole prefill per length.
// Writes JSON (--json, default stdout). Not a timed test: numbers depend on the machine.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bench.h"
#include "bench_long_context.h"
#include "core/error.h"
#include "options.h"
#include "validate.h"

namespace wgllm::cli {

namespace {

struct LongContextOpts {
  CommonOptions common;
  std::vector<uint32_t> contexts = {8192, 16384, 32768};
  std::vector<std::string> modes = {"dense", "sparse"};
  std::string json_path;
};

// kB of a /proc/self/status field (0 where there is none, e.g. not Linux).
uint64_t status_kb(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) {
      std::istringstream s(line.substr(field.size() + 1));
      uint64_t v = 0;
      s >> v;
      return v;
    }
  return 0;
}

int run_long_context(const LongContextOpts& b) {
  using clk = std::chrono::steady_clock;
  const uint32_t max_len = *std::max_element(b.contexts.begin(), b.contexts.end());
  nlohmann::json runs = nlohmann::json::array();
  std::map<std::pair<std::string, uint32_t>, std::pair<double, double>> totals;  // (mode, L) -> (total, last chunk)
  for (const std::string& mode : b.modes) {
    CommonOptions co = b.common;
    co.switches.kernels.sparse_attn = mode == "sparse";
    co.context = std::max(co.context, max_len);
    Loaded l = load(co);
    l.seq.reset();
    const ModelOptions mo = model_options(co);
    const uint32_t chunk = std::max<uint32_t>(1, l.model->prefill_chunk());
    const uint32_t vocab = l.model->config().vocab, id_range = std::min<uint32_t>(vocab, 32000);
    for (uint32_t L : b.contexts) {
      auto seq = l.model->new_sequence(L);
      if (seq->context_length() < L)
        throw Error(fmt::format("bench long-context: the model holds at most {} positions, not {}", seq->context_length(), L));
      std::vector<int32_t> ids(L);
      for (uint32_t i = 0; i < L; ++i) ids[i] = int32_t((uint64_t(i) * 7919 + 13) % id_range);
      nlohmann::json chunks = nlohmann::json::array();
      double total = 0, last = 0;
      for (uint32_t p = 0; p < L; p += chunk) {
        const uint32_t n = std::min(chunk, L - p);
        const auto t0 = clk::now();
        l.model->forward_argmax(*seq, std::span<const int32_t>(ids.data() + p, n));
        last = std::chrono::duration<double, std::milli>(clk::now() - t0).count();
        total += last;
        const bool sparse = co.switches.kernels.sparse_attn && uint64_t(p) + n >= mo.kernels.sparse_threshold;
        chunks.push_back({{"pos0", p}, {"tokens", n}, {"ms", last}, {"sparse", sparse}});
      }
      const MemoryReport mm = l.model->memory(), sm = seq->memory();
      const uint64_t device_bytes = mm.weights + mm.scratch + sm.kv_cache + sm.recurrent;
      totals[{mode, L}] = {total, last};
      fmt::print(stderr, "{:<6} L={:>7}: prefill {:>10.1f} ms ({:>8.1f} tok/s), last chunk {:>8.2f} ms, device {:.1f} MiB, "
                 "host peak {:.1f} MiB, swap {} kB\n", mode, L, total, L / total * 1e3, last, device_bytes / 1048576.0,
                 status_kb("VmHWM") / 1024.0, status_kb("VmSwap"));
      runs.push_back({{"mode", mode}, {"context", L}, {"chunk", chunk}, {"total_ms", total}, {"tok_per_s", L / total * 1e3},
                      {"last_chunk_ms", last}, {"chunks", chunks}, {"device_bytes", device_bytes},
                      {"weights_bytes", mm.weights}, {"scratch_bytes", mm.scratch}, {"kv_cache_bytes", sm.kv_cache},
                      {"host_peak_rss_kb", status_kb("VmHWM")}, {"host_swap_kb", status_kb("VmSwap")}});
    }
  }
  nlohmann::json summary = nlohmann::json::array();
  for (uint32_t L : b.contexts) {
    auto d = totals.find({"dense", L}), s = totals.find({"sparse", L});
    if (d == totals.end() || s == totals.end()) continue;
    const double sp_total = d->second.first / s->second.first, sp_last = d->second.second / s->second.second;
    fmt::print(stderr, "L={:>7}: sparse speedup, whole prefill {:.2f}x, last chunk {:.2f}x\n", L, sp_total, sp_last);
    summary.push_back({{"context", L}, {"speedup_total", sp_total}, {"speedup_last_chunk", sp_last}});
  }
  const CommonOptions& c = b.common;
  nlohmann::json j = {{"benchmark", "long-context"}, {"model", c.model}, {"backend", c.backend},
                      {"sparse_block", c.switches.kernels.sparse_block}, {"sparse_top_k", c.switches.kernels.sparse_top_k},
                      {"sparse_window", c.switches.kernels.sparse_window}, {"sparse_threshold", c.switches.kernels.sparse_threshold},
                      {"sparse_tiled", c.switches.kernels.sparse_tiled},
                      {"runs", runs}, {"summary", summary}};
  print_or_write_json(b.json_path, j.dump(1));
  return 0;
}

}  // namespace

std::function<int()> add_bench_long_context(CLI::App& app) {
  CLI::App* bench = bench_subcommand(app);
  auto b = std::make_shared<LongContextOpts>();
  auto* cmd = bench->add_subcommand("long-context", "cold long prefill per context length: dense vs block-sparse attention");
  add_common(*cmd, b->common);
  cmd->add_option("--contexts", b->contexts, "context lengths to prefill from empty, each 1..16777216 (default 8192 16384 32768)")
      ->transform(integer(1, kMaxTokens))
      ->delimiter(',');
  cmd->add_option("--modes", b->modes, "attention modes to run: dense, sparse or both (default both)")
      ->check(CLI::IsMember({"dense", "sparse"}))
      ->delimiter(',');
  add_json_option(cmd, b->json_path);
  return [=]() -> int { return *cmd ? run_long_context(*b) : -1; };
}

}  // namespace wgllm::cli
