// `wgllm bench serve` (bench_serve.cpp): load test of an OpenAI-compatible server.
#pragma once
#include <functional>

#include <CLI/CLI.hpp>

namespace wgllm::cli {
/// Adds `serve` under the `bench` subcommand. Returns the hook to call after parsing: -1 when not
/// selected, else the exit code (1 when any request failed).
std::function<int()> add_bench_serve(CLI::App& app);
}  // namespace wgllm::cli
