// wgllm serve -m MODEL [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--parallel N] [-c N]:
// loads the model once (with the kernel warm-up) and serves the OpenAI HTTP API until SIGINT or
// SIGTERM (src/server/server.h). Prints one line "listening on http://HOST:PORT" on stdout once the
// socket is bound (with --port 0, the port the system chose).
#include "serve_cmd.h"

#include <fmt/core.h>

#include <cstdio>
#include <filesystem>
#include <memory>

#include "options.h"
#include "server/server.h"
#include "validate.h"

namespace wgllm::cli {

std::function<int()> add_serve(CLI::App& app) {
  struct State {
    CommonOptions o;
    server::ServerOptions so;
    uint64_t snapshot_cap_mib = 1024;
    bool no_prefix_reuse = false;
    bool no_batch = false;
  };
  auto s = std::make_shared<State>();
  s->o.gen.sampler.temperature = server::RequestDefaults{}.sampler.temperature;  // OpenAI's default, shown by --help
  auto* cmd = app.add_subcommand("serve", "OpenAI-compatible HTTP server (chat/completions, completions, models, metrics)");
  add_common(*cmd, s->o, GenFlags::Server);
  cmd->add_option("--host", s->so.host, "address to listen on (default 127.0.0.1: this machine only)")->check(NonEmpty);
  cmd->add_option("--port", s->so.port, "TCP port (0: any free port, printed at start; default 8080)")->transform(integer(0, 65535));
  cmd->add_option("--api-key", s->so.api_key, "require 'Authorization: Bearer KEY' on every endpoint but /health")
      ->check(NonEmpty);  // an empty key (an unset variable) would leave the server open
  cmd->add_option("--parallel", s->so.scheduler.slots,
                  "sequences served at once (slots, each with its own KV cache of --context tokens; default 1)")
      ->transform(integer(1, 256));
  cmd->add_option("--queue", s->so.scheduler.max_queue,
                  "requests that may wait for a slot; more are answered 429 (default 64)")
      ->transform(integer(0, 4096));
  cmd->add_option("--alias", s->so.model_id, "model name in /v1/models and responses (default: the file name)");
  cmd->add_option("--snapshot-cap-mb", s->snapshot_cap_mib,
                  "prefix cache: MiB of recurrent-state snapshots kept, least recently used evicted (default 1024)")
      ->transform(integer(0, 1u << 24));
  cmd->add_option("--serve-prefill-chunk", s->so.scheduler.prefill_chunk,
                  "prompt tokens per scheduler step over all slots, so prompts let other slots decode (default 2048)")
      ->transform(integer(1, 1u << 16));
  cmd->add_flag("--no-prefix-reuse", s->no_prefix_reuse,
                "recompute every prompt from the empty state (no cached prefixes; for comparisons)");
  cmd->add_flag("--no-batch", s->no_batch,
                "one forward per slot and step (the slots take turns) instead of one forward over all active slots "
                "(for comparisons)");
  return [s, cmd]() -> int {
    if (!*cmd) return -1;
    server::check_listen_address(s->so.host, s->so.port);  // a busy port fails now, not after the load
    server::block_shutdown_signals();  // before loading starts the GPU driver's threads
    Loaded l = [&] {
      server::LoadSignalWatch watch;  // SIGINT / SIGTERM during the load stop the process
      return load(s->o, /*batched=*/!s->no_batch);
    }();
    l.seq.reset();  // the scheduler makes one sequence per slot
    server::ServerOptions so = s->so;
    so.scheduler.context = s->o.context;
    so.scheduler.snapshot_cap_bytes = s->snapshot_cap_mib << 20;
    so.scheduler.prefix_reuse = !s->no_prefix_reuse;
    so.scheduler.batch = !s->no_batch;
    // The generation flags are the requests' defaults (api.h RequestDefaults).
    so.defaults.sampler = s->o.gen.sampler;
    if (cmd->count("--seed")) so.defaults.seed = s->o.gen.sampler.seed;
    if (cmd->count("--max-tokens")) so.defaults.max_tokens = s->o.gen.max_new_tokens;
    so.defaults.ignore_eos = !s->o.gen.stop_at_eog;
    if (so.model_id.empty()) so.model_id = std::filesystem::path(l.src->path).filename().string();
    const std::string backend = l.model->backend_name();
    so.on_listening = [&](int port) {
      // An IPv6 address goes in brackets in a URL (RFC 3986).
      const std::string host = so.host.find(':') != std::string::npos ? "[" + so.host + "]" : so.host;
      fmt::print("wgllm serve: listening on http://{}:{} (model {}, {}, {} slot{}, context {})\n", host, port,
                 so.model_id, backend, so.scheduler.slots, so.scheduler.slots == 1 ? "" : "s", so.scheduler.context);
      std::fflush(stdout);
    };
    const int rc = server::serve(*l.model, *l.tok, l.chat.get(), so);
    fmt::print(stderr, "wgllm serve: stopped\n");
    return rc;
  };
}

}  // namespace wgllm::cli
