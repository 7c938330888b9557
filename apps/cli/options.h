// Command-line options shared by the wgllm subcommands, and the objects built from them.
#pragma once
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "chat/chat_template.h"
#include "models/model.h"
#include "models/source.h"
#include "runtime/generate.h"
#include "tokenizer/tokenizer.h"

namespace wgllm::cli {

/// Upper bound of every token-count option (context, prompt lengths, decode steps, ...): 16 Mi
/// tokens, beyond any supported model's trained context, and small enough that the sum of a few
/// such counts cannot wrap a uint32_t.
inline constexpr uint32_t kMaxTokens = 1u << 24;

struct CommonOptions {
  std::string model;  // empty: the default model installed by `make setup`
  std::string backend = "webgpu";
  uint32_t context = 4096;
  int adapter = -1;
  bool shader_checks = false;  // ModelOptions::shader_runtime_checks
  uint32_t submit_chunk = ModelOptions{}.submit_chunk;  // ModelOptions::submit_chunk
  bool decode_pipeline = ModelOptions{}.decode_pipeline;  // ModelOptions::decode_pipeline
  GenerateOptions gen;
  bool fuse_qkv = true, fuse_gate_up = true, vec4 = true, attn_split = true, attn_ilp = true,
       attn_tiled = true;
  uint32_t tokens_per_wg = 8;
  uint32_t gdn_chunk = 64;
  bool fuse_conv_state = true, gdn_fuse_prep = true, gdn_fuse_norm = true, gdn_fuse_decode = true;
  uint32_t rows_per_wg = 0, lanes = 0;  // 0: adapter default
  bool fuse_norm = true, fuse_rope_kv = true, fuse_silu = true, fuse_qkv_rope_kv = true;  // decode fusions (docs/FLAGS.md)
  int matmul_tiled = 2;  // KernelOptions::matmul_tiled: 2 = adapter default
  bool matmul_tiled_f16 = false;  // kernels/matmul_tiled.h
  uint32_t matmul_tile_n = 0, matmul_tile_t = 0, matmul_reg_n = 0, matmul_reg_t = 0;  // 0: adapter default
  uint32_t matmul_min_wgs = 264;  // KernelOptions::matmul_tiled_min_workgroups
  int attn_decode_gqa = 2;  // KernelOptions::attention_decode_gqa: 2 = adapter default
  // KernelOptions::attention_decode_split_*: adapter defaults (kernels::kDecodeSplitMinAuto, 0)
  uint32_t attn_decode_split_min = 0xFFFFFFFFu, attn_decode_split_len = 0;
  int matvec_subgroup = 2;  // KernelOptions::matvec_subgroup: 2 = adapter default
  uint32_t matvec_rows = 0;  // KernelOptions::matvec_rows_per_workgroup
  bool matvec_subgroup_ops = true;  // KernelOptions::matvec_subgroup_ops
  int attn_flash = 2;  // KernelOptions::attention_flash: 2 = adapter default
  // KernelOptions::sparse_* (kernels/sparse_attention.h): block-sparse attention past a context
  bool sparse_attn = false, sparse_tiled = true;
  uint32_t sparse_block = 64, sparse_top_k = 16, sparse_window = 4, sparse_threshold = 8192;
  bool profile = false;
  bool warmup = true;  // compile every kernel variant at load (runtime/warmup.h)
};

/// Registers -m, --backend, sampling and performance flags on a subcommand, each with a
/// validator (validate.h): a value out of range is a parse error, before any model loads.
void add_common(CLI::App& app, CommonOptions& o);

/// $WGLLM_CACHE/models/SmolLM2-135M-Instruct.Q4_1.gguf (default cache ~/.cache/wgllm).
std::string default_model_path();

/// A model ready to generate: source (mapped files), tokenizer, backend model, chat template.
struct Loaded {
  std::unique_ptr<ModelSource> src;
  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<Model> model;               // null from load_text()
  std::unique_ptr<Sequence> seq;              // one sequence of o.context tokens
  std::unique_ptr<ChatTemplate> chat;         // null when the model has no chat template
  double load_ms = 0;                         // includes warmup_ms
  double warmup_ms = 0;                       // kernel warm-up at load (0 with --no-warmup or on the CPU)
  /// The chat template's rendering of `msgs` (throws if the model has no template).
  std::string render(const std::vector<ChatMessage>& msgs, bool add_generation_prompt) const;
};
/// Opens the model file, tokenizer and chat template, and loads the weights on the backend.
Loaded load(const CommonOptions& o);
/// As load() without the weights (tokenizer and template only).
Loaded load_text(const CommonOptions& o);

ModelOptions model_options(const CommonOptions& o);

/// The bytes of a file; throws wgllm::Error naming the path when it cannot be read.
std::string read_file(const std::string& path);

}  // namespace wgllm::cli
