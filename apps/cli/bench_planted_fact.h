// `wgllm bench planted-fact` (bench_planted_fact.cpp): retrieval of a fact planted in a long
// public-domain text, dense vs block-sparse attention (issue 14 item 2).
#pragma once
#include <functional>

#include <CLI/CLI.hpp>

namespace wgllm::cli {
/// Adds `planted-fact` under the `bench` subcommand (creating `bench` if absent). Returns the hook
/// to call after parsing: -1 when not selected, else the exit code.
std::function<int()> add_bench_planted_fact(CLI::App& app);
}  // namespace wgllm::cli
