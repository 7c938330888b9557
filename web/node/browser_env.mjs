// The few browser APIs the page's JS (web/wgllm.js, web/worker.js, web/model_store.js) and the
// Emscripten module (build-wasm/web/wgllm.js, built with -sENVIRONMENT=worker) use that Node lacks,
// so that the SAME files run under Node with Dawn's WebGPU (npm `webgpu`, dawn.node). Nothing here
// is a second implementation of the engine or its loader; what each shim stands for:
//   navigator.gpu    dawn.node's GPU object (create([...options])), kept referenced on globalThis
//                    (when it is collected Dawn's instance is destroyed and the process aborts)
//   Worker           an in-process stand-in for `new Worker(url, {type: 'module'})`: worker.js is
//                    imported as a module in this thread (a fresh module instance per Worker) and
//                    messages pass by reference one event-loop turn later (a browser clones them and
//                    runs the worker in its own thread; the bench timings are taken inside the
//                    engine, so the difference does not enter them). One live worker at a time.
//   self, location   worker globals (self === globalThis; location = the worker script's URL,
//                    which Emscripten reads to find its directory)
//   fetch(file:)     Node's fetch refuses file: URLs; the Emscripten module fetches its .wasm
//                    beside itself, so file: URLs are answered from disk (other URLs: Node's fetch)
//   NodeFile         a File of the local file system that is never read whole: size, name,
//                    lastModified, slice(); given to CreateEngine as {file}, it takes the page's
//                    picked-File path of model_store.js (no OPFS in Node: the "could not be stored"
//                    note in the load result is expected)
//   FileReaderSync   readAsArrayBuffer(NodeFile slice) reads that byte range with fs.readSync: the
//                    streaming weight loader (web/wasm/engine.cpp wgjs_blob_read) reads the model a
//                    window at a time, as it reads an OPFS file in the browser's worker; every read
//                    is counted (fileReadStats(): reads, bytes, the highest byte reached, reads
//                    ending past 4 GiB: evidence that offsets beyond 32 bits reach the file)
import { closeSync, fstatSync, openSync, readFileSync, readSync } from 'node:fs';
import { basename } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export class NodeFile {
  /// path: a local file; the descriptor stays open for the life of the process (the engine reads
  /// the weights through it while it loads).
  static open(path) {
    const fd = openSync(path, 'r');
    const st = fstatSync(fd);
    return new NodeFile(fd, basename(path), 0, st.size, st.mtimeMs);
  }
  constructor(fd, name, start, end, lastModified) {
    this.fd = fd; this.name = name; this.start = start; this.end = end; this.lastModified = Math.floor(lastModified);
    this.type = '';
  }
  get size() { return this.end - this.start; }
  /// Blob.slice semantics for non-negative offsets (clamped to the file).
  slice(a = 0, b = this.size) {
    const s = Math.min(this.size, Math.max(0, a)), e = Math.min(this.size, Math.max(s, b));
    return new NodeFile(this.fd, this.name, this.start + s, this.start + e, this.lastModified);
  }
  close() { closeSync(this.fd); }
}

const FOUR_GIB = 2 ** 32;
const readStats = { reads: 0, bytes: 0, largest_read_bytes: 0, max_end: 0, reads_past_4gib: 0, bytes_past_4gib: 0 };

/// What the FileReaderSync shim has read so far (all NodeFiles of the process): reads, bytes,
/// largest_read_bytes, max_end (the highest file offset + 1 read), reads_past_4gib (reads whose
/// range ends past 2^32 bytes) and bytes_past_4gib (bytes read at offsets >= 2^32).
export function fileReadStats() { return { ...readStats }; }

class NodeFileReaderSync {
  readAsArrayBuffer(blob) {
    if (!(blob instanceof NodeFile)) throw new TypeError('FileReaderSync (Node shim): only NodeFile slices can be read');
    const out = new Uint8Array(blob.size);
    let got = 0;
    while (got < out.length) {
      const n = readSync(blob.fd, out, got, out.length - got, blob.start + got);
      if (n === 0) break;  // the caller reports the short read
      got += n;
    }
    const end = blob.start + got;
    readStats.reads++;
    readStats.bytes += got;
    readStats.largest_read_bytes = Math.max(readStats.largest_read_bytes, got);
    readStats.max_end = Math.max(readStats.max_end, end);
    if (end > FOUR_GIB) {
      readStats.reads_past_4gib++;
      readStats.bytes_past_4gib += end - Math.max(blob.start, FOUR_GIB);
    }
    return out.buffer;
  }
}

let liveWorker = null;
let workerInstances = 0;

class InProcessWorker {
  constructor(url) {
    if (liveWorker) throw new Error('Worker (Node shim): one engine worker at a time (terminate() the previous one)');
    liveWorker = this;
    this.onmessage = null;
    this.onerror = null;
    this.dead = false;
    this.url = new URL(String(url));
    globalThis.location = this.url;
    // worker.js posts with self.postMessage and receives through self.onmessage.
    globalThis.postMessage = (msg) => setImmediate(() => { if (!this.dead && this.onmessage) this.onmessage({ data: msg }); });
    globalThis.onmessage = null;
    this.ready = import(`${this.url.href}${this.url.search ? '&' : '?'}instance=${++workerInstances}`).catch((e) => {
      if (this.onerror) this.onerror({ message: `worker module ${this.url.href} failed to load: ${e.stack || e}` });
      throw e;
    });
  }
  postMessage(msg) {
    this.ready.then(() => setImmediate(() => { if (!this.dead && globalThis.onmessage) globalThis.onmessage({ data: msg }); }), () => {});
  }
  terminate() {
    this.dead = true;
    if (liveWorker === this) liveWorker = null;
  }
}

function nodeFetch(orig) {
  return async (input, init) => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    if (!url.startsWith('file:')) return orig(input, init);
    const path = fileURLToPath(url);
    const type = path.endsWith('.wasm') ? 'application/wasm' : 'application/octet-stream';
    try {
      return new Response(readFileSync(path), { status: 200, headers: { 'content-type': type } });
    } catch (e) {
      return new Response(null, { status: 404, statusText: e.code || String(e) });
    }
  };
}

/// The backend and name of every adapter the given dawn.node options can see, from dawn.node's
/// own listing (it prints them when asked for an adapter name that does not exist), e.g.
/// [{backend: 'vulkan', name: 'NVIDIA H200'}]. Never throws.
export async function listDawnAdapters(create, options) {
  const gpu = create([...options.filter((o) => !o.startsWith('adapter=')), 'adapter=\u0001list']);
  (globalThis.__wgllmDawnKeep ||= []).push(gpu);
  try {
    await gpu.requestAdapter();
    return [];
  } catch (e) {
    return [...String(e.message).matchAll(/backend: '([^']*)', name: '([^']*)'/g)].map((m) => ({ backend: m[1], name: m[2] }));
  }
}

/// Loads dawn.node (`webgpuDir`: the unpacked npm `webgpu` package, its index.js) with `options`
/// (e.g. ['backend=vulkan']) and installs the shims above. Returns {create, gpu, package}.
export async function installBrowserEnv({ webgpuDir, options }) {
  const index = pathToFileURL(`${webgpuDir}/index.js`).href;
  const { create, globals } = await import(index);
  const pkg = JSON.parse(readFileSync(`${webgpuDir}/package.json`, 'utf8'));
  Object.assign(globalThis, globals);  // GPUBufferUsage, GPUMapMode, GPUShaderStage, ...
  const gpu = create(options);
  globalThis.__wgllmDawnGpu = gpu;  // keep referenced: see the header
  if (globalThis.navigator) {
    try { Object.defineProperty(globalThis.navigator, 'gpu', { value: gpu, configurable: true }); } catch (e) { /* replaced below */ }
  }
  if (!globalThis.navigator || globalThis.navigator.gpu !== gpu) {
    const userAgent = `Node.js/${process.versions.node} (dawn.node ${pkg.version})`;
    Object.defineProperty(globalThis, 'navigator', { value: { gpu, userAgent }, configurable: true, writable: true });
  }
  globalThis.self = globalThis;
  globalThis.Worker = InProcessWorker;
  globalThis.FileReaderSync = NodeFileReaderSync;
  globalThis.fetch = nodeFetch(globalThis.fetch);
  return { create, gpu, package: `${pkg.name}@${pkg.version}` };
}
