// `wgllm bench attention` (bench_attention.cpp): the attention op alone, per kernel variant.
#pragma once
#include <functional>

#include <CLI/CLI.hpp>

namespace wgllm::cli {
/// Adds `attention` under the `bench` subcommand (creating `bench` if absent). Returns the hook to
/// call after parsing: -1 when not selected, else the exit code.
std::function<int()> add_bench_attention(CLI::App& app);
}  // namespace wgllm::cli
