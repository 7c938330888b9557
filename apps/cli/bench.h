// `wgllm bench`: measurement subcommands (see bench.cpp).
#pragma once
#include <CLI/CLI.hpp>

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
}  // namespace wgllm::cli
