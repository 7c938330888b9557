// Model bytes for the engine worker: from a URL (fetch, streamed with progress) or a File the user
// picked, kept in the origin's private file system (OPFS) so the next visit loads from disk.
// Progress events: {phase: 'cache' | 'download' | 'file', loaded, total, percent}.
// Errors carry a kind: 'network' (fetch failed / HTTP status), 'model_too_large', 'storage'.
// A failure to *store* is not fatal: the model still loads, and keep() says why it was not kept.

class StoreError extends Error {
  constructor(kind, message) { super(message); this.kind = kind; }
}

const DIR = 'wgllm-models';

async function keyName(key) {
  const h = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(key));
  return Array.from(new Uint8Array(h), (b) => b.toString(16).padStart(2, '0')).join('').slice(0, 32);
}

async function modelDir() {
  if (!navigator.storage || !navigator.storage.getDirectory)
    throw new StoreError('storage', 'this browser has no origin private file system (navigator.storage.getDirectory)');
  const root = await navigator.storage.getDirectory();
  return root.getDirectoryHandle(DIR, { create: true });
}

// Reads a stored model if a complete copy exists (its marker file records key and size).
async function readCached(key, onProgress) {
  try {
    const dir = await modelDir();
    const name = await keyName(key);
    const marker = await (await (await dir.getFileHandle(name + '.json')).getFile()).text();
    const meta = JSON.parse(marker);
    const file = await (await dir.getFileHandle(name + '.gguf')).getFile();
    if (meta.key !== key || meta.size !== file.size) return null;
    return await readStream(file.stream(), file.size, 'cache', onProgress);
  } catch (e) {
    return null;  // not stored (or unreadable): fetch again
  }
}

async function store(key, bytes) {
  const dir = await modelDir();
  const name = await keyName(key);
  try { await dir.removeEntry(name + '.json'); } catch (e) { /* none yet */ }
  const fh = await dir.getFileHandle(name + '.gguf', { create: true });
  const w = await fh.createWritable();
  await w.write(bytes);
  await w.close();
  const mh = await dir.getFileHandle(name + '.json', { create: true });
  const mw = await mh.createWritable();
  await mw.write(JSON.stringify({ key, size: bytes.byteLength, stored: new Date().toISOString() }));
  await mw.close();
}

async function readStream(stream, total, phase, onProgress) {
  const reader = stream.getReader();
  let buf = new Uint8Array(total > 0 ? total : 1 << 20);
  let loaded = 0, lastReport = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (loaded + value.byteLength > buf.byteLength) {  // unknown or wrong length: grow
      const bigger = new Uint8Array(Math.max(buf.byteLength * 2, loaded + value.byteLength));
      bigger.set(buf.subarray(0, loaded));
      buf = bigger;
    }
    buf.set(value, loaded);
    loaded += value.byteLength;
    const now = performance.now();
    if (now - lastReport > 100) {
      lastReport = now;
      onProgress({ phase, loaded, total, percent: total ? Math.min(100, (100 * loaded) / total) : null });
    }
  }
  onProgress({ phase, loaded, total: loaded, percent: 100 });
  return buf.byteLength === loaded ? buf : buf.slice(0, loaded);
}

function checkSize(size, maxBytes, what) {
  if (size > maxBytes)
    throw new StoreError('model_too_large', `${what} is ${(size / 2 ** 20).toFixed(0)} MiB: larger than the ` +
      `browser engine can hold (${(maxBytes / 2 ** 20).toFixed(0)} MiB: the 32-bit WebAssembly heap holds a copy of the file)`);
}

/// source: {url: string} or {file: File}. Returns {bytes: Uint8Array, cached: bool, keep?}: keep()
/// stores bytes read from the network or a file (call it once the engine has loaded them).
export async function loadModelBytes(source, { onProgress = () => {}, maxBytes = 2 ** 31 } = {}) {
  let key, what;
  if (source && typeof source.url === 'string') {
    key = new URL(source.url, self.location.href).href;
    what = key;
  } else if (source && source.file) {
    const f = source.file;
    key = `file:${f.name}:${f.size}:${f.lastModified}`;
    what = f.name;
    checkSize(f.size, maxBytes, what);
  } else {
    throw new StoreError('bad_request', 'model source: expected {url} or {file}');
  }
  const hit = await readCached(key, onProgress);
  if (hit) return { bytes: hit, cached: true };

  let bytes;
  if (source.file) {
    bytes = await readStream(source.file.stream(), source.file.size, 'file', onProgress);
  } else {
    let resp;
    try {
      resp = await fetch(key);
    } catch (e) {
      throw new StoreError('network', `downloading ${key} failed: ${e.message}`);
    }
    if (!resp.ok) throw new StoreError('network', `downloading ${key} failed: HTTP ${resp.status} ${resp.statusText}`);
    const total = Number(resp.headers.get('content-length')) || 0;
    checkSize(total, maxBytes, what);
    try {
      bytes = await readStream(resp.body, total, 'download', onProgress);
    } catch (e) {
      throw new StoreError('network', `downloading ${key} failed after the headers: ${e.message}`);
    }
    checkSize(bytes.byteLength, maxBytes, what);
  }
  // Stored only once the engine has accepted the bytes (keep()), so a file that fails to load is
  // not kept. keep() resolves to null or to the reason it could not store (not fatal).
  const keep = async () => {
    try {
      await store(key, bytes);
      return null;
    } catch (e) {
      return `the model could not be stored for the next visit: ${e.message || e}`;
    }
  };
  return { bytes, cached: false, keep };
}
