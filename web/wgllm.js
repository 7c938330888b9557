// wgllm in the browser: an OpenAI-shaped chat API over the engine running in a Web Worker.
//
//   import { CreateEngine } from './wgllm.js';
//   const engine = await CreateEngine('/models/SmolLM2-135M-Instruct.Q4_1.gguf', {onProgress});
//   for await (const chunk of await engine.chat.completions.create({messages, stream: true}))
//     out += chunk.choices[0].delta.content ?? '';
//
// model: a URL string, a File (e.g. from <input type=file>), or {url} / {file}.
// options: onProgress({phase, loaded, total, percent}) (phases: download | cache | file | init |
// upload), onDeviceLost(message), contextLength (KV cache tokens, default 2048), warmup (default
// true: compile the GPU kernels while loading, see web/wasm/engine.cpp), decodePipeline (default
// true: greedy decoding submits the next step before reading this one's token; same tokens, see
// src/runtime/decode_pipeline.h), switches (kernel switches as the native CLI spells them, e.g.
// '--attn-decode-key-lanes 1 --no-fuse-norm'; `wgllm flags` lists them; default: none), workerUrl, moduleUrl (the Emscripten module, default
// ./build/wgllm.js beside the worker).
// The weights stream from browser storage (OPFS) or the network into GPU buffers: the model is
// bounded by GPU memory and the storage quota, not by the 32-bit wasm heap. If the GPU device is
// lost (driver reset, GPUDevice.lost), requests fail with kind 'device_lost' and
// `await engine.reload()` starts a new worker and device and loads the stored model again.
// Requests: {messages, stream, temperature (default 0 = greedy), top_p, top_k, max_tokens (256),
// seed, ignore_eos, signal (AbortSignal)}. The engine keeps the conversation between requests:
// a request that appends to the previous conversation processes only its new tokens
// (usage.extra.prefill_tokens_processed); see web/protocol.md for the rules.
// Raw text: engine.completions.create({prompt, stream, max_tokens, ...}) continues a text as is
// (OpenAI's completions shape: choices[0].text; chunks of object 'text_completion'), on a sequence of
// its own (the conversation is untouched); the only way to use a base model, one whose GGUF has no
// chat template (engine.info.chat_template false: chat requests fail with kind bad_request).
// Errors are WgllmError with .kind: no_webgpu, device_limits, device_lost,
// unsupported_architecture, network, storage, context_full, bad_request, no_model, engine.

const PROTOCOL = 1;

export class WgllmError extends Error {
  constructor(kind, message) {
    super(message);
    this.name = 'WgllmError';
    this.kind = kind;
  }
}

// An async queue of streamed chunks.
class ChunkStream {
  constructor() { this.items = []; this.waiters = []; this.done = false; this.error = null; }
  push(x) { const w = this.waiters.shift(); if (w) w.resolve({ value: x, done: false }); else this.items.push(x); }
  end(err) {
    this.done = true; this.error = err || null;
    for (const w of this.waiters.splice(0)) err ? w.reject(err) : w.resolve({ value: undefined, done: true });
  }
  [Symbol.asyncIterator]() {
    return {
      next: () => {
        if (this.items.length) return Promise.resolve({ value: this.items.shift(), done: false });
        if (this.done) return this.error ? Promise.reject(this.error) : Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }));
      },
    };
  }
}

// Text the engine gets must be well-formed Unicode: a lone UTF-16 surrogate (e.g. half of an
// emoji cut by a slice) has no UTF-8 form, and JSON carries it only as an escape the engine's parser
// refuses. Named here instead of surfacing as a JSON error.
function wellFormed(text, what) {
  if (typeof text === 'string' && typeof text.isWellFormed === 'function' && !text.isWellFormed())
    throw new WgllmError('bad_request', `${what}: not well-formed Unicode (a lone UTF-16 surrogate)`);
}

export class Engine {
  constructor(worker, modelName, load = null) {
    this.modelName = modelName;
    this.nextId = 1;
    this.pending = new Map();  // id -> {resolve, reject, onEvent}
    this.info = null;
    this.lost = null;          // the device-loss message, once lost
    this.load = load;          // {fields, options, workerUrl}: what reload() repeats
    this.chat = { completions: { create: (req) => this.#create(req) } };
    this.completions = { create: (req) => this.#complete(req) };  // raw text (base models: info.chat_template false)
    this.#attach(worker);
  }

  #attach(worker) {
    this.worker = worker;
    worker.onmessage = (ev) => this.#onMessage(ev.data);
    worker.onerror = (ev) => {
      const err = new WgllmError('engine', `engine worker failed: ${ev.message || 'unknown error'}`);
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
    };
  }

  /// Loads the model into this engine's worker (CreateEngine and reload()).
  async _load() {
    const { fields, options } = this.load;
    this.info = await this.request('load', fields,
      (msg) => { if (msg.type === 'progress' && options.onProgress) options.onProgress(msg); });
    return this.info;
  }

  /// After a device loss (or at any time): a new worker and GPU device, and the model loaded again
  /// (from browser storage when it was stored: info.cached). The conversation starts over.
  async reload() {
    this.worker.terminate();
    for (const p of this.pending.values()) p.reject(new WgllmError('device_lost', 'the engine was reloaded'));
    this.pending.clear();
    this.lost = null;
    this.#attach(new Worker(this.load.workerUrl, { type: 'module' }));
    return this._load();
  }

  /// Raw-token benchmark in the product configuration (web/wasm/engine.cpp wgllm_bench):
  /// {prompt_lengths: [512, 4096], gen: 128, reps: 3} -> JSON rows.
  bench(request) { return this.request('bench', { request }); }

  /// Tests: destroys the GPU device as a driver reset would (the engine sees GPUDevice.lost).
  simulateDeviceLoss() { return this.request('lose_device'); }

  #onMessage(msg) {
    if (msg.type === 'device_lost') {
      this.lost = msg.message;
      if (this.load && this.load.options.onDeviceLost) this.load.options.onDeviceLost(msg.message);
      return;
    }
    const p = this.pending.get(msg.id);
    if (!p) return;
    if (msg.type === 'result') { this.pending.delete(msg.id); p.resolve(msg.result); }
    else if (msg.type === 'error') { this.pending.delete(msg.id); p.reject(new WgllmError(msg.kind, msg.message)); }
    else if (p.onEvent) p.onEvent(msg);
  }

  request(type, fields = {}, onEvent = null) {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject, onEvent });
      this.worker.postMessage({ v: PROTOCOL, id, type, ...fields });
    });
  }

  /// Stops the generation in progress (its result has finish_reason "abort").
  interruptGenerate() { this.worker.postMessage({ v: PROTOCOL, type: 'abort' }); }
  /// Forgets the conversation; the next request starts a new one.
  async resetChat() { await this.request('reset'); }
  /// Terminates the worker (frees the GPU memory).
  unload() { this.worker.terminate(); }

  #create(req) {
    if (!req || !Array.isArray(req.messages)) throw new WgllmError('bad_request', 'create(): messages must be an array');
    req.messages.forEach((m, i) => wellFormed(m && m.content, `messages[${i}].content`));
    return this.#generate('chat', req, 'chatcmpl', (r) => ({
      object: 'chat.completion',
      choices: [{ index: 0, message: { role: 'assistant', content: r.text }, finish_reason: r.finish_reason }],
    }), (text, finish_reason) => ({
      object: 'chat.completion.chunk', choices: [{ index: 0, delta: finish_reason ? {} : { content: text }, finish_reason }],
    }), { object: 'chat.completion.chunk', choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] });
  }

  #complete(req) {
    if (!req || typeof req.prompt !== 'string') throw new WgllmError('bad_request', 'completions.create(): prompt must be a string');
    wellFormed(req.prompt, 'prompt');
    return this.#generate('complete', req, 'cmpl', (r) => ({
      object: 'text_completion', choices: [{ index: 0, text: r.text, logprobs: null, finish_reason: r.finish_reason }],
    }), (text, finish_reason) => ({
      object: 'text_completion', choices: [{ index: 0, text, logprobs: null, finish_reason }],
    }), null);
  }

  /// One generating request to the worker ('chat' or 'complete'), in OpenAI's response shapes:
  /// whole (`body(result)`) or, with `stream: true`, as an async iterable of chunks (`first`, then
  /// `delta(text, null)` per token, then `delta('', finish_reason)` with the usage). `signal`
  /// (an AbortSignal) stops it (finish_reason "abort").
  #generate(type, req, idPrefix, body, delta, first) {
    const { stream, signal, ...request } = req;
    const id = `${idPrefix}-${Date.now().toString(36)}${Math.random().toString(36).slice(2, 8)}`;
    const created = Math.floor(Date.now() / 1000);
    const model = this.modelName;
    const t0 = performance.now();
    let firstTokenAt = null;
    const onAbort = () => this.interruptGenerate();
    if (signal) {
      if (signal.aborted) throw new WgllmError('abort', 'the request was aborted before it started');
      signal.addEventListener('abort', onAbort, { once: true });
    }
    const done = (r) => { if (signal) signal.removeEventListener('abort', onAbort); return r; };
    const usageOf = (r) => ({ ...r.usage, extra: { ...r.usage.extra,
      page_ttft_ms: firstTokenAt === null ? null : firstTokenAt - t0, page_total_ms: performance.now() - t0 } });
    const onToken = (msg) => { if (msg.type === 'token' && firstTokenAt === null) firstTokenAt = performance.now(); };

    if (!stream) {
      return this.request(type, { request }, onToken).then(done, (e) => { done(); throw e; }).then((r) => ({
        id, created, model, ...body(r), usage: usageOf(r), wgllm: { token_ids: r.token_ids },
      }));
    }
    const chunks = new ChunkStream();
    const chunk = (c, extra = {}) => ({ id, created, model, ...c, ...extra });
    if (first) chunks.push(chunk(first));
    this.request(type, { request }, (msg) => {
      onToken(msg);
      if (msg.type === 'token' && msg.text) chunks.push(chunk(delta(msg.text, null), { wgllm: { token_id: msg.token_id } }));
    }).then((r) => {
      done();
      chunks.push(chunk(delta('', r.finish_reason), { usage: usageOf(r), wgllm: { token_ids: r.token_ids } }));
      chunks.end();
    }, (e) => { done(); chunks.end(e); });
    return Promise.resolve(chunks);
  }
}

/// Starts the worker, fetches (or reads from storage) the model and loads it on the GPU.
export async function CreateEngine(model, options = {}) {
  const source = typeof model === 'string' ? { url: model }
    : (typeof File !== 'undefined' && model instanceof File) ? { file: model } : model;
  if (!source || (!source.url && !source.file)) throw new WgllmError('bad_request', 'CreateEngine: model must be a URL, a File, {url} or {file}');
  if (!('gpu' in navigator))
    throw new WgllmError('no_webgpu', 'WebGPU is not available in this browser (navigator.gpu is missing): use a ' +
      'browser with WebGPU enabled (Chrome/Edge 113+, or Chromium started with --enable-unsafe-webgpu)');
  const workerUrl = options.workerUrl || new URL('./worker.js', import.meta.url);
  const worker = new Worker(workerUrl, { type: 'module' });
  const name = source.url ? source.url.split('/').pop() : source.file.name;
  const fields = {
    source, contextLength: options.contextLength || 0, warmup: options.warmup !== false,
    decodePipeline: options.decodePipeline !== false, switches: options.switches ? String(options.switches) : '',
    moduleUrl: options.moduleUrl ? String(options.moduleUrl) : undefined,
    storageQuotaForTest: options.storageQuotaForTest,
  };
  const engine = new Engine(worker, name, { fields, options, workerUrl });
  try {
    await engine._load();
  } catch (e) {
    engine.worker.terminate();
    throw e;
  }
  return engine;
}
