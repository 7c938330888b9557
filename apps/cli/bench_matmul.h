// `wgllm bench matmul` (bench_matmul.cpp): the matmul op alone for prefill shapes, per kernel
// variant (per-row kernel, tiled kernel at each tile, f16), with the achieved FLOP rate.
#pragma once
#include <functional>

#include <CLI/CLI.hpp>

namespace wgllm::cli {
/// Adds `matmul` under the `bench` subcommand (creating `bench` if absent). Returns the hook to
/// call after parsing: -1 when not selected, else the exit code.
std::function<int()> add_bench_matmul(CLI::App& app);
/// Adds `matvec` under `bench`: the decode matrix-vector kernel alone per launch shape, in GB/s.
std::function<int()> add_bench_matvec(CLI::App& app);
}  // namespace wgllm::cli
