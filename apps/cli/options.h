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
  GenerateOptions gen;
  // Performance switches (kernels/switches.def): the kernel- and model-level ones in the ModelOptions
  // they are loaded with (model_options() adds backend, context and adapter); the CLI's own (warmup,
  // profile) below. Every one has its flag from the table (add_common).
  ModelOptions switches;
#define WGLLM_SWITCH(scope, field, type, kind, def, ...) WGLLM_SWITCH_FIELD_##scope(field, type, def)
#define WGLLM_SWITCH_FIELD_KERNEL(field, type, def)
#define WGLLM_SWITCH_FIELD_MODEL(field, type, def)
#define WGLLM_SWITCH_FIELD_APP(field, type, def) type field = def;
#define WGLLM_SWITCH_FIELD_SESSION(field, type, def)
#define WGLLM_SWITCH_FIELD_WEB(field, type, def)
#include "kernels/switches.def"
#undef WGLLM_SWITCH_FIELD_KERNEL
#undef WGLLM_SWITCH_FIELD_MODEL
#undef WGLLM_SWITCH_FIELD_APP
#undef WGLLM_SWITCH_FIELD_SESSION
#undef WGLLM_SWITCH_FIELD_WEB
#undef WGLLM_SWITCH
};

/// Which generation flags a subcommand takes: run / chat all of them; serve the sampling flags as
/// its requests' defaults, without the repetition penalty (the server's requests have OpenAI's
/// presence / frequency penalties instead); perplexity none (it only scores text).
enum class GenFlags { All, Server, None };

/// Registers -m, --backend, the generation flags `gen` names and the performance flags on a
/// subcommand, each with a validator (validate.h): a value out of range is a parse error, before any
/// model loads. The help shows each option's default as set in `o` when this is called.
void add_common(CLI::App& app, CommonOptions& o, GenFlags gen = GenFlags::All);

/// The CLI spelling of every switch of `o` (kernel, model and CLI level; kernels/switches.def) that
/// differs from its default and is not declared product-neutral: empty = the product configuration.
std::vector<std::string> non_default_switches(const CommonOptions& o);

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
/// `batched`: the warm-up also compiles the batched-forward kernels (`wgllm serve`; runtime/warmup.h).
Loaded load(const CommonOptions& o, bool batched = false);
/// As load() without the weights (tokenizer and template only).
Loaded load_text(const CommonOptions& o);

ModelOptions model_options(const CommonOptions& o);

/// The bytes of a file; throws wgllm::Error naming the path when it cannot be read.
std::string read_file(const std::string& path);

}  // namespace wgllm::cli
