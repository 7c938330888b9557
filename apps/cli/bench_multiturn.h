// `wgllm bench multi-turn` (bench_multiturn.cpp): per-turn TTFT with snapshots vs full recompute.
#pragma once
#include <functional>

#include <CLI/CLI.hpp>

#include "options.h"

namespace wgllm::cli {
/// Adds `multi-turn` under the `bench` subcommand (creating `bench` if absent). Returns the hook
/// to call after parsing: -1 when not selected, else the exit code (3: a first token differed).
std::function<int()> add_bench_multiturn(CLI::App& app);
}  // namespace wgllm::cli
