#include "runtime/warmup.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "core/error.h"
#include "kernels/ops.h"

namespace wgllm {
namespace {
// KvState arrays (models/state.h): their blobs hold n_past rows.
bool is_kv_blob(const std::string& n) {
  return n.ends_with(".self_attn.keys") || n.ends_with(".self_attn.values");
}
}  // namespace

double warm_up(Model& m, bool batched, const WarmupProgress& progress) {
  if (m.backend_name() == "cpu") return 0;
  const auto t0 = std::chrono::steady_clock::now();
  int step = 0;
  auto at = [&](const char* what) {
    if (progress) progress(step, kWarmupMaxSteps, what);
    ++step;
  };
  m.compile_switched_pipelines();  // --sparse-attn: its kernels run only past the threshold
  std::vector<float> logits;
  // A prefill longer than kernels::kFusedMaxTokens takes the unfused kernels (rmsnorm, silu_mul,
  // plain matmul); forwards of up to that many tokens the fused decode variants (matmul_norm,
  // matmul_silu, one token group) for T = 1 and T > 1: warm all three. The same holds for
  // causal_conv's one-dispatch form (up to kFusedConvMaxTokens tokens, KernelOptions::
  // fuse_conv_state) and its two-dispatch prefill form.
  const std::vector<int32_t> prefill(std::max(kernels::kFusedMaxTokens, kernels::kFusedConvMaxTokens) + 1, 0);
  // Hardware GPUs run forwards of up to --matvec-max-tokens (32) tokens on matvec.wgsl: one more
  // forward past that reaches the tiled matmul, whose first use compiles every tile class of each
  // variant (matmul_tiled.h matmul_tile_classes), which prompts of other lengths select.
  const std::vector<int32_t> tiled(std::max<size_t>(m.prefill_kernel_tokens(), prefill.size()), 0);
  const std::span<const int32_t> one(prefill.data(), 1), few(prefill.data(), 2);
  auto seq = m.new_sequence(256);
  // A model whose whole context is shorter than the forwards below (a toy or a test model) skips
  // the warm-up: its kernels compile at first use.
  if (seq->context_length() < prefill.size() + few.size() + one.size()) return 0;
  at("prefill kernels");
  m.forward_argmax(*seq, prefill);   // prefill near position 0: no key split
  at("short-turn kernels");
  m.forward_argmax(*seq, few);   // a few tokens (a short turn): fused variants with a token group
  at("decode kernels");
  m.forward(*seq, one, &logits);  // decode near position 0, logits head
  if (tiled.size() > prefill.size() && seq->n_past() + tiled.size() <= seq->context_length()) {
    at("tiled prefill kernels");
    m.forward_argmax(*seq, tiled);
  }
  // Jump to a far position without computing it (the scratch sequence's values are irrelevant):
  // KV rows past the 3 real ones are zeros; recurrent states stay as they are.
  const uint32_t far = std::min<uint32_t>(150, seq->context_length() > 3 ? seq->context_length() - 3 : 0);
  std::vector<StateBlob> blobs;  // seq's state at `far` (KV rows zero past the first 3)
  if (far > seq->n_past()) {
    try {
      blobs = seq->export_state();
    } catch (const Error&) {
      blobs.clear();  // a model without state export: the split variants compile at first use
    }
    if (!blobs.empty()) {
      const uint32_t n = seq->n_past();
      for (auto& b : blobs)
        if (is_kv_blob(b.name)) b.data.resize(b.data.size() / n * far, 0);
      seq->import_state(far, blobs);
      // prefill past 64 keys: prefill attention (attention_flash, or attention_tiled where flash is
      // off or does not cover the head dim) with key split + combine; the 9-token prefill at
      // position 0 above compiled its unsplit variant.
      at("prefill attention with key split");
      m.forward_argmax(*seq, prefill);
      at("decode attention with key split");
      m.forward(*seq, one, &logits);  // decode past 128 keys: per-row attention with key split
      // Decode past KernelOptions::attention_decode_split_min (default 1024) keys: the decode
      // attention kernel's split variant + combine, on a second scratch sequence (zero KV rows;
      // another split_min compiles at first use).
      constexpr uint32_t far2 = 1040;
      auto seq2 = m.new_sequence(far2 + 2);
      if (seq2->context_length() >= far2 + 2) {
        std::vector<StateBlob> blobs2 = blobs;  // KV blobs hold `far` rows: extended to far2
        for (auto& b : blobs2)
          if (is_kv_blob(b.name)) b.data.resize(b.data.size() / far * far2, 0);
        seq2->import_state(far2, blobs2);
        at("long-context decode attention");
        m.forward(*seq2, one, &logits);
      }
    }
    // Continuous batching (`wgllm serve`): forwards of several sequences made together (a KV pool,
    // Model::new_sequences) take the batched variants (--batch-rope-kv, --batch-decode-attn): a
    // batched prefill and decode near position 0 (unsplit decode attention), then a decode with one
    // sequence past `far` (its split + the merge of per-sequence splits).
    if (batched && m.batched_forward()) {
      at("batched decode kernels");
      auto pair = m.new_sequences(2, 256);
      std::vector<BatchItem> items{{pair[0].get(), few}, {pair[1].get(), few}};
      m.forward_batch(items);
      items = {{pair[0].get(), one}, {pair[1].get(), one}};
      m.forward_batch(items);
      if (!blobs.empty() && far + 2 <= pair[1]->context_length()) {
        pair[1]->import_state(far, blobs);
        m.forward_batch(items);
      }
    }
  }
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace wgllm
