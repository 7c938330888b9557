// wgllm engine worker: owns the WebGPU device and the WebAssembly engine (build/wgllm.js).
// Talks to web/wgllm.js through the versioned message schema in web/protocol.md (PROTOCOL = 1).
// Requests are served one at a time (the asyncified engine runs one call at a time); "abort" is
// handled immediately (the engine yields to the event loop at every GPU readback).
// The model file stays a Blob here (web/model_store.js); the engine reads it in windows while it
// uploads the weights (wgllm_load_stream), so the wasm heap never holds the model.
import { openModel } from './model_store.js';

const PROTOCOL = 1;
let engine = null;       // the Emscripten module
let gpu = null;          // {adapter, device}
let lost = null;         // why the device was lost (then every request fails with 'device_lost')
let simulatedLoss = false;
let abortRequested = false;
let queue = Promise.resolve();

const post = (msg) => self.postMessage({ v: PROTOCOL, ...msg });

class EngineError extends Error {
  constructor(kind, message) { super(message); this.kind = kind; }
}

const lostError = () => new EngineError('device_lost', `the GPU device was lost (${lost}): the engine cannot continue; ` +
  'call engine.reload() to start a new device and load the model again from browser storage');

// Calls an engine entry point (async under asyncify); returns its parsed JSON or throws.
async function call(name, types, args, mod = engine) {
  const ptr = await mod.ccall(name, 'number', types, args, { async: true });
  const text = mod.UTF8ToString(ptr);
  mod._wgllm_free(ptr);
  const res = JSON.parse(text);
  if (res.error) throw lost ? lostError() : new EngineError(res.kind || 'engine', res.error);
  return res;
}

// The optional features the kernels use when present (the same switches as the native build:
// src/gpu/context.cpp requests them too): f16 prefill tiles, subgroup reductions.
const OPTIONAL_FEATURES = ['shader-f16', 'subgroups'];

async function initGpu() {
  if (!self.navigator.gpu)
    throw new EngineError('no_webgpu', 'WebGPU is not available in this browser (navigator.gpu is missing): ' +
      'use a browser with WebGPU enabled (Chrome/Edge 113+, or start Chromium with --enable-unsafe-webgpu)');
  const adapter = await navigator.gpu.requestAdapter({ powerPreference: 'high-performance' });
  if (!adapter) throw new EngineError('no_webgpu', 'WebGPU: no adapter available (navigator.gpu.requestAdapter() returned null)');
  // Ask for everything the adapter offers that the engine relies on (large weight buffers).
  const want = ['maxBufferSize', 'maxStorageBufferBindingSize', 'maxComputeWorkgroupStorageSize',
    'maxComputeInvocationsPerWorkgroup', 'maxComputeWorkgroupSizeX', 'maxStorageBuffersPerShaderStage',
    'maxComputeWorkgroupsPerDimension'];
  const requiredLimits = {};
  for (const k of want) if (adapter.limits[k] !== undefined) requiredLimits[k] = adapter.limits[k];
  const requiredFeatures = OPTIONAL_FEATURES.filter((f) => adapter.features.has(f));
  const device = await adapter.requestDevice({ requiredLimits, requiredFeatures });
  device.lost.then((info) => {
    if (info.reason === 'destroyed' && !simulatedLoss) return;  // our own unload
    lost = `${info.reason || 'unknown'}: ${info.message || 'no message'}`;
    post({ type: 'device_lost', message: lost });
  });
  return { adapter, device };
}

function adapterJson(adapter, device) {
  const i = adapter.info || {};
  return { vendor: i.vendor, architecture: i.architecture, device: i.device, description: i.description,
    isFallbackAdapter: !!(i.isFallbackAdapter ?? adapter.isFallbackAdapter),
    subgroupMinSize: i.subgroupMinSize, subgroupMaxSize: i.subgroupMaxSize,
    adapter_features: Array.from(adapter.features).sort(), device_features: Array.from(device.features).sort(),
    maxBufferSize: device.limits.maxBufferSize, maxStorageBufferBindingSize: device.limits.maxStorageBufferBindingSize };
}

async function handleLoad(id, msg) {
  if (lost) throw lostError();
  gpu = await initGpu();
  const { adapter, device } = gpu;
  // The engine module first, so that a bad `switches` fails before any download or storage work;
  // the model file reaches it as Module.wgllmModelBlob once opened (read lazily by the engine).
  const createWgllmModule = (await import(msg.moduleUrl || './build/wgllm.js')).default;
  let uploaded = 0, lastReport = 0, total = 0;
  const mod = await createWgllmModule({
    wgllmDevice: device,
    wgllmAdapterInfo: adapter.info,
    wgllmModelBlob: null,
    // Bytes of the file read by the engine while it packs and uploads the weights.
    onRead: (off, n) => {
      uploaded += n;
      const now = performance.now();
      if (now - lastReport > 100) {
        lastReport = now;
        post({ type: 'progress', id, phase: 'upload', loaded: uploaded, total, percent: Math.min(100, (100 * uploaded) / total) });
      }
    },
    print: (s) => console.log('[wgllm]', s),
    printErr: (s) => console.warn('[wgllm]', s),
  });
  if (msg.switches) await call('wgllm_check_switches', ['string'], [msg.switches], mod);
  const model = await openModel(msg.source, {
    onProgress: (p) => post({ type: 'progress', id, ...p }),
    quotaOverride: msg.storageQuotaForTest,
  });
  const blob = model.blob;
  total = blob.size;
  mod.wgllmModelBlob = blob;
  post({ type: 'progress', id, phase: 'init', loaded: 0, total, percent: 0 });
  engine = mod;
  const info = await call('wgllm_load_stream', ['number', 'number', 'number', 'string'],
    [msg.contextLength || 0, msg.warmup === false ? 0 : 1, msg.decodePipeline === false ? 0 : 1, msg.switches || '']);
  post({ type: 'progress', id, phase: 'upload', loaded: uploaded, total, percent: 100 });
  info.cached = model.cached;
  if (model.storage_error) info.storage_error = model.storage_error;
  if (model.keep) {
    const storageError = await model.keep();
    if (storageError) info.storage_error = storageError;
  }
  info.heap_bytes_js = engine.HEAP8 ? engine.HEAP8.length : null;  // the same figure seen from JS
  for (const note of info.inactive_switches || []) console.warn('[wgllm] note:', note);  // as the native CLI
  info.adapter = adapterJson(adapter, device);
  return info;
}

// A generating request ('chat': wgllm_chat, 'complete': wgllm_complete): its tokens are posted as
// they come; an 'abort' message stops it at the next token.
async function handleGenerate(id, msg, entry) {
  abortRequested = false;
  engine.onToken = (tokenId, text) => {
    post({ type: 'token', id, token_id: tokenId, text });
    return !abortRequested;
  };
  try {
    return await call(entry, ['string'], [JSON.stringify(msg.request)]);
  } finally {
    engine.onToken = null;
  }
}

async function serve(msg) {
  const { id, type } = msg;
  try {
    if (type !== 'load' && lost) throw lostError();
    if (type !== 'load' && type !== 'adapter' && !engine) throw new EngineError('no_model', 'no model loaded: call CreateEngine first');
    let result;
    if (type === 'load') result = await handleLoad(id, msg);
    else if (type === 'chat') result = await handleGenerate(id, msg, 'wgllm_chat');
    else if (type === 'complete') result = await handleGenerate(id, msg, 'wgllm_complete');
    else if (type === 'bench') result = await call('wgllm_bench', ['string'], [JSON.stringify(msg.request)]);
    else if (type === 'reset') result = await call('wgllm_reset', [], []);
    else if (type === 'lose_device') {  // tests: a device loss the engine did not cause
      simulatedLoss = true;
      gpu.device.destroy();
      result = { ok: true };
    } else throw new EngineError('bad_request', `unknown message type '${type}'`);
    post({ type: 'result', id, result });
  } catch (e) {
    const err = lost && !(e instanceof EngineError && e.kind === 'device_lost') ? lostError() : e;
    post({ type: 'error', id, kind: err.kind || 'engine', message: String((err && err.message) || err) });
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
