// wgllm engine worker: owns the WebGPU device and the WebAssembly engine (build/wgllm.js).
// Talks to web/wgllm.js through the versioned message schema in web/protocol.md (PROTOCOL = 1).
// Requests are served one at a time (the asyncified engine runs one call at a time); "abort" is
// handled immediately (the engine yields to the event loop at every GPU readback).
import { loadModelBytes } from './model_store.js';

const PROTOCOL = 1;
let engine = null;       // the Emscripten module
let abortRequested = false;
let queue = Promise.resolve();

const post = (msg) => self.postMessage({ v: PROTOCOL, ...msg });

class EngineError extends Error {
  constructor(kind, message) { super(message); this.kind = kind; }
}

// Calls an engine entry point (async under asyncify); returns its parsed JSON or throws.
async function call(name, types, args) {
  const ptr = await engine.ccall(name, 'number', types, args, { async: true });
  const text = engine.UTF8ToString(ptr);
  engine._wgllm_free(ptr);
  const res = JSON.parse(text);
  if (res.error) throw new EngineError(res.kind || 'engine', res.error);
  return res;
}

async function initGpu() {
  if (!self.navigator.gpu)
    throw new EngineError('no_webgpu', 'WebGPU is not available in this browser (navigator.gpu is missing): ' +
      'use a browser with WebGPU enabled (Chrome/Edge 113+, or start Chromium with --enable-unsafe-webgpu)');
  const adapter = await navigator.gpu.requestAdapter();
  if (!adapter) throw new EngineError('no_webgpu', 'WebGPU: no adapter available (navigator.gpu.requestAdapter() returned null)');
  // Ask for everything the adapter offers that the engine relies on (large weight buffers).
  const want = ['maxBufferSize', 'maxStorageBufferBindingSize', 'maxComputeWorkgroupStorageSize',
    'maxComputeInvocationsPerWorkgroup', 'maxComputeWorkgroupSizeX', 'maxStorageBuffersPerShaderStage',
    'maxComputeWorkgroupsPerDimension'];
  const requiredLimits = {};
  for (const k of want) if (adapter.limits[k] !== undefined) requiredLimits[k] = adapter.limits[k];
  const device = await adapter.requestDevice({ requiredLimits });
  return { adapter, device };
}

async function handleLoad(id, msg) {
  const { adapter, device } = await initGpu();
  const { bytes, cached, keep } = await loadModelBytes(msg.source, {
    onProgress: (p) => post({ type: 'progress', id, ...p }),
    maxBytes: 2 ** 31,  // the model is mapped into the 32-bit wasm heap (4 GiB) with the engine's own memory
  });
  post({ type: 'progress', id, phase: 'init', loaded: bytes.byteLength, total: bytes.byteLength, percent: 100 });
  const createWgllmModule = (await import(msg.moduleUrl || './build/wgllm.js')).default;
  engine = await createWgllmModule({
    wgllmDevice: device,
    wgllmAdapterInfo: adapter.info,
    print: (s) => console.log('[wgllm]', s),
    printErr: (s) => console.warn('[wgllm]', s),
  });
  engine.FS.writeFile('/model.gguf', bytes);
  let info;
  try {
    info = await call('wgllm_load', ['string', 'number', 'number'],
      ['/model.gguf', msg.contextLength || 0, msg.warmup === false ? 0 : 1]);
  } finally {
    // The engine reads the file through mmap, which in Emscripten's MEMFS is a copy in the wasm
    // heap: the file itself is no longer needed (frees one copy of the model).
    engine.FS.unlink('/model.gguf');
  }
  info.cached = cached;
  if (keep) {
    const storageError = await keep();
    if (storageError) info.storage_error = storageError;
  }
  info.adapter = { description: adapter.info.description, vendor: adapter.info.vendor,
    architecture: adapter.info.architecture, isFallbackAdapter: !!adapter.info.isFallbackAdapter };
  return info;
}

async function handleChat(id, msg) {
  abortRequested = false;
  engine.onToken = (tokenId, text) => {
    post({ type: 'token', id, token_id: tokenId, text });
    return !abortRequested;
  };
  try {
    return await call('wgllm_chat', ['string'], [JSON.stringify(msg.request)]);
  } finally {
    engine.onToken = null;
  }
}

async function serve(msg) {
  const { id, type } = msg;
  try {
    if (type !== 'load' && !engine) throw new EngineError('no_model', 'no model loaded: call CreateEngine first');
    let result;
    if (type === 'load') result = await handleLoad(id, msg);
    else if (type === 'chat') result = await handleChat(id, msg);
    else if (type === 'reset') result = await call('wgllm_reset', [], []);
    else throw new EngineError('bad_request', `unknown message type '${type}'`);
    post({ type: 'result', id, result });
  } catch (e) {
    post({ type: 'error', id, kind: e.kind || 'engine', message: String((e && e.message) || e) });
  }
}

self.onmessage = (ev) => {
  const msg = ev.data;
  if (!msg || msg.v !== PROTOCOL) {
    post({ type: 'error', id: msg && msg.id, kind: 'bad_request',
      message: `message protocol version ${msg && msg.v} is not ${PROTOCOL}` });
    return;
  }
  if (msg.type === 'abort') { abortRequested = true; return; }
  queue = queue.then(() => serve(msg));
};
