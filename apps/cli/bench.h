// `wgllm bench`: measurement subcommands (see bench.cpp).
#pragma once
#include <CLI/CLI.hpp>

namespace wgllm::cli {
/// Registers `bench` (with `ab` and `synthetic` subcommands) on the app; returns the run hook to
/// call after parsing (returns -1 when bench was not selected, else the exit code).
std::function<int()> add_bench(CLI::App& app, const std::string& argv0);
}  // namespace wgllm::cli
