// Browser benchmark page (bench.html). Measures, in the product configuration of the browser
// engine: the adapter the page got (vendor/architecture/description, features, limits: is it the
// real GPU or SwiftShader?), 32 greedy tokens of a fixed chat prompt (compare with the native
// `wgllm run -p PROMPT -n 32 --ignore-eos --print-ids`), and wgllm_bench rows (TTFT at each
// prompt length, decode tok/s; measured like the native `wgllm bench`, web/wasm/engine.cpp).
// The measurement itself is web/bench_run.js, shared with the Dawn-in-Node harness (web/node/).
// Query: model (URL, default /models/SmolLM2-135M-Instruct.Q4_1.gguf), lengths (512,4096), gen
// (128), reps (3), greedy (32 tokens), text (URL of the prompt text, default /text/moby-dick.txt), post (1: POST the
// JSON to /adapter and /result of tools/device/browser/serve_bench.py).
// window.benchResult holds the result; document.title becomes 'bench done' or 'bench failed'.
import { runBench } from './bench_run.js';

const q = new URLSearchParams(location.search);
const model = q.get('model') || '/models/SmolLM2-135M-Instruct.Q4_1.gguf';
const lengths = (q.get('lengths') || '512,4096').split(',').map(Number);
const gen = Number(q.get('gen') || 128), reps = Number(q.get('reps') || 3), greedy = Number(q.get('greedy') || 32);
const post = q.get('post') === '1';
const logEl = document.getElementById('log');
const log = (s) => { logEl.textContent += `\n${s}`; console.log(s); };

async function send(path, obj) {
  if (!post) return;
  try {
    await fetch(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(obj) });
  } catch (e) { log(`POST ${path} failed: ${e.message}`); }
}

async function main() {
  const result = { page: location.href, userAgent: navigator.userAgent, started: new Date().toISOString(),
    label: 'browser (Chromium WebGPU)', model, lengths, gen, reps };
  let text = '';
  try {
    const r = await fetch(q.get('text') || '/text/moby-dick.txt');
    if (r.ok) text = await r.text();
  } catch (e) { /* the engine's default text */ }
  return runBench(model, { lengths, gen, reps, greedy, text, log, adapterOnly: q.get('adapter_only') === '1',
    loadOnly: q.get('load_only') === '1', greedyOnly: q.get('greedy_only') === '1',
    onAdapter: (a) => send('/adapter', a) }, result);
}

main().then(async (r) => {
  window.benchResult = r;
  await send('/result', r);
  document.title = 'bench done';
  log('done');
}, async (e) => {
  const r = { error: String(e && e.message || e), kind: e && e.kind };
  window.benchResult = r;
  log(`FAILED: ${r.error}`);
  await send('/result', r);
  document.title = 'bench failed';
});
