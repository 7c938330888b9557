// wgllm: command-line front end.
//   wgllm run  [-m MODEL] -p PROMPT [sampling]   generate an answer (chat template applied)
//   wgllm chat [-m MODEL]                         interactive multi-turn chat, streamed
//   wgllm devices                                 list WebGPU adapters
//   wgllm perplexity [-m MODEL] -f TEXT           perplexity of a text (one window)
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "gpu/context.h"
#include "bench.h"
#include "bench_attention.h"
#include "bench_matmul.h"
#include "bench_multiturn.h"
#include "chat_session.h"
#include "options.h"
#include "perplexity_cmd.h"

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
  std::map<std::string, std::pair<double, int>> by;
  double total = 0;
  for (auto& k : prof) {
    by[k.label].first += k.us;
    by[k.label].second++;
    total += k.us;
  }
  fmt::print(stderr, "last step: {} dispatches, {:.1f} us GPU time\n", prof.size(), total);
  for (auto& [name, v] : by) fmt::print(stderr, "  {:<16} x{:<4} {:>9.1f} us {:>5.1f}%\n", name, v.second, v.first, 100 * v.first / total);
}

int cmd_run(cli::CommonOptions& o, const std::string& prompt, const std::string& system, bool raw, bool print_ids) {
  cli::Loaded l = cli::load(o);
  std::string text = prompt;
  if (!raw && l.chat) {
    std::vector<ChatMessage> msgs;
    if (!system.empty()) msgs.push_back({"system", system});
    msgs.push_back({"user", prompt});
    text = l.render(msgs, true);
  }
  std::vector<int32_t> ids = l.tok->encode_prompt(text);
  StreamDecoder dec(*l.tok, true);
  GenerateStats st;
  const std::vector<int32_t> out = generate(*l.model, *l.seq, *l.tok, ids, o.gen, [&](int32_t t) {
    std::cout << dec.push(t) << std::flush;
    return true;
  }, &st);
  std::cout << dec.flush() << std::endl;
  if (print_ids) std::cout << "token_ids: " << nlohmann::json(out).dump() << std::endl;
  print_stats(l, st);
  if (o.profile) print_profile(l);
  return 0;
}

int cmd_chat(cli::CommonOptions& o, const std::string& system) { return cli::run_chat(o, system); }

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
    fmt::print("    subgroup size: {}..{}\n", a.subgroup_min, a.subgroup_max);
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"wgllm: LLM inference on WebGPU"};
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
  auto* chat = app.add_subcommand("chat", "interactive chat (template applied, tokens streamed)");
  cli::add_common(*chat, chat_o);
  chat->add_option("-s,--system", system, "system message");
  auto* devices = app.add_subcommand("devices", "list WebGPU adapters with features and limits");
  cli::CommonOptions tok_o;
  std::string tok_text;
  bool tok_chat = false;
  auto* tokenize = app.add_subcommand("tokenize", "print the token ids of a text as JSON");
  tokenize->add_option("-m,--model", tok_o.model, "GGUF file or HF directory");
  tokenize->add_option("-p,--prompt", tok_text, "text")->required();
  tokenize->add_flag("--chat", tok_chat, "wrap the text as a user message in the chat template");
  auto bench_hook = cli::add_bench(app, argv[0]);
  auto multiturn_hook = cli::add_bench_multiturn(app);  // after `bench` is registered
  auto attention_hook = cli::add_bench_attention(app);
  auto matmul_hook = cli::add_bench_matmul(app);
  auto perplexity_hook = cli::add_perplexity(app);
  CLI11_PARSE(app, argc, argv);
  if (*run && prompt.empty() && prompt_file.empty()) {
    fmt::print(stderr, "wgllm run: give a prompt with -p or -f\n");
    return 1;
  }
  if (!prompt_file.empty()) {
    std::ifstream in(prompt_file, std::ios::binary);
    prompt.assign(std::istreambuf_iterator<char>(in), {});
  }
  try {
    if (int rc = multiturn_hook(); rc >= 0) return rc;
    if (int rc = attention_hook(); rc >= 0) return rc;
    if (int rc = matmul_hook(); rc >= 0) return rc;
    if (int rc = perplexity_hook(); rc >= 0) return rc;
    if (int rc = bench_hook(); rc >= 0) return rc;
    if (*run) return cmd_run(run_o, prompt, system, raw, print_ids);
    if (*chat) return cmd_chat(chat_o, system);
    if (*devices) return cmd_devices();
    if (*tokenize) return cmd_tokenize(tok_o, tok_text, tok_chat);
  } catch (const Error& e) {
    fmt::print(stderr, "wgllm: error: {}\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "wgllm: internal error: {}\n", e.what());
    return 2;
  }
  return 0;
}
