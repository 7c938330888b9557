// `wgllm bench`: measurement subcommands (see bench.cpp).
#pragma once
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

namespace wgllm::gpu { class Context; }

namespace wgllm::cli {
/// Registers `bench` (with `ab` and `synthetic` subcommands) on the app; returns the run hook to
/// call after parsing (returns -1 when bench was not selected, else the exit code).
std::function<int()> add_bench(CLI::App& app, const std::string& argv0);
/// The `bench` subcommand of app, created (without its own options) if add_bench() has not run:
/// where `bench multi-turn`, `bench attention` and other bench modes attach.
CLI::App* bench_subcommand(CLI::App& app);
/// Adds --shader-checks / --no-shader-checks (gpu::ContextOptions::shader_runtime_checks) to an
/// op-level bench subcommand.
void add_shader_checks_flag(CLI::App* cmd, bool& on);
/// The options every op-level bench subcommand (attention, gdn, matmul, matvec, dispatch) has:
/// --adapter (-1..1023, the main CLI's range) and --shader-checks.
void add_device_options(CLI::App* cmd, int& adapter, bool& shader_checks);
/// The device of an op-level bench: gpu::Context::create on `adapter` (-1: the first hardware
/// adapter) with naga's runtime checks when `shader_checks`.
std::unique_ptr<gpu::Context> bench_context(int adapter, bool shader_checks);
/// --json PATH (an output file; default: stdout) for a bench subcommand.
void add_json_option(CLI::App* cmd, std::string& path, const char* what = "the results");
}  // namespace wgllm::cli
