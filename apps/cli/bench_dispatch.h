// `wgllm bench dispatch` (bench_dispatch.cpp): what one compute dispatch costs on this device apart
// from its work (kernels/dispatch_probe.h): CPU recording, wall time per dispatch in a submission,
// and GPU time from timestamps, for dependent, independent and split-submission patterns.
#pragma once
#include <functional>

#include <CLI/CLI.hpp>

namespace wgllm::cli {
/// Adds `dispatch` under the `bench` subcommand (creating `bench` if absent). Returns the hook to
/// call after parsing: -1 when not selected, else the exit code.
std::function<int()> add_bench_dispatch(CLI::App& app);
}  // namespace wgllm::cli
