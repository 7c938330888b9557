#!/usr/bin/env node
// The browser benchmark (web/bench_run.js, what web/bench.html measures) under Node with Dawn's
// WebGPU (npm `webgpu`, dawn.node): the same wasm build (build-wasm/web/wgllm.{js,wasm}) and the
// same JS (web/wgllm.js -> web/worker.js -> web/model_store.js) with the shims of
// web/node/browser_env.mjs. For machines where a browser cannot reach the GPU (issue 15: headless
// Chromium on the H200 got no adapter): every figure it writes is labelled
// "Dawn in Node, not a browser".
//
// Usage: node web/node/bench.mjs --model FILE.gguf --webgpu DIR [--wasm-dir build-wasm/web]
//          [--lengths 512,4096] [--gen 128] [--reps 3] [--greedy 32] [--text FILE]
//          [--adapter hardware|software] [--backend vulkan] [--dawn-option OPT ...]
//          [--wgllm build/wgllm] [--native-ids FILE] [--out result.json] [--adapter-only 1]
//   --webgpu      the unpacked npm package webgpu@0.6.2 (the folder with index.js and
//                 dist/linux-x64/dawn.node)
//   --adapter     hardware (default): fail unless the adapter is a hardware GPU (not Dawn's Null
//                 backend, not a CPU driver: SwiftShader, lavapipe/llvmpipe); software: fail unless
//                 it is a CPU driver (tests on CPU-only machines). Never Null.
//   --backend     Dawn backend (create(['backend=...'])), default vulkan; --dawn-option adds more
//                 create() options (e.g. enable-dawn-features=...)
//   --wgllm       the native CLI: its greedy ids for the same prompt (`wgllm run -p PROMPT -n GREEDY
//                 --ignore-eos --print-ids --print-margins`, same Vulkan driver) are compared with the engine's
//                 (at a departure: greedy.departure, the native top-1 minus top-2 logit there)
//                 here; --native-ids FILE gives them instead (a JSON array, or a file with a line
//                 `token_ids: [...]`; the same context length). A mismatch fails the run (exit 3).
//   --adapter-only 1  only the adapter check (a second; the model is not loaded)
//   --load-only 1     stop after the load (tests); --warmup 0: no kernel warm-up at load
//   --greedy-only 1   stop after the greedy tokens (and their native comparison): no bench rows
//   --switches S  CreateEngine's switches: kernel switches as the native CLI spells them (one
//                 argument, e.g. --switches '--attn-decode-key-lanes 1')
//   --decode-pipeline 0  load with CreateEngine's decodePipeline off (default on: step i+1 submitted
//                 before step i's token is read, as the native --decode-pipeline)
// Output: the JSON of web/bench.js (adapter, load, greedy, bench.rows: n_prompt, ttft_ms,
// decode_tok_s, *_median, greedy_tokens, decode_step_last_rep: wasm->JS crossings and WebGPU calls
// per decode step, host split) plus label, runtime {node, webgpu, backend,
// dawn_adapters}, file_reads (the FileReaderSync shim's counts: reads, bytes, max_end,
// reads_past_4gib, bytes_past_4gib), to --out (default: stdout); progress and a summary go to stderr.
// Exit: 0 ok, 2 usage, 1 engine/adapter failure, 3 greedy tokens differ from the native engine's.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { fileReadStats, installBrowserEnv, listDawnAdapters, NodeFile } from './browser_env.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const LABEL = 'Dawn in Node, not a browser';

function parseArgs(argv) {
  const a = { 'dawn-option': [] };
  for (let i = 0; i < argv.length; ++i) {
    const k = argv[i].replace(/^--/, '');
    if (!argv[i].startsWith('--') || i + 1 >= argv.length) usage(`bad argument ${argv[i]}`);
    if (k === 'dawn-option') a[k].push(argv[++i]);
    else a[k] = argv[++i];
  }
  return a;
}

function usage(msg) {
  console.error(`node-bench: ${msg}\n${readFileSync(fileURLToPath(import.meta.url), 'utf8').split('\n').slice(8, 36).join('\n')}`);
  process.exit(2);
}

/// 'hardware' | 'software' | 'null' from the adapter's info (Dawn: lavapipe and SwiftShader are
/// fallback adapters with architecture 'software' / 'swiftshader'; Null has device 'null-backend').
export function adapterKind(a) {
  const text = `${a.vendor} ${a.architecture} ${a.device} ${a.description}`.toLowerCase();
  if (/null-backend/.test(text) || (!a.vendor && !a.architecture && !a.description && /null/.test(text))) return 'null';
  if (a.isFallbackAdapter || a.architecture === 'software' || /swiftshader|llvmpipe|lavapipe|softpipe/.test(text)) return 'software';
  return 'hardware';
}

function nativeIds(opt, n, prompt, context) {
  if (opt['native-ids']) {
    const s = readFileSync(opt['native-ids'], 'utf8');
    const m = /token_ids: (\[.*\])/.exec(s);
    return { ids: JSON.parse(m ? m[1] : s).slice(0, n), source: opt['native-ids'] };
  }
  if (!opt.wgllm) return null;
  const t0 = Date.now();
  const r = spawnSync(opt.wgllm, ['run', '-m', opt.model, '-p', prompt, '-n', String(n), '--ignore-eos', '-c', String(context), '--print-ids',
    '--print-margins'], { encoding: 'utf8', timeout: 600000 });
  const line = (k) => { const x = new RegExp(`^${k}: (.*)$`, 'm').exec(r.stdout || ''); return x ? JSON.parse(x[1]) : undefined; };
  const ids = line('token_ids');
  if (r.status !== 0 || !ids) throw new Error(`native run failed (status ${r.status}):\n${r.stdout}\n${r.stderr}`);
  return { ids, margins: line('token_margins'), top2: line('top2_ids'), replayEqual: line('replay_argmax_equal'),
    source: `${opt.wgllm} run`, seconds: (Date.now() - t0) / 1000 };
}

async function main() {
  const opt = parseArgs(process.argv.slice(2));
  if (!opt.model || !opt.webgpu) usage('--model and --webgpu are required');
  const wasmDir = resolve(opt['wasm-dir'] || join(ROOT, 'build-wasm', 'web'));
  for (const [what, p] of [['model', opt.model], ['wasm engine (make web)', join(wasmDir, 'wgllm.wasm')],
    ['npm webgpu package', join(opt.webgpu, 'index.js')]])
    if (!existsSync(p)) usage(`${what} not found: ${p}`);
  const want = opt.adapter || 'hardware';
  if (!['hardware', 'software'].includes(want)) usage(`--adapter ${want}: hardware or software`);
  const backend = opt.backend || 'vulkan';
  const options = [`backend=${backend}`, ...opt['dawn-option']];
  const lengths = (opt.lengths || '512,4096').split(',').map(Number);
  const gen = Number(opt.gen || 128), reps = Number(opt.reps || 3), greedy = Number(opt.greedy || 32);
  const log = (s) => console.error(`[node-bench] ${s}`);

  const env = await installBrowserEnv({ webgpuDir: resolve(opt.webgpu), options });
  const { runBench, PROMPT } = await import('../bench_run.js');
  const result = { label: LABEL, userAgent: navigator.userAgent, started: new Date().toISOString(),
    model: resolve(opt.model), lengths, gen, reps,
    runtime: { node: process.version, webgpu: env.package, dawn_options: options, backend,
      dawn_adapters: await listDawnAdapters(env.create, options), wasm_dir: wasmDir,
      vk_driver_files: process.env.VK_DRIVER_FILES || null } };
  log(`${LABEL}: node ${process.version}, ${env.package}, create(${JSON.stringify(options)}); ` +
    `adapters: ${JSON.stringify(result.runtime.dawn_adapters)}`);
  const text = opt.text ? readFileSync(opt.text, 'utf8') : '';
  const checkAdapter = (a) => {
    if (a.error) return;
    a.backend = backend;
    a.kind = adapterKind(a);
    log(`adapter: backend ${backend}, ${a.kind}: vendor '${a.vendor}', architecture '${a.architecture}', ` +
      `device '${a.device}', description '${a.description}', fallback ${a.isFallbackAdapter}`);
    if (a.kind !== want)
      throw new Error(`the adapter is ${a.kind} (${a.description || a.device}), not the ${want} ${backend} adapter asked for ` +
        `(--adapter ${want}); Dawn's adapters: ${JSON.stringify(result.runtime.dawn_adapters)}; VK_DRIVER_FILES=${process.env.VK_DRIVER_FILES || ''}`);
  };
  let status = 0;
  try {
    const adapterOnly = opt['adapter-only'] === '1';
    await runBench({ file: NodeFile.open(opt.model) }, { lengths, gen, reps, greedy, text, log, onAdapter: checkAdapter,
      adapterOnly, loadOnly: opt['load-only'] === '1', greedyOnly: opt['greedy-only'] === '1',
      engineOptions: { moduleUrl: pathToFileURL(join(wasmDir, 'wgllm.js')).href, warmup: opt.warmup !== '0',
        decodePipeline: opt['decode-pipeline'] !== '0', switches: opt.switches || '' } }, result);
    if (adapterOnly || opt['load-only'] === '1') return finish(result, opt, 0, log);
    // The engine's own adapter (worker.js) must be the one checked above.
    const la = result.load.adapter || {};
    if (la.description !== result.adapter.description || la.device !== result.adapter.device)
      throw new Error(`the engine's adapter (${la.description}) is not the one checked (${result.adapter.description})`);
    const nat = nativeIds(opt, greedy, PROMPT, result.load.context_length);
    if (nat) {
      result.greedy.native_token_ids = nat.ids;
      result.greedy.native_source = nat.source;
      result.greedy.equal_native = JSON.stringify(nat.ids) === JSON.stringify(result.greedy.token_ids);
      log(`greedy tokens ${result.greedy.equal_native ? 'EQUAL' : 'DIFFER from'} the native engine's (${nat.source}): ${nat.ids.join(',')}`);
      const got = result.greedy.token_ids || [];
      const k = nat.ids.findIndex((t, i) => t !== got[i]);
      if (k >= 0 && nat.margins) {
        // The native engine's top-1 minus top-2 logit where the two depart: a near-tie there (the browser
        // build took the native second choice by a gap far below the parity tolerance) is not an error.
        result.greedy.departure = { index: k, native_id: nat.ids[k], browser_id: got[k], native_margin: nat.margins[k],
          native_top2: nat.top2 && nat.top2[k], browser_took_native_second: !!(nat.top2 && nat.top2[k] && nat.top2[k][1] === got[k]),
          native_replay_argmax_equal: nat.replayEqual };
        log(`first departure at token ${k}: native ${nat.ids[k]} (margin ${nat.margins[k]} logits over ${nat.top2 && nat.top2[k][1]}), browser ${got[k]}`);
      }
      if (!result.greedy.equal_native) status = 3;
    }
  } catch (e) {
    result.error = String((e && e.message) || e);
    result.kind = e && e.kind;
    log(`FAILED: ${result.error}`);
    status = 1;
  }
  return finish(result, opt, status, log);
}

/// One line for a bench row's decode_step_last_rep (web/wasm/engine.cpp wgllm_bench).
export function stepSummary(d) {
  return `decode step (${d.pipelined ? 'pipelined' : 'not pipelined'}): ${d.js_crossings_per_step.toFixed(1)} wasm->JS crossings, ` +
    `${d.webgpu_calls_per_step.toFixed(1)} WebGPU calls, record ${d.record_us.toFixed(0)} us, submit ${d.submit_us.toFixed(0)} us, ` +
    `wait ${d.wait_us.toFixed(0)} us; prefill: ${d.js_crossings_prefill} crossings, ${d.webgpu_calls_prefill} WebGPU calls`;
}

function finish(result, opt, status, log) {
  result.file_reads = fileReadStats();
  log(`file reads: ${JSON.stringify(result.file_reads)}`);
  const json = JSON.stringify(result, null, 1);
  if (opt.out) writeFileSync(opt.out, json);
  else console.log(json);
  for (const r of (result.bench && result.bench.rows) || [])
    log(`${LABEL}: P=${r.n_prompt}: TTFT ${r.ttft_ms_median.toFixed(2)} ms, decode ${r.decode_tok_s_median.toFixed(1)} tok/s` +
      (r.decode_step_last_rep ? `; ${stepSummary(r.decode_step_last_rep)}` : ''));
  return status;
}

// Dawn's instance is kept alive by the navigator object; exit explicitly once done.
main().then((s) => process.exit(s), (e) => { console.error(`[node-bench] ${e.stack || e}`); process.exit(1); });
