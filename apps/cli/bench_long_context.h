// `wgllm bench long-context` (bench_long_context.cpp): cold long prefill, dense vs sparse attention.
#pragma once
#include <functional>

#include <CLI/CLI.hpp>

namespace wgllm::cli {
/// Adds `long-context` under the `bench` subcommand (creating `bench` if absent). Returns the hook
/// to call after parsing: -1 when not selected, else the exit code.
std::function<int()> add_bench_long_context(CLI::App& app);
}  // namespace wgllm::cli
