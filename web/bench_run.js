// The measurement of the browser benchmark, shared by the page (bench.html / bench.js) and the
// Dawn-in-Node harness (web/node/bench.mjs), so that both measure exactly the same thing through
// the same JS API (wgllm.js -> worker.js -> the wasm engine):
//   adapter   what navigator.gpu.requestAdapter() returns (vendor/architecture/description,
//             fallback flag, features, limits: the real GPU or a CPU emulation?)
//   greedy    `greedy` greedy tokens of PROMPT through engine.chat.completions.create (temperature 0,
//             ignore_eos; engine.completions.create, the raw text, for a model without a chat
//             template); compare with the native `wgllm run -p PROMPT -n 32 --ignore-eos --print-ids`
//   bench     engine.bench(): per prompt length, TTFT (ms) and decode tok/s in the product
//             configuration, measured inside the engine like the native `wgllm bench`
//             (web/wasm/engine.cpp wgllm_bench)
import { CreateEngine } from './wgllm.js';

export const PROMPT = 'Write a short story about a robot who learns to paint.';

/// The adapter navigator.gpu offers (the one the engine's worker will also get), as JSON.
export async function adapterInfo() {
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

/// Loads `model` (URL string or {file}) and measures. opts: {lengths: [512, 4096], gen: 128, reps: 3,
/// greedy: 32, text: prompt text for the bench ('' = the engine's default), log(s), onAdapter(json)
/// (awaited; may throw to stop, e.g. a harness refusing a software adapter), adapterOnly, loadOnly
/// (stop after the load), greedyOnly (stop after the greedy tokens: no bench), engineOptions (extra CreateEngine options, e.g. moduleUrl, warmup)}.
/// `result` (filled in as it goes, so a failure still returns what was measured) gets adapter, load,
/// greedy, bench, finished.
export async function runBench(model, opts, result) {
  const { lengths = [512, 4096], gen = 128, reps = 3, greedy = 32, text = '', log = () => {} } = opts;
  result.adapter = await adapterInfo();
  log(`adapter: ${JSON.stringify(result.adapter)}`);
  if (opts.onAdapter) await opts.onAdapter(result.adapter);
  if (result.adapter.error) throw new Error(result.adapter.error);
  if (opts.adapterOnly) return result;

  result.prompt_text_chars = text.length;
  const context = Math.max(2048, Math.max(...lengths) + gen + 8);
  const t0 = performance.now();
  let lastPhase = '';
  result.load_phases = [];  // the load's progress phases in order (a load refused at once has none)
  const engine = await CreateEngine(model, { ...(opts.engineOptions || {}), contextLength: context, onProgress: (p) => {
    if (p.phase !== lastPhase) { lastPhase = p.phase; result.load_phases.push(p.phase); log(`load: ${p.phase}`); }
  } });
  try {
    result.load = { ...engine.info, page_load_ms: performance.now() - t0 };
    log(`loaded: ${JSON.stringify(result.load)}`);
    if (opts.loadOnly) return result;

    // A base model (no chat template) continues PROMPT as raw text, as the native `wgllm run -p` does
    // for such a model.
    const raw = engine.info.chat_template === false;
    const g = raw ? await engine.completions.create({ prompt: PROMPT, temperature: 0, max_tokens: greedy, ignore_eos: true })
      : await engine.chat.completions.create({ messages: [{ role: 'user', content: PROMPT }], temperature: 0,
        max_tokens: greedy, ignore_eos: true });
    result.greedy = { prompt: PROMPT, mode: raw ? 'raw' : 'chat', token_ids: g.wgllm.token_ids,
      text: raw ? g.choices[0].text : g.choices[0].message.content, usage: g.usage };
    log(`greedy: ${g.wgllm.token_ids.join(',')}`);
    if (opts.greedyOnly) { result.finished = new Date().toISOString(); return result; }

    result.bench = await engine.bench({ text, prompt_lengths: lengths, gen, reps });
    for (const r of result.bench.rows)
      log(`P=${r.n_prompt}: TTFT ${r.ttft_ms_median.toFixed(1)} ms, decode ${r.decode_tok_s_median.toFixed(1)} tok/s`);
  } finally {
    engine.unload();
  }
  result.finished = new Date().toISOString();
  return result;
}
