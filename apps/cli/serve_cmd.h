// `wgllm serve` (serve_cmd.cpp): the OpenAI-compatible HTTP server (src/server).
#pragma once
#include <functional>

#include <CLI/CLI.hpp>

namespace wgllm::cli {
/// Adds the `serve` subcommand. Returns the hook to call after parsing: -1 when not selected,
/// else the exit code.
std::function<int()> add_serve(CLI::App& app);
}  // namespace wgllm::cli
