// `wgllm bench diverge` (bench_diverge.cpp): where greedy output of a configuration B departs
// from configuration A over a set of prompts (issue 14 item 4: the first generated token at which
// a switch that changes summation order, such as --fused-decode, changes the text).
#pragma once
#include <functional>

#include <CLI/CLI.hpp>

namespace wgllm::cli {
/// Adds `diverge` under the `bench` subcommand (creating `bench` if absent). Returns the hook to
/// call after parsing: -1 when not selected, else the exit code.
std::function<int()> add_bench_diverge(CLI::App& app);
}  // namespace wgllm::cli
