#include "options.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <fmt/core.h>
#include <unistd.h>

#include "core/error.h"
#include "model_registry.h"
#include "runtime/warmup.h"
#include "validate.h"

namespace wgllm::cli {

std::string default_model_path() { return cache_dir() + "/models/SmolLM2-135M-Instruct.Q4_1.gguf"; }

void add_common(CLI::App& app, CommonOptions& o) {
  app.add_option("-m,--model", o.model, "GGUF file, Hugging Face model directory or installed model name (`wgllm models`; default: SmolLM2-135M-Instruct from `make setup`)")
      ->transform(ModelPath);
  app.add_option("--backend", o.backend, "webgpu | cpu (CPU reference)")->check(CLI::IsMember({"webgpu", "cpu"}));
  app.add_option("-c,--context", o.context, "KV cache length in tokens (capped by the model)")->transform(integer(1, kMaxTokens));
  app.add_option("--adapter", o.adapter, "WebGPU adapter index (see `wgllm devices`; -1: first hardware adapter)")
      ->transform(integer(-1, 1023));
  app.add_option("-n,--max-tokens", o.gen.max_new_tokens, "maximum new tokens (0: prefill only)")->transform(integer(0, kMaxTokens));
  app.add_option("--temp", o.gen.sampler.temperature, "temperature (0 = greedy)")->check(real(0, 1e6));
  app.add_option("--top-k", o.gen.sampler.top_k, "top-k (0 = off)")->transform(integer(0, UINT32_MAX));
  app.add_option("--top-p", o.gen.sampler.top_p, "top-p (1 = off)")->check(real(0, 1, /*lo_open=*/true));
  app.add_option("--min-p", o.gen.sampler.min_p, "min-p (0 = off)")->check(real(0, 1));
  app.add_option("--repeat-penalty", o.gen.sampler.repeat_penalty, "repetition penalty (1 = off)")
      ->check(real(0, 1e6, /*lo_open=*/true));
  app.add_option("--repeat-last-n", o.gen.sampler.repeat_last_n, "tokens the repetition penalty looks at")
      ->transform(integer(0, UINT32_MAX));
  app.add_option("--seed", o.gen.sampler.seed, "sampling seed")->transform(integer(0, UINT64_MAX));
  app.add_flag("!--ignore-eos", o.gen.stop_at_eog, "keep generating after end-of-generation tokens");
  app.add_flag("--shader-checks,!--no-shader-checks", o.shader_checks,
               "naga's runtime checks in kernels: bounds checks on every array access and loop bounding (default off on native: "
               "trusted shader modules, identical results while accesses are in bounds; always on in browsers)");
  app.add_option("--submit-chunk", o.submit_chunk,
                 "submit a forward every N dispatches so the GPU starts while the rest is recorded (0: one submission per "
                 "forward; 0..4096; default: 32 on hardware GPUs, 0 on software adapters)")
      ->transform(integer(0, 4096));
  app.add_flag("--decode-pipeline,!--no-decode-pipeline", o.decode_pipeline,
               "greedy decoding: keep the argmax on the GPU and submit the next step before reading this one's token "
               "(one step of lag; same tokens; default off)");
  app.add_flag("--fuse-qkv,!--no-fuse-qkv", o.fuse_qkv, "one matmul for Q, K, V (default on)");
  app.add_flag("--fuse-gate-up,!--no-fuse-gate-up", o.fuse_gate_up, "one matmul for gate and up (default on)");
  app.add_flag("--vec4,!--no-vec4", o.vec4, "vec4 activation loads in matmul (default on)");
  app.add_flag("--attn-split,!--no-attn-split", o.attn_split, "split attention keys over workgroups when rows are few (flash-decoding; default on)");
  app.add_flag("--attn-ilp,!--no-attn-ilp", o.attn_ilp, "independent partial sums in attention loops (default on)");
  app.add_flag("--attn-tiled,!--no-attn-tiled", o.attn_tiled,
               "multi-query tiled attention for forwards of several tokens (prefill, new turn tokens; default on)");
  app.add_option("--prefill-tokens-per-wg", o.tokens_per_wg, "prefill tokens per matmul workgroup, 1..64 (1 = off)")
      ->transform(integer(1, 64));
  app.add_option("--matmul-rows", o.rows_per_wg, "matmul output rows per workgroup, 0..1024 (0 = adapter default)")
      ->transform(integer(0, 1024));
  app.add_option("--matmul-lanes", o.lanes, "matmul threads per output row, power of two up to 1024 (0 = adapter default)")
      ->transform(zero_or_power_of_two(1024));
  app.add_option("--gdn-chunk", o.gdn_chunk, "Gated DeltaNet prefill chunk in tokens, 1..256 (default 64)")->transform(integer(1, 256));
  app.add_flag("--fuse-conv-state,!--no-fuse-conv-state", o.fuse_conv_state,
               "causal conv (LFM2 ShortConv, DeltaNet conv1d) and its state update in one dispatch for forwards of <= 8 tokens (default on)");
  app.add_flag("--gdn-fuse-prep,!--no-gdn-fuse-prep", o.gdn_fuse_prep,
               "DeltaNet decode: conv1d+SiLU, q/k L2 norm and gates in one dispatch (default on)");
  app.add_flag("--gdn-fuse-norm,!--no-gdn-fuse-norm", o.gdn_fuse_norm,
               "DeltaNet decode: delta-rule step and gated RMSNorm in one dispatch (default on)");
  app.add_flag("--gdn-fuse-decode,!--no-gdn-fuse-decode", o.gdn_fuse_decode,
               "DeltaNet decode: conv1d, norms, gates, delta-rule step and gated RMSNorm in one dispatch per layer; "
               "takes precedence over --gdn-fuse-prep/--gdn-fuse-norm (default on)");
  app.add_flag("--fuse-norm,!--no-fuse-norm", o.fuse_norm,
               "decode (<= 8 tokens): RMSNorm computed in the next matmul's activation load, bit-identical (default on)");
  app.add_flag("--fuse-rope-kv,!--no-fuse-rope-kv", o.fuse_rope_kv,
               "RoPE of q and k and the KV-cache store in one dispatch, bit-identical (default on)");
  app.add_flag("--fuse-qkv-rope-kv,!--no-fuse-qkv-rope-kv", o.fuse_qkv_rope_kv,
               "decode (<= 8 tokens): RoPE and the KV-cache store in the fused QKV matmul's epilogue (llama), bit-identical (default on)");
  app.add_flag("--fuse-silu,!--no-fuse-silu", o.fuse_silu,
               "decode (<= 8 tokens): SiLU(gate) x up computed in the down projection's activation load, bit-identical (default on)");
  // Three states (default: the adapter decides), so two callbacks rather than one bool flag.
  app.add_flag_callback("--matmul-tiled", [&o] { o.matmul_tiled = 1; },
                        "tiled matmul kernel for forwards of more than 8 tokens (prefill; default: on for GPUs, off on software adapters)");
  app.add_flag_callback("--no-matmul-tiled", [&o] { o.matmul_tiled = 0; }, "per-row matmul kernel for every forward");
  app.add_option("--matmul-tile-n", o.matmul_tile_n, "tiled matmul: output features per workgroup, 0..256 (0 = adapter default)")
      ->transform(integer(0, 256));
  app.add_option("--matmul-tile-t", o.matmul_tile_t, "tiled matmul: tokens per workgroup, 0..256 (0 = adapter default)")
      ->transform(integer(0, 256));
  app.add_option("--matmul-reg-n", o.matmul_reg_n, "tiled matmul: output features per thread, 4 or 8 (0 = adapter default)")
      ->transform(integer(0, 8));
  app.add_option("--matmul-reg-t", o.matmul_reg_t, "tiled matmul: tokens per thread, 4 or 8 (0 = adapter default)")
      ->transform(integer(0, 8));
  app.add_option("--matmul-min-wgs", o.matmul_min_wgs,
                 "tiled matmul: halve the default tile (to 32 x 32 at least) while the grid has fewer workgroups (default 264; 0 = never)")
      ->transform(integer(0, 1 << 20));
  app.add_flag("--matmul-tiled-f16,!--no-matmul-tiled-f16", o.matmul_tiled_f16,
               "tiled matmul in f16 (f16 tiles, f16 sums per 32-element K-step; needs shader-f16; default off)");
  app.add_flag_callback("--attn-decode-gqa", [&o] { o.attn_decode_gqa = 1; },
                        "decode attention: one workgroup per (KV head, key split) for all query heads of the group (default on)");
  app.add_flag_callback("--no-attn-decode-gqa", [&o] { o.attn_decode_gqa = 0; }, "decode attention: the per-row kernel (one workgroup per query head)");
  app.add_option("--attn-decode-split-min", o.attn_decode_split_min,
                 "decode attention (--attn-decode-gqa): split keys over workgroups only past this many keys, 0..1048576 (default: 0 on GPUs, 1024 on software adapters)")
      ->transform(integer(0, 1u << 20));
  app.add_option("--attn-decode-split-len", o.attn_decode_split_len,
                 "decode attention (--attn-decode-gqa): keys per split, 1..1048576 (default: 64 on GPUs, 256 on software adapters; more when 32 splits would not cover the row)")
      ->transform(integer(1, 1u << 20));
  app.add_flag_callback("--matvec-subgroup", [&o] { o.matvec_subgroup = 1; },
                        "forwards of <= 8 tokens (decode): matrix-vector kernel with register sums, vec4 weight loads and "
                        "subgroup row reductions (default: on for GPUs, off on software adapters)");
  app.add_flag_callback("--no-matvec-subgroup", [&o] { o.matvec_subgroup = 0; },
                        "forwards of <= 8 tokens: the per-row matmul kernel (matmul.wgsl)");
  app.add_option("--matvec-rows", o.matvec_rows,
                 "matrix-vector kernel: output rows per workgroup, 0..32 (0 = adapter default: 4 GPUs, 8 software)")
      ->transform(integer(0, 32));
  app.add_flag("--matvec-subgroup-ops,!--no-matvec-subgroup-ops", o.matvec_subgroup_ops,
               "matrix-vector kernel: reduce each row with subgroupAdd where the adapter has subgroups, else a "
               "workgroup-memory tree (default on)");
  app.add_flag_callback("--attn-flash", [&o] { o.attn_flash = 1; },
                        "register-tiled flash attention for forwards of several tokens (prefill; head dims 32/64/96/128; "
                        "default: on)");
  app.add_flag_callback("--no-attn-flash", [&o] { o.attn_flash = 0; },
                        "no flash attention kernel: prefill attention takes --attn-tiled's kernel (or the per-row one)");
  app.add_flag("--sparse-attn,!--no-sparse-attn", o.sparse_attn,
               "block-sparse attention once the context reaches --sparse-threshold keys: each query block attends "
               "to the first key block, a local window and the top-k blocks by mean-pooled keys, reading only those "
               "(default off: changes results)");
  app.add_option("--sparse-block", o.sparse_block, "block-sparse attention: keys per block, 1..4096 (default 64)")
      ->transform(integer(1, 4096));
  app.add_option("--sparse-top-k", o.sparse_top_k,
                 "block-sparse attention: key blocks chosen by score besides the first block and the window, 0..200 "
                 "(default 16)")
      ->transform(integer(0, 200));
  app.add_option("--sparse-window", o.sparse_window,
                 "block-sparse attention: most recent key blocks always attended, the query's own block included, "
                 "1..55 (default 4)")
      ->transform(integer(1, 55));
  app.add_option("--sparse-threshold", o.sparse_threshold,
                 "block-sparse attention: context length (keys) from which a forward takes the sparse path; below it "
                 "the dense kernels run unchanged (default 8192)")
      ->transform(integer(0, kMaxTokens));
  app.add_flag("--sparse-tiled,!--no-sparse-tiled", o.sparse_tiled,
               "block-sparse attention, prefill: the tiled gather kernel (K/V tiles shared by a query block's rows; "
               "head dims 32..128) instead of one workgroup per (head, token) (default on)");
  app.add_flag("--profile", o.profile, "print per-kernel GPU times of the last decode step");
  app.add_flag("--warmup,!--no-warmup", o.warmup,
               "compile every kernel variant at load with throwaway forwards, so no request pays a pipeline compile (default on)");
}

ModelOptions model_options(const CommonOptions& o) {
  ModelOptions mo;
  mo.backend = o.backend == "cpu" ? BackendKind::CPU : BackendKind::WebGPU;
  mo.context_length = o.context;
  mo.adapter_index = o.adapter;
  mo.shader_runtime_checks = o.shader_checks;
  mo.submit_chunk = o.submit_chunk;
  mo.decode_pipeline = o.decode_pipeline;
  mo.fuse_qkv = o.fuse_qkv;
  mo.fuse_gate_up = o.fuse_gate_up;
  mo.kernels.vec4_activations = o.vec4;
  mo.kernels.attention_split_keys = o.attn_split;
  mo.kernels.attention_ilp = o.attn_ilp;
  mo.kernels.attention_tiled_prefill = o.attn_tiled;
  mo.kernels.prefill_tokens_per_workgroup = o.tokens_per_wg;
  mo.kernels.matmul_rows_per_workgroup = o.rows_per_wg;
  mo.kernels.matmul_lanes_per_row = o.lanes;
  mo.kernels.gdn_chunk = o.gdn_chunk;
  mo.kernels.fuse_conv_state = o.fuse_conv_state;
  mo.kernels.gdn_fuse_prep = o.gdn_fuse_prep;
  mo.kernels.gdn_fuse_norm = o.gdn_fuse_norm;
  mo.kernels.gdn_fuse_decode = o.gdn_fuse_decode;
  mo.kernels.fuse_norm = o.fuse_norm;
  mo.kernels.fuse_rope_kv = o.fuse_rope_kv;
  mo.kernels.fuse_silu = o.fuse_silu;
  mo.kernels.fuse_qkv_rope_kv = o.fuse_qkv_rope_kv;
  mo.kernels.matmul_tiled = uint8_t(o.matmul_tiled);
  mo.kernels.matmul_tile_n = o.matmul_tile_n;
  mo.kernels.matmul_tile_t = o.matmul_tile_t;
  mo.kernels.matmul_reg_n = o.matmul_reg_n;
  mo.kernels.matmul_reg_t = o.matmul_reg_t;
  mo.kernels.matmul_tiled_f16 = o.matmul_tiled_f16;
  mo.kernels.matmul_tiled_min_workgroups = o.matmul_min_wgs;
  mo.kernels.attention_decode_gqa = uint8_t(o.attn_decode_gqa);
  mo.kernels.attention_decode_split_min = o.attn_decode_split_min;
  mo.kernels.attention_decode_split_len = o.attn_decode_split_len;
  mo.kernels.matvec_subgroup = uint8_t(o.matvec_subgroup);
  mo.kernels.matvec_rows_per_workgroup = o.matvec_rows;
  mo.kernels.matvec_subgroup_ops = o.matvec_subgroup_ops;
  mo.kernels.attention_flash = uint8_t(o.attn_flash);
  mo.kernels.sparse_attn = o.sparse_attn;
  mo.kernels.sparse_block = o.sparse_block;
  mo.kernels.sparse_top_k = o.sparse_top_k;
  mo.kernels.sparse_window = o.sparse_window;
  mo.kernels.sparse_threshold = o.sparse_threshold;
  mo.kernels.sparse_tiled = o.sparse_tiled;
  return mo;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in.is_open()) throw Error(path + ": cannot open the file");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad() || std::filesystem::is_directory(path)) throw Error(path + ": cannot read the file");
  return text;
}

std::string Loaded::render(const std::vector<ChatMessage>& msgs, bool add_generation_prompt) const {
  if (!chat) throw Error(src->path + ": the model has no chat template; use --raw");
  return chat->apply(msgs, add_generation_prompt);
}

Loaded load_text(const CommonOptions& o) {
  Loaded l;
  const std::string path = o.model.empty() ? default_model_path() : o.model;
  if (o.model.empty() && !std::filesystem::exists(path))
    throw Error("default model not found at " + path + ": run `make setup` first, or pass -m");
  l.src = ModelSource::open(path);
  if (l.src->is_gguf()) {
    l.tok = Tokenizer::from_gguf(*l.src->gguf);
  } else {
    if (!l.src->hf->tokenizer_json_path()) throw Error(path + ": no tokenizer.json in the model directory");
    l.tok = Tokenizer::from_hf_json(*l.src->hf->tokenizer_json_path());
  }
  if (std::string t = l.src->chat_template(); !t.empty()) {
    auto text = [&](int32_t id) { return id >= 0 ? l.tok->token_text(id) : std::string(); };
    l.chat = std::make_unique<ChatTemplate>(t, text(l.tok->bos_id()), text(l.tok->eos_id()));
  }
  return l;
}

Loaded load(const CommonOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  Loaded l = load_text(o);
  // Progress on a terminal only (logs and pipes stay clean): loading is quick, the warm-up's
  // pipeline compiles take ~10 s on a software adapter.
  const bool tty = isatty(STDERR_FILENO) != 0;
  if (tty) fmt::print(stderr, "[wgllm] loading {} ...", std::filesystem::path(l.src->path).filename().string());
  l.model = create_model(*l.src, model_options(o));
  if (tty)
    fmt::print(stderr, " {:.1f} s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  if (o.warmup) {
    WarmupProgress progress;
    if (tty)
      progress = [](int step, int max_steps, const char* what) {
        fmt::print(stderr, "\r\033[K[wgllm] compiling kernels (warm-up, --no-warmup skips it) {}/{}: {}", step + 1, max_steps, what);
      };
    l.warmup_ms = warm_up(*l.model, progress);
    if (tty && l.warmup_ms > 0) fmt::print(stderr, "\r\033[K[wgllm] kernels compiled in {:.1f} s\n", l.warmup_ms / 1000);
  }
  l.seq = l.model->new_sequence();
  l.model->set_profiling(o.profile);
  l.load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return l;
}

}  // namespace wgllm::cli
