// The engine's entry points for the browser (WebAssembly, driven by web/worker.js): load a model
// from a file in the module's in-memory file system, run one chat turn on a Session (only the new
// tokens of each turn are processed: src/runtime/session.h), reset. Requests and results are JSON
// strings so that the JS side stays a thin, versioned message layer (web/protocol.md).
// Every entry point returns a malloc'd JSON string the caller frees with wgllm_free(); failures
// are {"error": message, "kind": "unsupported_architecture" | "device_limits" | "context_full" |
// "bad_request" | "engine"}.
// Tokens are streamed through Module.onToken(id, text) (web/worker.js); returning false stops the
// generation (abort).
// Weights are streamed (wgllm_load_stream): the model file stays a Blob on the JS side (an OPFS
// file, a picked File, or a downloaded Blob); the engine reads the GGUF header and then each
// tensor a window of rows at a time (FileReaderSync, worker only) while packing it into its GPU
// buffer, so the wasm heap never holds the model (load result: heap_bytes, streamed_bytes,
// largest_read_bytes).
#include <emscripten.h>
#include <emscripten/heap.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <vector>
#include <nlohmann/json.hpp>
#include <string>

#include "chat/chat_template.h"
#include "core/error.h"
#include "models/model.h"
#include "models/source.h"
#include "models/switches.h"
#include "runtime/decode_pipeline.h"
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
EM_JS(double, wgjs_blob_size, (), {
  const b = Module['wgllmModelBlob'];
  return b ? b.size : -1;
});
EM_JS(const char*, wgjs_blob_name, (), {
  const b = Module['wgllmModelBlob'], s = (b && b.name) || 'model.gguf';
  const n = lengthBytesUTF8(s) + 1, p = _malloc(n);
  stringToUTF8(s, p, n);
  return p;
});
// Copies blob bytes [off, off + n) into the heap at dst; returns 1, or 0 with Module.wgllmReadError.
EM_JS(int, wgjs_blob_read, (double off, void* dst, double n), {
  try {
    const buf = new FileReaderSync().readAsArrayBuffer(Module['wgllmModelBlob'].slice(off, off + n));
    if (buf.byteLength !== n) throw new Error('short read: ' + buf.byteLength + ' of ' + n + ' bytes');
    HEAPU8.set(new Uint8Array(buf), dst);
    if (Module['onRead']) Module['onRead'](off, n);
    return 1;
  } catch (e) {
    Module['wgllmReadError'] = String((e && e.message) || e);
    return 0;
  }
});
// The glue's counters (src/gpu/web/glue.js): out[0] wasm -> JS calls, out[1] WebGPU JS calls
// made by its command-list replay.
EM_JS(void, wgjs_counters, (double* out), {
  HEAPF64[out >> 3] = WG.crossings;
  HEAPF64[(out >> 3) + 1] = WG.gpuCalls;
});
EM_JS(const char*, wgjs_read_error, (), {
  const s = Module['wgllmReadError'] || 'unknown error';
  const n = lengthBytesUTF8(s) + 1, p = _malloc(n);
  stringToUTF8(s, p, n);
  return p;
});
// clang-format on

std::string take(const char* p) {
  std::string s(p ? p : "");
  std::free(const_cast<char*>(p));
  return s;
}

// The model file as the worker's Blob (Module.wgllmModelBlob), read synchronously in windows.
class BlobReader final : public ByteReader {
 public:
  BlobReader() : name_(take(wgjs_blob_name())) {
    const double s = wgjs_blob_size();
    if (s < 0) throw Error("no model file was given to the engine (Module.wgllmModelBlob)");
    size_ = uint64_t(s);
  }
  uint64_t size() const override { return size_; }
  std::string name() const override { return name_; }
  void read(uint64_t off, void* dst, uint64_t n) const override {
    if (off > size_ || n > size_ - off)
      throw Error(name_ + ": read of [" + std::to_string(off) + ", +" + std::to_string(n) + ") past the end of the file");
    if (!wgjs_blob_read(double(off), dst, double(n))) throw Error(name_ + ": reading the model file failed: " + take(wgjs_read_error()));
    total_ += n;
    largest_ = std::max(largest_, n);
  }
  uint64_t total_read() const { return total_; }
  uint64_t largest_read() const { return largest_; }

 private:
  std::string name_;
  uint64_t size_ = 0;
  mutable uint64_t total_ = 0, largest_ = 0;
};

struct Engine {
  std::unique_ptr<BlobReader> reader;  // streamed loads: outlives src (the tensors read through it)
  std::unique_ptr<ModelSource> src;
  std::unique_ptr<Tokenizer> tok;
  std::unique_ptr<ChatTemplate> chat;  // null: a base model (no tokenizer.chat_template): completions only
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

// The loaded engine and an entry point's request parsed ("what request is not JSON: ..." otherwise,
// a bad_request); throws when no model is loaded.
Engine& loaded() {
  if (!g_engine) throw Error("no model loaded");
  return *g_engine;
}
json parse_request(const char* request, const char* what) {
  try {
    return json::parse(request);
  } catch (const std::exception& e) {
    throw web::BadRequest(std::string(what) + " is not JSON: " + e.what());
  }
}
// Streams a generation's tokens to Module.onToken (web/worker.js); its `false` aborts.
const web::TokenSink kToJs = [](int32_t id, const std::string& text) { return wgjs_on_token(id, text.c_str()) != 0; };

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

struct Counters {
  double crossings = 0, gpu_calls = 0;
};
Counters counters() {
  double c[2];
  wgjs_counters(c);
  return {c[0], c[1]};
}

// CreateEngine option `switches`: kernel- and model-level switches in the native CLI's spelling
// (models/switches.h apply_switch_args), e.g. "--attn-decode-key-lanes 1 --no-fuse-norm", applied to mo.
// (shader_runtime_checks / shader_loop_bounding are accepted and do nothing here: the browser decides
// its own checks.) A bad one is the caller's error: kind bad_request.
void apply_web_switches(ModelOptions& mo, const char* switches) {
  if (!switches || !*switches) return;
  try {
    apply_switch_args(mo, switches);
  } catch (const Error& e) {
    throw web::BadRequest(e.what());
  }
}

// Loads e->src (opened by the caller) onto the GPU: tokenizer, chat template, model, warm-up.
json finish_load(std::unique_ptr<Engine> e, int context, int warmup, int decode_pipeline, const char* switches,
                 std::chrono::steady_clock::time_point t0) {
  e->tok = Tokenizer::from_gguf(*e->src->gguf);
  if (std::string t = e->src->chat_template(); !t.empty()) {
    auto text = [&](int32_t id) { return id >= 0 ? e->tok->token_text(id) : std::string(); };
    e->chat = std::make_unique<ChatTemplate>(t, text(e->tok->bos_id()), text(e->tok->eos_id()));
  }  // else a base model: wgllm_complete only (wgllm_chat answers bad_request)
  ModelOptions mo;
  mo.context_length = context > 0 ? uint32_t(context) : 2048;
  // The browser's own switch (CreateEngine option decodePipeline, default on; switches.def WEB
  // decode_pipeline): greedy decoding submits step i+1 before reading step i's id, the glue's
  // readback waits for the first map that settles (webgpu_shim.cpp wgpuDevicePoll).
  mo.decode_pipeline = decode_pipeline != 0;
  apply_web_switches(mo, switches);
  e->model = create_model(*e->src, mo);
  e->context = sequence_context(mo.context_length, mo.context_length, e->model->config().max_context);  // as the sequences
  const double warmup_ms = warmup ? warm_up(*e->model) : 0;  // runtime/warmup.h, as in the native CLI
  e->conv.open(*e->model, *e->tok, e->chat.get(), e->context);
  const auto mem = e->model->memory();
  const auto& c = e->model->config();
  json info = {{"arch", c.arch},
               {"backend", e->model->backend_name()},
               {"context_length", e->context},
               {"weights_bytes", mem.weights},
               {"scratch_bytes", mem.scratch},
               {"vocab_size", c.vocab},
               {"n_layers", c.n_layers},
               {"chat_template", e->chat != nullptr},
               {"warmup_ms", warmup_ms},
               {"decode_pipeline", e->model->async_argmax()},
               {"switches", non_default_switches(mo)},
               {"inactive_switches", e->model->inactive_switches()},  // as the CLI's load notes
               {"load_ms", ms_since(t0)},
               {"heap_bytes", uint64_t(emscripten_get_heap_size())}};
  if (e->reader) {
    info["file_bytes"] = e->reader->size();
    info["streamed_bytes"] = e->reader->total_read();
    info["largest_read_bytes"] = e->reader->largest_read();
  }
  g_engine = std::move(e);
  return info;
}

}  // namespace

extern "C" {

EMSCRIPTEN_KEEPALIVE void wgllm_free(char* p) { std::free(p); }

/// Loads the GGUF file at `path` (MEMFS: the whole file in the wasm heap; wgllm_load_stream does
/// not copy it) with a KV cache of `context` tokens (0: 2048).
/// warmup != 0: compiles every kernel variant at load time (runtime/warmup.h: throwaway forwards
/// on a scratch sequence; WebGPU compiles a pipeline at its first use, and on a software adapter
/// that takes seconds that would otherwise land in a reply's TTFT and tokens/s). Results are
/// unaffected: the scratch sequence is discarded.
/// decode_pipeline != 0: pipelined greedy decoding (runtime/decode_pipeline.h; same tokens).
/// switches: kernel- and model-level switches as the native CLI spells them ("" or null: the
/// defaults; models/switches.h apply_switch_args; an unknown flag or bad value fails the load).
EMSCRIPTEN_KEEPALIVE char* wgllm_load(const char* path, int context, int warmup, int decode_pipeline,
                                      const char* switches) {
  return guarded([&] {
    const auto t0 = std::chrono::steady_clock::now();
    g_engine.reset();
    auto e = std::make_unique<Engine>();
    e->src = ModelSource::open(path);
    if (!e->src->is_gguf()) throw Error(std::string(path) + ": the browser build loads GGUF files only");
    return finish_load(std::move(e), context, warmup, decode_pipeline, switches, t0);
  });
}

/// Loads the model from Module.wgllmModelBlob (a JS Blob or File), streamed: the header is read
/// first, then each tensor's rows a window at a time as they are packed into GPU buffers
/// (kernels::upload_weight_rows). Same result as wgllm_load plus file_bytes, streamed_bytes and
/// largest_read_bytes; heap_bytes stays far below the file size for large models.
EMSCRIPTEN_KEEPALIVE char* wgllm_load_stream(int context, int warmup, int decode_pipeline, const char* switches) {
  return guarded([&] {
    const auto t0 = std::chrono::steady_clock::now();
    g_engine.reset();
    auto e = std::make_unique<Engine>();
    e->reader = std::make_unique<BlobReader>();
    e->src = std::make_unique<ModelSource>();
    e->src->path = e->reader->name();
    e->src->gguf = GgufFile::open_streamed(*e->reader);
    e->src->tensors = std::make_unique<TensorStore>(*e->src->gguf);
    e->src->config = config_from_gguf(*e->src->gguf);
    return finish_load(std::move(e), context, warmup, decode_pipeline, switches, t0);
  });
}

/// Checks CreateEngine's `switches` (the native CLI's spelling, as wgllm_load_stream applies them) before
/// anything is downloaded: {switches: [the non-default ones]}, or kind bad_request naming the bad one.
EMSCRIPTEN_KEEPALIVE char* wgllm_check_switches(const char* switches) {
  return guarded([&] {
    ModelOptions mo;
    apply_web_switches(mo, switches);
    return json{{"switches", non_default_switches(mo)}};
  });
}

/// One chat turn. `request`: {messages: [{role, content}], max_tokens, temperature, top_p,
/// top_k, seed, ignore_eos}. Result: {text, token_ids, finish_reason, usage: {prompt_tokens,
/// completion_tokens, total_tokens, extra: {prefill_tokens_processed, reused_tokens, ttft_ms,
/// decode_tokens_per_s, prefill_tokens_per_s}}}.
EMSCRIPTEN_KEEPALIVE char* wgllm_chat(const char* request) {
  return guarded([&] { return loaded().conv.turn(parse_request(request, "request"), kToJs); });
}

/// One raw text completion (web_chat.h web::complete; the model's only entry point when it has no
/// chat template). `request`: {prompt, max_tokens, temperature, top_p, top_k, seed, ignore_eos}.
/// Result: {text, token_ids, finish_reason, usage: {prompt_tokens, completion_tokens,
/// total_tokens, extra: {prefill_tokens_processed, reused_tokens, ttft_ms, decode_tokens_per_s,
/// prefill_tokens_per_s}}}; tokens streamed
/// through Module.onToken as for wgllm_chat. The chat conversation is left as it was.
EMSCRIPTEN_KEEPALIVE char* wgllm_complete(const char* request) {
  return guarded([&] {
    Engine& e = loaded();
    return web::complete(*e.model, *e.tok, e.context, parse_request(request, "request"), kToJs);
  });
}

/// Raw-token benchmark, measured like the native `wgllm bench` (apps/cli/bench.cpp) so the two can
/// be compared on one GPU: for each prompt length P, a prompt of P tokens (request `text` tokenized,
/// repeated and cut as bench.cpp's prompt_tokens does), rep 0 a warm-up, then `reps` times: TTFT =
/// the prefill forward_argmax of P tokens (first token out), decode tok/s = (gen - 1) / the time of
/// the gen - 1 greedy steps after it. Request: {text, prompt_lengths: [512, 4096], gen: 128,
/// reps: 3}. Result: {rows: [{n_prompt, n_gen, ttft_ms: [...], decode_tok_s: [...], ttft_ms_median,
/// decode_tok_s_median, greedy_tokens, decode_step_last_rep}]}; greedy_tokens are the last rep's gen
/// tokens. Greedy steps go through runtime/decode_pipeline.h's GreedyDecoder as in the native
/// bench (pipelined when loaded with decodePipeline). decode_step_last_rep: {pipelined, record_us,
/// submit_us, wait_us (mean per decode step, gpu::StepTiming), js_crossings_prefill,
/// js_crossings_per_step (every wasm -> JS call, Emscripten's clock reads included),
/// webgpu_calls_prefill, webgpu_calls_per_step (WebGPU JS calls made by the glue's command-list
/// replay)}.
EMSCRIPTEN_KEEPALIVE char* wgllm_bench(const char* request) {
  return guarded([&] {
    loaded();
    const json req = parse_request(request, "bench request");
    const auto lengths = req.value("prompt_lengths", std::vector<uint32_t>{512, 4096});
    const uint32_t gen = req.value("gen", 128u), reps = req.value("reps", 3u);
    std::string text = req.value("text", std::string());
    if (text.empty()) text = "The quick brown fox jumps over the lazy dog. ";
    if (gen < 2 || reps < 1 || lengths.empty()) throw web::BadRequest("bench: gen >= 2, reps >= 1 and prompt_lengths needed");
    Model& m = *g_engine->model;
    json rows = json::array();
    for (uint32_t P : lengths) {
      if (P < 1 || P + gen + 8 > g_engine->context)
        throw web::BadRequest("bench: a prompt of " + std::to_string(P) + " tokens plus " + std::to_string(gen) +
                              " generated needs a context of " + std::to_string(P + gen + 8) + " (loaded: " +
                              std::to_string(g_engine->context) + "; load with a larger contextLength)");
      std::vector<int32_t> ids = g_engine->tok->encode(text.substr(0, std::min<size_t>(text.size(), size_t(P) * 8 + 64)));
      if (ids.empty()) ids.push_back(0);
      while (ids.size() < P) ids.insert(ids.end(), ids.begin(), ids.end());
      ids.resize(P);
      std::vector<double> ttft, tps;
      std::vector<int32_t> greedy;
      json split;  // last rep: host-side split of a decode step and the JS crossings
      for (uint32_t rep = 0; rep <= reps; ++rep) {  // rep 0: warm-up, not recorded
        auto seq = m.new_sequence(P + gen + 8);
        GreedyDecoder dec(m, *seq);  // pipelined (decodePipeline): step i+1 submitted before step i's id is read
        greedy.clear();
        const Counters c0 = counters();
        const auto t0 = std::chrono::steady_clock::now();
        int32_t t = dec.next(ids, false);
        const double tt = ms_since(t0);
        greedy.push_back(t);
        const Counters c1 = counters();
        double rec = 0, sub = 0, wait = 0;
        const auto d0 = std::chrono::steady_clock::now();
        for (uint32_t i = 1; i < gen; ++i) {
          t = dec.next(std::span<const int32_t>(&t, 1), i + 1 < gen);
          greedy.push_back(t);
          const gpu::StepTiming st = m.last_step_timing();
          rec += st.record_us;
          sub += st.submit_us;
          wait += st.wait_us;
        }
        const double dms = ms_since(d0);
        const Counters c2 = counters();
        if (rep == 0) continue;
        ttft.push_back(tt);
        tps.push_back((gen - 1) / (dms / 1000.0));
        // Each counters() read is itself one crossing: subtracted.
        const double steps = gen - 1;
        split = {{"pipelined", dec.pipelined()},
                 {"record_us", rec / steps},
                 {"submit_us", sub / steps},
                 {"wait_us", wait / steps},
                 {"js_crossings_prefill", c1.crossings - c0.crossings - 1},
                 {"js_crossings_per_step", (c2.crossings - c1.crossings - 1) / steps},
                 {"webgpu_calls_prefill", c1.gpu_calls - c0.gpu_calls},
                 {"webgpu_calls_per_step", (c2.gpu_calls - c1.gpu_calls) / steps}};
      }
      auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
      };
      rows.push_back({{"n_prompt", P}, {"n_gen", gen}, {"ttft_ms", ttft}, {"decode_tok_s", tps},
                      {"ttft_ms_median", median(ttft)}, {"decode_tok_s_median", median(tps)},
                      {"prefill_tok_s_median", P / (median(ttft) / 1000.0)}, {"greedy_tokens", greedy},
                      {"decode_step_last_rep", split}});
    }
    return json{{"rows", rows}, {"backend", m.backend_name()}, {"context_length", g_engine->context}};
  });
}

/// Forgets the conversation (the next request starts a new one).
EMSCRIPTEN_KEEPALIVE char* wgllm_reset() {
  return guarded([&] {
    loaded().conv.reset();
    return json{{"ok", true}};
  });
}

}  // extern "C"
