// `wgllm bench dispatch`: the dispatch-cost probe (kernels/dispatch_probe.h) on one adapter. Prints a
// table (per pattern and workgroup count: CPU record us, wall us per dispatch, GPU us per dispatch)
// and writes JSON to --json (default stdout). Decode of a small model is ~180 dispatches a step,
// so "total" times 180 is the floor of a decode step at that pattern.
#include <fmt/core.h>


#include <nlohmann/json.hpp>

#include "bench.h"
#include "bench_dispatch.h"
#include "gpu/context.h"
#include "kernels/dispatch_probe.h"
#include "validate.h"

namespace wgllm::cli {
namespace {

struct DispatchBenchOpts {
  DeviceArgs dev;  // --adapter, --shader-checks, --shader-loop-bounding
  kernels::DispatchProbeOptions probe;
  std::string json_path;
};

int run_dispatch_bench(const DispatchBenchOpts& b) {
  auto ctx = bench_context(b.dev);
  fmt::print(stderr, "dispatch cost on {}: {} dispatches per submission, median of {} (wall per dispatch = "
             "(T(N) - T(1)) / (N - 1))\n", ctx->info().name, b.probe.count, b.probe.repeats);
  const kernels::DispatchReport r = kernels::measure_dispatch_cost(*ctx, b.probe);
  nlohmann::json rows = nlohmann::json::array();
  fmt::print(stderr, "  {:<12} {:>10} {:>12} {:>12} {:>12}\n", "pattern", "workgroups", "record us", "wall us", "gpu us");
  for (const auto& f : r.rows) {
    fmt::print(stderr, "  {:<12} {:>10} {:>12.2f} {:>12.2f} {:>12}\n", f.pattern, f.workgroups, f.record_us, f.total_us,
               f.gpu_us < 0 ? std::string("-") : fmt::format("{:.2f}", f.gpu_us));
    rows.push_back({{"pattern", f.pattern}, {"workgroups", f.workgroups}, {"record_us", f.record_us},
                    {"wall_us_per_dispatch", f.total_us}, {"gpu_us", f.gpu_us < 0 ? nlohmann::json() : nlohmann::json(f.gpu_us)}});
  }
  nlohmann::json j = {{"benchmark", "dispatch"}, {"adapter", ctx->info().name}, {"count", r.count},
                      {"repeats", r.repeats}, {"split_every", b.probe.split_every}, {"timestamps", r.timestamps},
                      {"results", rows}};
  print_or_write_json(b.json_path, j.dump(1));
  return 0;
}

}  // namespace

std::function<int()> add_bench_dispatch(CLI::App& app) {
  CLI::App* bench = bench_subcommand(app);
  auto b = std::make_shared<DispatchBenchOpts>();
  auto* cmd = bench->add_subcommand("dispatch", "what one compute dispatch costs apart from its work (record, wall, GPU)");
  add_device_options(cmd, b->dev);
  cmd->add_option("--workgroups", b->probe.workgroups, "workgroups per dispatch, 64 threads each (default 1,132,1024)")
      ->delimiter(',')->transform(integer(1, 65535));
  cmd->add_option("--count", b->probe.count, "dispatches per timed submission, 2..4000 (default 256)")->transform(integer(2, 4000));
  cmd->add_option("--reps", b->probe.repeats, "timed submissions per figure, 1..1000 (default 5)")->transform(integer(1, 1000));
  cmd->add_option("--split-every", b->probe.split_every, "dispatches per submission in the split pattern, 1..4000 (default 32)")
      ->transform(integer(1, 4000));
  add_json_option(cmd, b->json_path);
  return [=]() -> int { return *cmd ? run_dispatch_bench(*b) : -1; };
}

}  // namespace wgllm::cli
