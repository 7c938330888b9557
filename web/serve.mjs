#!/usr/bin/env node
// Static server for the demo page on localhost (`make web-serve`).
//   /          web/ (page, JS API, worker)
//   /build/    the WebAssembly engine (default build-wasm/web, `make web`)
//   /models/   GGUF files of the model cache (default $WGLLM_CACHE/models = ~/.cache/wgllm/models)
// Usage: node web/serve.mjs [--port 8000] [--host 127.0.0.1] [--wasm-dir DIR] [--models-dir DIR]
// Also importable: startServer({port, wasmDir, modelsDir}) -> {url, close()} (tests).
import { createServer } from 'node:http';
import { createReadStream, statSync } from 'node:fs';
import { dirname, join, normalize, resolve, sep, extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { homedir } from 'node:os';

const WEB = dirname(fileURLToPath(import.meta.url));
const MIME = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8', '.wasm': 'application/wasm', '.json': 'application/json', '.png': 'image/png',
  '.gguf': 'application/octet-stream', '.md': 'text/plain; charset=utf-8' };

function safeJoin(root, rel) {
  const p = normalize(join(root, decodeURIComponent(rel)));
  return p === root || p.startsWith(root + sep) ? p : null;
}

export function startServer({ port = 8000, host = '127.0.0.1', wasmDir, modelsDir, quiet = false } = {}) {
  wasmDir = resolve(wasmDir || join(WEB, '..', 'build-wasm', 'web'));
  modelsDir = resolve(modelsDir || join(process.env.WGLLM_CACHE || join(homedir(), '.cache', 'wgllm'), 'models'));
  const roots = [['/build/', wasmDir], ['/models/', modelsDir], ['/', WEB]];
  const server = createServer((req, res) => {
    const path = new URL(req.url, 'http://x').pathname;
    let file = null;
    for (const [prefix, root] of roots) {
      if (path.startsWith(prefix)) { file = safeJoin(root, path.slice(prefix.length) || 'index.html'); break; }
    }
    let st = null;
    try { st = file && statSync(file); } catch (e) { st = null; }
    if (st && st.isDirectory()) { file = join(file, 'index.html'); try { st = statSync(file); } catch (e) { st = null; } }
    if (!st || !st.isFile() || file.includes(`${sep}node_modules${sep}`)) {
      res.writeHead(404, { 'content-type': 'text/plain' });
      res.end(`not found: ${path}\n`);
      return;
    }
    res.writeHead(200, { 'content-type': MIME[extname(file)] || 'application/octet-stream', 'content-length': st.size,
      'cache-control': 'no-cache' });
    if (req.method === 'HEAD') { res.end(); return; }
    createReadStream(file).pipe(res);
  });
  return new Promise((ok, fail) => {
    server.once('error', fail);
    server.listen(port, host, () => {
      const url = `http://${host}:${server.address().port}/`;
      if (!quiet) console.log(`wgllm demo: ${url}  (web: ${WEB}, engine: ${wasmDir}, models: ${modelsDir})`);
      ok({ url, close: () => new Promise((r) => server.close(r)) });
    });
  });
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const opt = {};
  for (let i = 0; i < args.length; i += 2) {
    const k = args[i], v = args[i + 1];
    if (k === '--port') opt.port = Number(v);
    else if (k === '--host') opt.host = v;
    else if (k === '--wasm-dir') opt.wasmDir = v;
    else if (k === '--models-dir') opt.modelsDir = v;
    else { console.error(`unknown option ${k}`); process.exit(2); }
  }
  startServer(opt).catch((e) => { console.error(`wgllm demo server: ${e.message}`); process.exit(1); });
}
