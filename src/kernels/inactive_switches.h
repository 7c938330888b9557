// Switches asked for that no kernel takes on this adapter (a flag that silently does nothing cost an
// agreement run on 2026-12-07: `--matmul-int8` alone on lavapipe gave the f32 path's bits). The CLI
// prints these at load (apps/cli/options.cpp); test: kernels/inactive_switches_test.cpp.
#pragma once
#include <string>
#include <vector>

#include "kernels/ops.h"

namespace wgllm::kernels {

/// One sentence per switch set on (a BOOL true, a TRI 1, a numeric switch away from its default)
/// whose kernel path cannot run here, naming the flag, why, and what would make it apply. Empty
/// when every such switch applies. Covers the adapter-dependent forms (int8 and f16 variants of the
/// tiled prefill matmul) and the flash-attention sub-switches under --no-attn-flash; a switch that
/// applies only to some shapes (e.g. --attn-flash-window on a model without windowed layers) is not
/// reported.
std::vector<std::string> inactive_switches(const OpContext& o);

}  // namespace wgllm::kernels
