// Kernel warm-up at load: WebGPU compiles a compute pipeline at its first use, and the engine
// specialises kernels by shape class (attention with or without its key split and combine pass,
// DeltaNet chunked prefill vs one-step decode, ...), so without a warm-up the first request that
// reaches a new shape class pays the compilation inside its TTFT (measured on the H200: +4 ms at
// turn 2 of a conversation, when a turn first crosses the split threshold).
#pragma once
#include <functional>

#include "models/model.h"

namespace wgllm {

/// Runs five throwaway forwards on a scratch sequence (discarded; the model's other sequences and
/// all results are unaffected) that reach every kernel variant a conversation uses: a 2-token
/// prefill, a decode step and a 9-token forward (past kernels::kFusedConvMaxTokens: causal_conv's
/// two-dispatch form and the unfused kernels), on hardware GPUs a forward of
/// Model::prefill_kernel_tokens() tokens (33 by default, past --matvec-max-tokens: the tiled
/// prefill matmul in every tile class), near position 0 (no key split), then, after jumping the scratch
/// sequence to position 150 with zero KV rows (Sequence::import_state; no 150-token forward), a
/// 2-token prefill and a decode step there (tiled and per-row attention with their key split and
/// combine passes), then one decode step at position 1040 on a second scratch sequence (the decode
/// attention kernel's key split + combine, KernelOptions::attention_decode_split_min); head outputs
/// as argmax and as logits; with `batched` (set by `wgllm serve` only: no other front end runs
/// batched forwards) and on models with a batched forward, batched steps of two sequences made
/// together (Model::new_sequences: the batched RoPE / KV-store and decode-attention variants,
/// unsplit and split). Returns the milliseconds it took. A
/// no-op (0) on the CPU backend. Throws what forward() throws (e.g. device loss).
/// Called before each warm-up forward: (index from 0, the most forwards warm_up runs, what it
/// compiles). Used for a progress line on a terminal: on a software adapter warm-up takes ~10 s.
/// kWarmupMaxSteps counts the batched step too.
using WarmupProgress = std::function<void(int step, int max_steps, const char* what)>;
inline constexpr int kWarmupMaxSteps = 8;

double warm_up(Model& m, bool batched = false, const WarmupProgress& progress = {});

}  // namespace wgllm
