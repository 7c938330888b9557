// `wgllm perplexity` (perplexity_cmd.cpp): perplexity of a text file under a model.
#pragma once
#include <functional>

#include <CLI/CLI.hpp>

namespace wgllm::cli {
/// Adds the `perplexity` subcommand. Returns the hook to call after parsing: -1 when not
/// selected, else the exit code.
std::function<int()> add_perplexity(CLI::App& app);
}  // namespace wgllm::cli
