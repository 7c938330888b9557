#!/usr/bin/env node
// Smoke test of the Dawn-in-Node harness (web/node/bench.mjs; run by `make web-test`, a few
// seconds): the page's JS and the wasm build under Node with dawn.node (npm `webgpu`, web/node_modules)
// on this machine's Vulkan driver, without compiling kernels (a full run on a CPU driver takes
// minutes: bench/results/2026-12-02-lavapipe-node):
//   1. the adapter check: exactly one of --adapter hardware / --adapter software accepts this
//      machine's adapter; Dawn's Null backend is refused;
//   2. the whole stack up to the weights: a file that is not GGUF goes through CreateEngine, the
//      in-process worker (worker.js: device creation on dawn.node, model_store.js's File path), the
//      wasm module (fetched from a file: URL) and wgllm_load_stream's streamed header read, and
//      fails with the engine's own message;
//   3. a tiny GGUF (tests/fixtures/lfm2_tiny) loads without the kernel warm-up: its weights stream
//      in windows into GPU buffers on dawn.node's device (a greedy run would compile kernels: ~2 min
//      on a cold shader cache on 2 busy cores);
//   4. CreateEngine's `switches` (kernel switches in the native CLI's spelling) reach the model;
//      an unknown one fails the load with its name, before the model file is read.
// Usage: node web/tests/node_smoke_test.mjs [--wasm-dir build-wasm/web] [--webgpu web/node_modules/webgpu]
// (the Vulkan driver from the environment: env $(scripts/vulkan_env.sh) on CPU-only machines).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const args = Object.fromEntries(process.argv.slice(2).reduce((a, x, i, all) => (i % 2 ? a : [...a, [x.replace(/^--/, ''), all[i + 1]]]), []));
const wasmDir = resolve(args['wasm-dir'] || join(ROOT, 'build-wasm', 'web'));
const webgpu = resolve(args.webgpu || join(ROOT, 'web', 'node_modules', 'webgpu'));
for (const [what, p] of [['wasm engine (make web)', join(wasmDir, 'wgllm.wasm')], ['npm webgpu (make setup: npm ci in web/)', join(webgpu, 'index.js')]])
  if (!existsSync(p)) { console.error(`[node-smoke] ${what} not found: ${p}`); process.exit(2); }
const tmp = mkdtempSync(join(tmpdir(), 'wgllm-node-smoke-'));
let failures = 0;
const log = (...a) => console.log('[node-smoke]', ...a);
function check(ok, what, detail = '') {
  log(`${ok ? 'PASS' : 'FAIL'} ${what}${detail ? `: ${detail}` : ''}`);
  if (!ok) failures++;
}

let n = 0;
function harness(extra) {
  const out = join(tmp, `r${++n}.json`);
  const r = spawnSync(process.execPath, [join(ROOT, 'web', 'node', 'bench.mjs'), '--webgpu', webgpu, '--wasm-dir', wasmDir,
    '--out', out, ...extra], { encoding: 'utf8', timeout: 120000 });
  let json = null;
  try { json = JSON.parse(readFileSync(out, 'utf8')); } catch (e) { /* none written */ }
  return { status: r.status, stderr: r.stderr || '', json };
}

const t0 = Date.now();
const anyFile = join(ROOT, 'web', 'package.json');
// 1. The adapter check.
const sw = harness(['--model', anyFile, '--adapter', 'software', '--adapter-only', '1']);
const hw = harness(['--model', anyFile, '--adapter', 'hardware', '--adapter-only', '1']);
check((sw.status === 0) !== (hw.status === 0), 'exactly one adapter kind is accepted',
  `software: exit ${sw.status}, hardware: exit ${hw.status}; adapter ${sw.json && sw.json.adapter && sw.json.adapter.description}`);
const kind = sw.status === 0 ? 'software' : 'hardware';
const refused = kind === 'software' ? hw : sw;
check(/not the (hardware|software) vulkan adapter asked for/.test(refused.json && refused.json.error || ''), 'the refusal names the adapter',
  (refused.json && refused.json.error || refused.stderr).slice(0, 160));
const nul = harness(['--model', anyFile, '--adapter', kind, '--adapter-only', '1', '--backend', 'null']);
check(nul.status === 1 && /the adapter is null/.test(nul.json && nul.json.error || ''), "Dawn's Null backend is refused",
  (nul.json && nul.json.error || nul.stderr).slice(0, 160));

// 2. Not a GGUF file: the engine's error through the whole stack.
const bad = harness(['--model', anyFile, '--adapter', kind, '--lengths', '8', '--gen', '2', '--reps', '1']);
check(bad.status === 1 && bad.json && bad.json.kind === 'engine' && /gguf|magic/i.test(bad.json.error || ''),
  'a non-GGUF file fails in the engine with its message', `${bad.json && bad.json.kind}: ${(bad.json && bad.json.error || bad.stderr).slice(0, 160)}`);

// 3. A tiny GGUF (tests/fixtures/lfm2_tiny) loaded without the kernel warm-up: the weights stream
// through the reader into GPU buffers on dawn.node's device.
const tiny = join(ROOT, 'tests', 'fixtures', 'lfm2_tiny', 'lfm2_tiny.f32.gguf');
const lt = harness(['--model', tiny, '--adapter', kind, '--load-only', '1', '--warmup', '0']);
const L = (lt.json && lt.json.load) || {};
check(lt.status === 0 && L.arch === 'lfm2' && L.file_bytes === statSync(tiny).size, 'the tiny GGUF loads',
  `exit ${lt.status}, arch ${L.arch}, ${L.file_bytes} bytes, ${lt.json && lt.json.error || ''}`);
check(L.streamed_bytes >= L.file_bytes * 0.9 && L.largest_read_bytes <= 8 * 2 ** 20 + 65536,
  'the weights were read through the streaming reader in windows', `streamed ${L.streamed_bytes}, largest read ${L.largest_read_bytes}`);
check(lt.json && lt.json.label === 'Dawn in Node, not a browser' && L.adapter && L.adapter.description === lt.json.adapter.description,
  'labelled, and the engine got the adapter the harness checked', `${lt.json && lt.json.label}; ${L.adapter && L.adapter.description}`);

// 4. CreateEngine's switches (the native CLI's spelling): set ones reach the model options (the
// load reports the non-default ones back); an unknown flag fails the load with the engine's message.
const ls = harness(['--model', tiny, '--adapter', kind, '--load-only', '1', '--warmup', '0',
  '--switches', '--attn-decode-key-lanes 4 --no-fuse-norm']);
const S = (ls.json && ls.json.load && ls.json.load.switches) || [];
check(ls.status === 0 && S.includes('--attn-decode-key-lanes 4') && S.includes('--no-fuse-norm'),
  'switches given to CreateEngine reach the model', `exit ${ls.status}, switches ${JSON.stringify(S)}, ${ls.json && ls.json.error || ''}`);
const lb = harness(['--model', tiny, '--adapter', kind, '--load-only', '1', '--warmup', '0', '--switches', '--no-such-switch']);
check(lb.status === 1 && /--no-such-switch: unknown flag/.test(lb.json && lb.json.error || '') && lb.json.kind === 'bad_request',
  'an unknown switch fails the load, named, as a bad request',
  (lb.json && lb.json.error || lb.stderr).slice(0, 160));
// ... before the model file is touched: the good load went through its phases, the bad one through none.
const PL = (ls.json && ls.json.load_phases) || [], PB = lb.json && lb.json.load_phases;
check(PL.includes('upload') && Array.isArray(PB) && PB.length === 0,
  'a bad switch is refused before any download, storage or upload', `good load ${JSON.stringify(PL)}, bad ${JSON.stringify(PB)}`);

log(`${failures ? 'FAILED' : 'passed'} in ${((Date.now() - t0) / 1000).toFixed(1)} s (adapter: ${kind})`);
process.exit(failures ? 1 : 0);
