// The engine's entry points for the browser (WebAssembly, driven by web/worker.js): load a model
// from a file in the module's in-memory file system, run one chat turn on a Session (only the new
// tokens of each turn are processed: src/runtime/session.h), reset. Requests and results are JSON
// strings so that the JS side stays a thin, versioned message layer (web/protocol.md).
// Every entry point returns a malloc'd JSON string the caller frees with wgllm_free(); failures
// are {"error": message, "kind": "unsupported_architecture" | "device_limits" | "context_full" |
// "bad_request" | "engine"}.
// Tokens are streamed through Module.onToken(id, text) (web/worker.js); returning false stops the
// generation (abort).
#include <emscripten.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "chat/chat_template.h"
#include "core/error.h"
#include "models/model.h"
#include "models/source.h"
#include "runtime/session.h"
#include "runtime/warmup.h"
#include "tokenizer/tokenizer.h"
#include "web_chat.h"

using nlohmann::json;
using namespace wgllm;

namespace {

// clang-format off
EM_JS(int, wgjs_on_token, (int id, const char* text), {
  return Module['onToken'] ? (Module['onToken'](id, UTF8ToString(text)) === false ? 0 : 1) : 1;
});
// clang-format on

struct Engine {
  std::unique_ptr<ModelSource> src;
  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<ChatTemplate> chat;
  std::unique_ptr<Model> model;
  web::Conversation conv;
  uint32_t context = 0;
};
std::unique_ptr<Engine> g_engine;

char* out(const json& j) {
  const std::string s = j.dump(-1, ' ', false, json::error_handler_t::replace);
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

std::string kind_of(const std::string& msg) {
  if (msg.find("unsupported architecture") != std::string::npos || msg.find("unsupported model_type") != std::string::npos)
    return "unsupported_architecture";
  if (msg.find("exceeds the device limit") != std::string::npos || msg.find("maxBufferSize") != std::string::npos ||
      msg.find("maxStorageBufferBindingSize") != std::string::npos)
    return "device_limits";
  return "engine";
}

template <class F>
char* guarded(F&& f) {
  try {
    return out(f());
  } catch (const ContextFull& e) {
    return out({{"error", e.what()}, {"kind", "context_full"}});
  } catch (const web::BadRequest& e) {
    return out({{"error", e.what()}, {"kind", "bad_request"}});
  } catch (const std::exception& e) {
    return out({{"error", e.what()}, {"kind", kind_of(e.what())}});
  }
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

extern "C" {

EMSCRIPTEN_KEEPALIVE void wgllm_free(char* p) { std::free(p); }

/// Loads the GGUF file at `path` (MEMFS) with a KV cache of `context` tokens (0: 2048).
/// warmup != 0: compiles every kernel variant at load time (runtime/warmup.h: throwaway forwards
/// on a scratch sequence; WebGPU compiles a pipeline at its first use, and on a software adapter
/// that takes seconds that would otherwise land in a reply's TTFT and tokens/s). Results are
/// unaffected: the scratch sequence is discarded.
EMSCRIPTEN_KEEPALIVE char* wgllm_load(const char* path, int context, int warmup) {
  return guarded([&] {
    const auto t0 = std::chrono::steady_clock::now();
    g_engine.reset();
    auto e = std::make_unique<Engine>();
    e->src = ModelSource::open(path);
    if (!e->src->is_gguf()) throw Error(std::string(path) + ": the browser build loads GGUF files only");
    e->tok = Tokenizer::from_gguf(*e->src->gguf);
    if (std::string t = e->src->chat_template(); !t.empty()) {
      auto text = [&](int32_t id) { return id >= 0 ? e->tok->token_text(id) : std::string(); };
      e->chat = std::make_unique<ChatTemplate>(t, text(e->tok->bos_id()), text(e->tok->eos_id()));
    } else {
      throw Error(std::string(path) + ": the model has no chat template (tokenizer.chat_template)");
    }
    ModelOptions mo;
    mo.context_length = context > 0 ? uint32_t(context) : 2048;
    e->model = create_model(*e->src, mo);
    e->context = mo.context_length;
    const double warmup_ms = warmup ? warm_up(*e->model) : 0;  // runtime/warmup.h, as in the native CLI
    e->conv.open(*e->model, *e->tok, *e->chat, e->context);
    const auto mem = e->model->memory();
    const auto& c = e->model->config();
    json info = {{"arch", c.arch},
                 {"backend", e->model->backend_name()},
                 {"context_length", e->conv.session().context_length()},
                 {"weights_bytes", mem.weights},
                 {"scratch_bytes", mem.scratch},
                 {"vocab_size", c.vocab},
                 {"n_layers", c.n_layers},
                 {"warmup_ms", warmup_ms},
                 {"load_ms", ms_since(t0)}};
    g_engine = std::move(e);
    return info;
  });
}

/// One chat turn. `request`: {messages: [{role, content}], max_tokens, temperature, top_p,
/// top_k, seed, ignore_eos}. Result: {text, token_ids, finish_reason, usage: {prompt_tokens,
/// completion_tokens, total_tokens, extra: {prefill_tokens_processed, reused_tokens, ttft_ms,
/// decode_tokens_per_s, prefill_tokens_per_s}}}.
EMSCRIPTEN_KEEPALIVE char* wgllm_chat(const char* request) {
  return guarded([&] {
    if (!g_engine) throw Error("no model loaded");
    json req;
    try {
      req = json::parse(request);
    } catch (const std::exception& e) {
      throw web::BadRequest(std::string("request is not JSON: ") + e.what());
    }
    return g_engine->conv.turn(req, [](int32_t id, const std::string& text) { return wgjs_on_token(id, text.c_str()) != 0; });
  });
}

/// Forgets the conversation (the next request starts a new one).
EMSCRIPTEN_KEEPALIVE char* wgllm_reset() {
  return guarded([&] {
    if (!g_engine) throw Error("no model loaded");
    g_engine->conv.reset();
    return json{{"ok", true}};
  });
}

}  // extern "C"
