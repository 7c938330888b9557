// The model file for the engine worker, as a Blob the engine reads in windows (never copied whole
// into the wasm heap): from the origin private file system (OPFS) when a complete copy is stored,
// else from a URL (fetch streamed into OPFS as it downloads) or a File the user picked.
// Progress events: {phase: 'cache' | 'download' | 'file', loaded, total, percent, stored?}
// (download: `stored` = bytes written to OPFS so far).
// Errors carry a kind: 'network' (fetch failed / HTTP status), 'storage' (no usable storage).
// Storage is not fatal: when the origin's quota (navigator.storage.estimate) cannot hold the
// model, or a write fails with QuotaExceededError, the model is downloaded into memory instead
// and the result's storage_error says why it was not kept.

class StoreError extends Error {
  constructor(kind, message) { super(message); this.kind = kind; }
}

const DIR = 'wgllm-models';
const MiB = (n) => `${(n / 2 ** 20).toFixed(0)} MiB`;

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

// A stored model if a complete copy exists (its marker file records key and size).
async function readCached(key) {
  try {
    const dir = await modelDir();
    const name = await keyName(key);
    const meta = JSON.parse(await (await (await dir.getFileHandle(name + '.json')).getFile()).text());
    const file = await (await dir.getFileHandle(name + '.gguf')).getFile();
    if (meta.key !== key || meta.size !== file.size) return null;
    return file;
  } catch (e) {
    return null;  // not stored (or unreadable): fetch again
  }
}

async function writeMarker(key, size) {
  const dir = await modelDir();
  const mh = await dir.getFileHandle((await keyName(key)) + '.json', { create: true });
  const mw = await mh.createWritable();
  await mw.write(JSON.stringify({ key, size, stored: new Date().toISOString() }));
  await mw.close();
}

async function removeStored(key) {
  const dir = await modelDir();
  const name = await keyName(key);
  for (const ext of ['.json', '.gguf']) { try { await dir.removeEntry(name + ext); } catch (e) { /* none */ } }
}

/// Free bytes the origin may still store (quota - usage), or Infinity when unknown.
/// `quotaOverride` (tests) replaces the browser's quota.
export async function storageRoom(quotaOverride) {
  if (quotaOverride !== undefined) return quotaOverride;
  if (!navigator.storage || !navigator.storage.estimate) return Infinity;
  const { quota, usage } = await navigator.storage.estimate();
  return quota === undefined ? Infinity : Math.max(0, quota - (usage || 0));
}

const isQuotaError = (e) => e && (e.name === 'QuotaExceededError' || /quota/i.test(String(e.message)));

function quotaMessage(size, room) {
  return `the model (${MiB(size)}) does not fit in this site's browser storage quota (${MiB(room)} free, ` +
    'navigator.storage.estimate()): it was loaded from memory and will be downloaded again next time; ' +
    'free space (other sites\' data, or remove stored models) to keep it';
}

// Streams a response body to `sink(chunk)` with download progress.
async function pump(resp, total, onProgress, sink, stored) {
  const reader = resp.body.getReader();
  let loaded = 0, last = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    await sink(value);
    loaded += value.byteLength;
    const now = performance.now();
    if (now - last > 100) {
      last = now;
      onProgress({ phase: 'download', loaded, total, percent: total ? Math.min(100, (100 * loaded) / total) : null, stored: stored() });
    }
  }
  onProgress({ phase: 'download', loaded, total: loaded, percent: 100, stored: stored() });
  return loaded;
}

async function get(url) {
  let resp;
  try {
    resp = await fetch(url);
  } catch (e) {
    throw new StoreError('network', `downloading ${url} failed: ${e.message}`);
  }
  if (!resp.ok) throw new StoreError('network', `downloading ${url} failed: HTTP ${resp.status} ${resp.statusText}`);
  return resp;
}

// Downloads into OPFS (written as it arrives); returns the stored File (not yet marked complete).
async function downloadToStorage(url, key, total, onProgress) {
  const dir = await modelDir();
  const fh = await dir.getFileHandle((await keyName(key)) + '.gguf', { create: true });
  const w = await fh.createWritable();
  let stored = 0;
  try {
    const resp = await get(url);
    await pump(resp, total, onProgress, async (chunk) => { await w.write(chunk); stored += chunk.byteLength; }, () => stored);
    await w.close();
  } catch (e) {
    try { await w.abort(); } catch (e2) { /* already closed */ }
    throw e;
  }
  return fh.getFile();
}

async function downloadToMemory(url, total, onProgress) {
  const chunks = [];
  const resp = await get(url);
  try {
    await pump(resp, total, onProgress, (c) => { chunks.push(c); }, () => 0);
  } catch (e) {
    throw e.kind ? e : new StoreError('network', `downloading ${url} failed after the headers: ${e.message}`);
  }
  return new Blob(chunks);
}

/// source: {url: string} or {file: File}. Returns {blob, cached, storage_error?, keep?}: keep()
/// marks a downloaded model complete in OPFS (or copies a picked File there); call it once the
/// engine has loaded the model, so that a file that fails to load is not kept. keep() resolves to
/// null or to the reason it could not store (not fatal).
export async function openModel(source, { onProgress = () => {}, quotaOverride } = {}) {
  let key;
  if (source && typeof source.url === 'string') key = new URL(source.url, self.location.href).href;
  else if (source && source.file) key = `file:${source.file.name}:${source.file.size}:${source.file.lastModified}`;
  else throw new StoreError('bad_request', 'model source: expected {url} or {file}');

  const hit = await readCached(key);
  if (hit) {
    onProgress({ phase: 'cache', loaded: hit.size, total: hit.size, percent: 100 });
    return { blob: hit, cached: true };
  }
  if (source.file) {
    const f = source.file;
    onProgress({ phase: 'file', loaded: f.size, total: f.size, percent: 100 });
    const keep = async () => {
      const room = await storageRoom(quotaOverride);
      if (f.size > room) return quotaMessage(f.size, room);
      try {
        const dir = await modelDir();
        const w = await (await dir.getFileHandle((await keyName(key)) + '.gguf', { create: true })).createWritable();
        await f.stream().pipeTo(w);
        await writeMarker(key, f.size);
        return null;
      } catch (e) {
        try { await removeStored(key); } catch (e2) { /* nothing stored */ }
        return `the model could not be stored for the next visit: ${e.message || e}`;
      }
    };
    return { blob: f, cached: false, keep };
  }

  // A URL: its size from a HEAD request decides whether it fits the storage quota.
  let total = 0;
  try {
    const h = await fetch(key, { method: 'HEAD' });
    if (h.ok) total = Number(h.headers.get('content-length')) || 0;
  } catch (e) { /* the GET below reports network errors */ }
  let room = Infinity, storageError = null;
  try { room = await storageRoom(quotaOverride); await modelDir(); } catch (e) { storageError = `no browser storage: ${e.message}`; }
  if (!storageError && total && total > room) storageError = quotaMessage(total, room);
  if (!storageError) {
    try {
      const file = await downloadToStorage(key, key, total, onProgress);
      const keep = async () => {
        try { await writeMarker(key, file.size); return null; } catch (e) { return `the model could not be stored for the next visit: ${e.message || e}`; }
      };
      return { blob: file, cached: false, keep };
    } catch (e) {
      try { await removeStored(key); } catch (e2) { /* nothing stored */ }
      if (e.kind === 'network') throw e;
      storageError = isQuotaError(e) ? quotaMessage(total, room) : `the model could not be stored: ${e.message || e}`;
    }
  }
  const blob = await downloadToMemory(key, total, onProgress);
  return { blob, cached: false, storage_error: storageError };
}
