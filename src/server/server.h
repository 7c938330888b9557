// `wgllm serve`: an OpenAI-compatible HTTP server (cpp-httplib) over one Model and a Scheduler.
//
// Endpoints: POST /v1/chat/completions, POST /v1/completions (one JSON answer, or server-sent
// events ending in `data: [DONE]` with "stream": true), GET /v1/models, GET /health, GET /metrics
// (Prometheus text, server/metrics.h), POST /tokenize {"content", "add_special"} -> {"tokens"},
// POST /detokenize {"tokens"} -> {"content"}. Errors are OpenAI-shaped ({"error": {...}}): 400 for
// bad requests (server/api.h), 401 for a missing or wrong API key (every path but /health, when
// --api-key is set), 404 for unknown paths, 429 when the scheduler's queue is full, 500 when a
// generation fails, 503 while shutting down.
//
// A streaming client that disconnects is noticed at the next write (each token, or a keep-alive
// comment every second while waiting) and its generation is cancelled, freeing its slot. For a
// non-streamed request the handler polls its connection for a hang-up every 200 ms while it waits
// (Linux; elsewhere such a request runs to its end). SIGINT / SIGTERM: new requests get 503, running
// generations are cancelled (streams end with an error event and [DONE]), then the server stops
// and serve() returns 0.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "server/api.h"
#include "server/scheduler.h"

namespace wgllm {
class Model;
class Tokenizer;
class ChatTemplate;
}  // namespace wgllm

namespace wgllm::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;              // 0: any free port (reported through on_listening)
  std::string api_key;          // empty: no authentication
  std::string model_id;         // the name /v1/models lists and responses carry
  SchedulerOptions scheduler;
  RequestDefaults defaults;     // what a request leaves out (api.h)
  size_t max_body_bytes = 16u << 20;
  std::function<void(int port)> on_listening;  // called once the socket is bound
};

/// Throws wgllm::Error (the message serve() gives) when host:port cannot be bound now, so that a
/// busy port is reported before the model loads; port 0 (any free port) always passes. The port
/// may still be taken between this check and serve().
void check_listen_address(const std::string& host, int port);

/// Blocks SIGINT and SIGTERM in the calling thread, and so in every thread it starts later, so that
/// only a thread waiting for them takes them (LoadSignalWatch's during the load, then serve()'s
/// sigwait). Call it before anything starts threads
/// (loading a WebGPU model does): a thread that does not block them would let the default action
/// end the process at once instead of the clean shutdown.
void block_shutdown_signals();

/// While it exists (the model's load, after block_shutdown_signals()), SIGINT and SIGTERM end the
/// process at once with a message (exit 128 + signal): without it, a signal sent during a load of
/// minutes would wait, blocked, until serve() starts. A signal arriving after its destruction stays
/// pending for serve().
class LoadSignalWatch {
 public:
  LoadSignalWatch();
  ~LoadSignalWatch();
  LoadSignalWatch(const LoadSignalWatch&) = delete;
  LoadSignalWatch& operator=(const LoadSignalWatch&) = delete;

 private:
  std::atomic<bool> done_{false};
  std::thread thread_;
};

/// Serves until SIGINT or SIGTERM; returns 0 then. Throws wgllm::Error if the address cannot be
/// bound. Calls block_shutdown_signals().
int serve(Model& model, const Tokenizer& tok, const ChatTemplate* tmpl, const ServerOptions& opt);

}  // namespace wgllm::server
