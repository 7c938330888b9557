// `wgllm bench gdn` (bench_gdn.cpp): the Gated DeltaNet chunkwise prefill alone, per chunk size and scan tile.
#pragma once
#include <functional>

#include <CLI/CLI.hpp>

namespace wgllm::cli {
/// Adds `gdn` under the `bench` subcommand (creating `bench` if absent). Returns the hook to call
/// after parsing: -1 when not selected, else the exit code.
std::function<int()> add_bench_gdn(CLI::App& app);
}  // namespace wgllm::cli
