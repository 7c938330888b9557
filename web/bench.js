// Browser benchmark page (bench.html). Measures, in the product configuration of the browser
// engine: the adapter the page got (vendor/architecture/description, features, limits: is it the
// real GPU or SwiftShader?), 32 greedy tokens of a fixed chat prompt (compare with the native
// `wgllm run -p PROMPT -n 32 --ignore-eos --print-ids`), and wgllm_bench rows (TTFT at each
// prompt length, decode tok/s; measured like the native `wgllm bench`, web/wasm/engine.cpp).
// Query: model (URL, default /models/SmolLM2-135M-Instruct.Q4_1.gguf), lengths (512,4096), gen
// (128), reps (3), greedy (32 tokens), text (URL of the prompt text, default /text/moby-dick.txt), post (1: POST the
// JSON to /adapter and /result of tools/device/browser/serve_bench.py).
// window.benchResult holds the result; document.title becomes 'bench done' or 'bench failed'.
import { CreateEngine } from './wgllm.js';

const q = new URLSearchParams(location.search);
const model = q.get('model') || '/models/SmolLM2-135M-Instruct.Q4_1.gguf';
const lengths = (q.get('lengths') || '512,4096').split(',').map(Number);
const gen = Number(q.get('gen') || 128), reps = Number(q.get('reps') || 3), greedyN = Number(q.get('greedy') || 32);
const post = q.get('post') === '1';
const PROMPT = 'Write a short story about a robot who learns to paint.';
const logEl = document.getElementById('log');
const log = (s) => { logEl.textContent += `\n${s}`; console.log(s); };

async function send(path, obj) {
  if (!post) return;
  try {
    await fetch(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(obj) });
  } catch (e) { log(`POST ${path} failed: ${e.message}`); }
}

async function adapterInfo() {
  if (!navigator.gpu) return { error: 'navigator.gpu is missing (no WebGPU)' };
  const a = await navigator.gpu.requestAdapter({ powerPreference: 'high-performance' });
  if (!a) return { error: 'requestAdapter() returned null' };
  const i = a.info || {};
  const limits = {};
  for (const k in a.limits) limits[k] = a.limits[k];
  return { vendor: i.vendor, architecture: i.architecture, device: i.device, description: i.description,
    isFallbackAdapter: !!(i.isFallbackAdapter ?? a.isFallbackAdapter), subgroupMinSize: i.subgroupMinSize,
    subgroupMaxSize: i.subgroupMaxSize, features: Array.from(a.features).sort(), limits,
    wgslLanguageFeatures: navigator.gpu.wgslLanguageFeatures ? Array.from(navigator.gpu.wgslLanguageFeatures).sort() : [] };
}

async function main() {
  const result = { page: location.href, userAgent: navigator.userAgent, started: new Date().toISOString(),
    label: 'browser (Chromium WebGPU)', model, lengths, gen, reps };
  result.adapter = await adapterInfo();
  log(`adapter: ${JSON.stringify(result.adapter)}`);
  await send('/adapter', result.adapter);
  if (result.adapter.error) throw new Error(result.adapter.error);
  if (q.get('adapter_only') === '1') return result;

  let text = '';
  try {
    const r = await fetch(q.get('text') || '/text/moby-dick.txt');
    if (r.ok) text = await r.text();
  } catch (e) { /* the engine's default text */ }
  result.prompt_text_chars = text.length;

  const context = Math.max(2048, Math.max(...lengths) + gen + 8);
  const t0 = performance.now();
  let lastPhase = '';
  const engine = await CreateEngine(model, { contextLength: context, onProgress: (p) => {
    if (p.phase !== lastPhase) { lastPhase = p.phase; log(`load: ${p.phase}`); }
  } });
  result.load = { ...engine.info, page_load_ms: performance.now() - t0 };
  log(`loaded: ${JSON.stringify(result.load)}`);

  const g = await engine.chat.completions.create({ messages: [{ role: 'user', content: PROMPT }], temperature: 0,
    max_tokens: greedyN, ignore_eos: true });
  result.greedy = { prompt: PROMPT, token_ids: g.wgllm.token_ids, text: g.choices[0].message.content, usage: g.usage };
  log(`greedy: ${g.wgllm.token_ids.join(',')}`);

  result.bench = await engine.bench({ text, prompt_lengths: lengths, gen, reps });
  for (const r of result.bench.rows)
    log(`P=${r.n_prompt}: TTFT ${r.ttft_ms_median.toFixed(1)} ms, decode ${r.decode_tok_s_median.toFixed(1)} tok/s`);
  result.finished = new Date().toISOString();
  return result;
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
