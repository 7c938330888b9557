// `wgllm bench`: measurement subcommands (see bench.cpp).
#pragma once
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

namespace wgllm::gpu {
class Context;
struct KernelTime;
}  // namespace wgllm::gpu

namespace wgllm::cli {
/// Registers `bench` (with `ab` and `synthetic` subcommands) on the app; returns the run hook to
/// call after parsing (returns -1 when bench was not selected, else the exit code).
std::function<int()> add_bench(CLI::App& app, const std::string& argv0);
/// The `bench` subcommand of app, created (without its own options) if add_bench() has not run:
/// where `bench multi-turn`, `bench attention` and other bench modes attach.
CLI::App* bench_subcommand(CLI::App& app);
/// The device options of an op-level bench subcommand (attention, gdn, matmul, matvec, dispatch).
struct DeviceArgs {
  int adapter = -1;            // --adapter (-1..1023, the main CLI's range): -1 = first hardware adapter
  bool shader_checks = false;  // --shader-checks: gpu::ContextOptions::shader_runtime_checks
  bool loop_bounding = false;  // --shader-loop-bounding: gpu::ContextOptions::shader_loop_bounding
};
/// Adds --adapter, --shader-checks / --no-shader-checks and --shader-loop-bounding /
/// --no-shader-loop-bounding (the model-level switches' names) to an op-level bench subcommand.
void add_device_options(CLI::App* cmd, DeviceArgs& d);
/// The device of an op-level bench: gpu::Context::create on d.adapter with naga's bounds checks
/// and loop bounding as d asks.
/// coop_matrix: ask for cooperative matrices (gpu::ContextOptions::want_coop_matrix; bench matmul --coop).
std::unique_ptr<gpu::Context> bench_context(const DeviceArgs& d, bool coop_matrix = false);
/// GPU time (us) and dispatch count per kernel label, summed over profiled forwards.
using KernelTotals = std::map<std::string, std::pair<double, uint32_t>>;
/// Adds every dispatch of `profile` (a forward's Model::last_profile()) to its label's totals in `by`;
/// returns the profile's summed GPU time in us.
double add_kernel_times(KernelTotals& by, const std::vector<gpu::KernelTime>& profile);
/// --json PATH (an output file; default: stdout) for a bench subcommand.
void add_json_option(CLI::App* cmd, std::string& path, const char* what = "the results");
}  // namespace wgllm::cli
