#include "options.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <type_traits>

#include <fmt/core.h>
#include <unistd.h>

#include "chat/jinja_value.h"  // TemplateRaise
#include "core/error.h"
#include "model_registry.h"
#include "models/switches.h"
#include "runtime/warmup.h"
#include "validate.h"

namespace wgllm::cli {

std::string default_model_path() { return cache_dir() + "/models/SmolLM2-135M-Instruct.Q4_1.gguf"; }

namespace {

// One switch's CLI flag: BOOL `--f` / `--no-f`; TRI (uint8_t: 0 off, 1 on, 2 adapter default) `--f`
// sets 1, `--no-f` 0; INT `--f N` in [lo, hi]; POW2 `--f N`, 0 or a power of two in [lo, hi].
template <class T>
void add_switch(CLI::App& app, SwitchKind kind, const char* flag, T& v, int64_t lo, int64_t hi, const char* help) {
  if (!*flag) return;  // no CLI flag
  const std::string f = std::string("--") + flag, nf = std::string("--no-") + flag;
  if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, uint8_t>) {
    // Two flag functions rather than CLI11's "--f,!--no-f", whose help reads "--f,--no-f{false}" for a
    // switch that is on by default (the help text states the default). trigger_on_parse: each runs
    // when its flag is read, so the last of `--f --no-f` wins (else CLI11 runs them in the order they
    // were defined). A flag function gets CLI11's count, negative for a false value, so `--f=false`
    // turns the switch off and `--no-f=false` on (a flag callback would not run for them at all).
    // The values CLI11 reads as true or false, checked first: CLI11 2.1 ends the process on any other
    // (`--f=bad`: an uncaught std::invalid_argument from its conversion) instead of a parse error. The
    // browser's switch strings take the same values (models/switches.cpp apply_switch_args).
    CLI::Validator truth = CLI::IsMember({"true", "false", "on", "off", "yes", "no", "1", "0"}, CLI::ignore_case);
    truth.description("");  // the help stays "--f": the values are for scripts, not advertised
    app.add_flag_function(f, [&v](int64_t c) { v = T(c > 0); }, help)->trigger_on_parse()->check(truth);
    app.add_flag_function(nf, [&v](int64_t c) { v = T(c <= 0); }, std::string("turns off ") + f)
        ->trigger_on_parse()
        ->check(truth);
  } else {
    if (kind == SwitchKind::Pow2)
      app.add_option(f, v, help)->transform(zero_or_power_of_two(uint32_t(lo), uint32_t(hi)));
    else
      app.add_option(f, v, help)->transform(integer(lo, uint64_t(hi)));
  }
}

}  // namespace

void add_common(CLI::App& app, CommonOptions& o, GenFlags gen) {
  app.add_option("-m,--model", o.model, "GGUF file, Hugging Face model directory or installed model name (`wgllm models`; default: SmolLM2-135M-Instruct from `make setup`)")
      ->transform(ModelPath);
  app.add_option("--backend", o.backend, "webgpu | cpu (CPU reference)")->check(CLI::IsMember({"webgpu", "cpu"}))->capture_default_str();
  app.add_option("-c,--context", o.context, "KV cache length in tokens (capped by the model)")
      ->transform(integer(1, kMaxTokens))
      ->capture_default_str();
  app.add_option("--adapter", o.adapter, "WebGPU adapter index (see `wgllm devices`; -1: first hardware adapter)")
      ->transform(integer(-1, 1023))
      ->capture_default_str();
  if (gen != GenFlags::None) {
    const bool server = gen == GenFlags::Server;
    CLI::Option* n = app.add_option("-n,--max-tokens", o.gen.max_new_tokens,
                                     server ? "default max_tokens of a request that sets none (without -n: up to the end of the context)"
                                            : "maximum new tokens (0: prefill only)")
                         ->transform(integer(server ? 1 : 0, kMaxTokens));
    if (!server) n->capture_default_str();
    // A server's default temperature is one a request may ask for: OpenAI's range [0, 2].
    app.add_option("--temp", o.gen.sampler.temperature,
                   server ? "default temperature of a request that sets none (0 = greedy)" : "temperature (0 = greedy)")
        ->check(real(0, server ? 2 : 1e6))
        ->capture_default_str();
    app.add_option("--top-k", o.gen.sampler.top_k, "top-k (0 = off)")->transform(integer(0, UINT32_MAX))->capture_default_str();
    app.add_option("--top-p", o.gen.sampler.top_p, "top-p (1 = off)")
        ->check(real(0, 1, /*lo_open=*/true))
        ->capture_default_str();
    app.add_option("--min-p", o.gen.sampler.min_p, "min-p (0 = off)")->check(real(0, 1))->capture_default_str();
    if (!server) {
      app.add_option("--repeat-penalty", o.gen.sampler.repeat_penalty, "repetition penalty (1 = off)")
          ->check(real(0, 1e6, /*lo_open=*/true))
          ->capture_default_str();
      app.add_option("--repeat-last-n", o.gen.sampler.repeat_last_n, "tokens the repetition penalty looks at")
          ->transform(integer(0, UINT32_MAX))
          ->capture_default_str();
    }
    app.add_option("--seed", o.gen.sampler.seed,
                   server ? "seed of a request that sets none (without --seed: a random seed per request)" : "sampling seed")
        ->transform(integer(0, UINT64_MAX));
    app.add_flag_callback("--ignore-eos", [&o] { o.gen.stop_at_eog = false; },
                          server ? "requests that do not set ignore_eos keep generating after end-of-generation tokens"
                                 : "keep generating after end-of-generation tokens");
  }
  // Every performance switch, from the table (kernels/switches.def).
  constexpr SwitchKind BOOL = SwitchKind::Bool, TRI = SwitchKind::Tri, INT = SwitchKind::Int, POW2 = SwitchKind::Pow2;
#define WGLLM_SWITCH(scope, field, type, kind, def, lo, hi, flag, bit_exact, product, record, warmup, help) \
  WGLLM_CLI_##scope(field, kind, lo, hi, flag, help)
#define WGLLM_CLI_KERNEL(field, kind, lo, hi, flag, help) add_switch(app, kind, flag, o.switches.kernels.field, lo, hi, help);
#define WGLLM_CLI_MODEL(field, kind, lo, hi, flag, help) add_switch(app, kind, flag, o.switches.field, lo, hi, help);
#define WGLLM_CLI_APP(field, kind, lo, hi, flag, help) add_switch(app, kind, flag, o.field, lo, hi, help);
#define WGLLM_CLI_SESSION(...)
#define WGLLM_CLI_WEB(...)
#include "kernels/switches.def"
#undef WGLLM_CLI_KERNEL
#undef WGLLM_CLI_MODEL
#undef WGLLM_CLI_APP
#undef WGLLM_CLI_SESSION
#undef WGLLM_CLI_WEB
#undef WGLLM_SWITCH
}

ModelOptions model_options(const CommonOptions& o) {
  ModelOptions mo = o.switches;
  mo.backend = o.backend == "cpu" ? BackendKind::CPU : BackendKind::WebGPU;
  mo.context_length = o.context;
  mo.adapter_index = o.adapter;
  return mo;
}

std::vector<std::string> non_default_switches(const CommonOptions& o) {
  std::vector<std::string> r = wgllm::non_default_switches(o.switches);
#define WGLLM_SWITCH(scope, field, type, kind, def, lo, hi, flag, bit_exact, product, record, warmup, help) \
  WGLLM_NONDEF_##scope(field, type, def, product)
#define WGLLM_NONDEF_APP(field, type, def, product)                                   \
  if (product && o.field != type(def)) {                                              \
    const SwitchInfo* s = find_switch(#field, SwitchScope::App);                      \
    r.push_back(s->spelled(int64_t(o.field)));                                        \
  }
#define WGLLM_NONDEF_KERNEL(...)
#define WGLLM_NONDEF_MODEL(...)
#define WGLLM_NONDEF_SESSION(...)
#define WGLLM_NONDEF_WEB(...)
  {
    constexpr bool PRODUCT = true, NEUTRAL = false;
    (void)NEUTRAL;
#include "kernels/switches.def"
  }
#undef WGLLM_NONDEF_APP
#undef WGLLM_NONDEF_KERNEL
#undef WGLLM_NONDEF_MODEL
#undef WGLLM_NONDEF_SESSION
#undef WGLLM_NONDEF_WEB
#undef WGLLM_SWITCH
  return r;
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
  try {
    return chat->apply(msgs, add_generation_prompt);
  } catch (const jinja::TemplateRaise& e) {  // a template's raise_exception('...'), whose text is the template's own
    throw Error(src->path + ": the model's chat template refused the conversation: " + e.what());
  }
}

Loaded load_text(const CommonOptions& o) {
  Loaded l;
  std::string path = o.model.empty() ? default_model_path() : o.model;
  if (o.model.empty()) {
    // The default model gets the registry's checks as `-m smollm2-135m` does (an incomplete copy is
    // named as such, with the command that installs it), where the registry can be read.
    std::vector<RegistryModel> reg;
    try {
      reg = load_registry(registry_path());
    } catch (const Error&) {
    }
    for (const auto& m : reg)
      if (m.is_default) path = installed_or_error(m, cache_dir());
    if (!std::filesystem::exists(path))
      throw Error("default model not found at " + path + ": run `make setup`, or pass -m");
  }
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

Loaded load(const CommonOptions& o, bool batched) {
  const auto t0 = std::chrono::steady_clock::now();
  Loaded l = load_text(o);
  // Progress on a terminal only (logs and pipes stay clean): loading is quick, the warm-up's
  // pipeline compiles take ~10 s on a software adapter.
  const bool tty = isatty(STDERR_FILENO) != 0;
  // Every id the tokenizer produces must have an embedding row, and every row an id to print. A GGUF
  // has as many tokens as rows (llama.cpp refuses a file whose token_embd.weight has other than
  // n_tokens rows; checked before the weights load); a Hugging Face vocabulary may be padded past
  // tokenizer.json's tokens.
  auto check_vocab = [&](uint64_t n_rows, bool exact) {
    const size_t n_tok = l.tok->vocab_size();
    if (n_tok > n_rows || (exact && n_tok != n_rows))
      throw Error(fmt::format("{}: the tokenizer has {} tokens but the model's vocabulary (token embedding rows) is {}: "
                              "the file is inconsistent",
                              l.src->path, n_tok, n_rows));
  };
  if (l.src->is_gguf())
    if (const GgufTensor* e = l.src->gguf->find("token_embd.weight"); e && e->shape.size() >= 2) check_vocab(e->shape[1], true);
  if (tty) fmt::print(stderr, "[wgllm] loading {} ...", std::filesystem::path(l.src->path).filename().string());
  l.model = create_model(*l.src, model_options(o));
  if (!l.src->is_gguf()) check_vocab(l.model->config().vocab, false);  // a GGUF was checked above
  if (tty)
    fmt::print(stderr, " {:.1f} s\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  for (const auto& n : l.model->inactive_switches()) fmt::print(stderr, "[wgllm] note: {}\n", n);
  if (const std::string sw = l.model->software_adapter(); !sw.empty())
    fmt::print(stderr, "[wgllm] note: the WebGPU adapter is a software renderer ({}); without a GPU, `--backend cpu` is "
                       "usually faster\n", sw);
  if (o.warmup) {
    WarmupProgress progress;
    if (tty)
      progress = [](int step, int max_steps, const char* what) {
        fmt::print(stderr, "\r\033[K[wgllm] compiling kernels (warm-up, --no-warmup skips it) {}/{}: {}", step + 1, max_steps, what);
      };
    l.warmup_ms = warm_up(*l.model, batched, progress);
    if (tty && l.warmup_ms > 0) fmt::print(stderr, "\r\033[K[wgllm] kernels compiled in {:.1f} s\n", l.warmup_ms / 1000);
  }
  l.seq = l.model->new_sequence();
  l.model->set_profiling(o.profile);
  l.load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return l;
}

}  // namespace wgllm::cli
