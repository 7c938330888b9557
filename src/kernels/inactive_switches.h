// Switches asked for that no kernel takes on this adapter (a flag that silently does nothing cost an
// agreement run on 2026-12-07: `--matmul-int8` alone on lavapipe gave the f32 path's bits). The CLI
// prints these at load (apps/cli/options.cpp); test: kernels/inactive_switches_test.cpp.
#pragma once
#include <string>
#include <vector>

#include "kernels/ops.h"

namespace wgllm::kernels {

/// One sentence per switch set away from its default (a BOOL, a TRI set to 1, a numeric switch)
/// whose kernel path cannot run here, or runs only on some routes ("applies only to ..."), naming
/// the flag, why, and what would make it apply; empty when every such switch applies. Covers the
/// adapter-dependent forms of the tiled prefill matmul (int8, f16), the flash-attention
/// sub-switches under --no-attn-flash and the split length without the key split. A switch at its
/// default is never named (e.g. --attn-flash-wide-heads, on by default, under --no-attn-flash), nor
/// one whose effect depends only on the model (e.g. --attn-flash-window on a model without windowed
/// layers).
std::vector<std::string> inactive_switches(const OpContext& o);

}  // namespace wgllm::kernels
