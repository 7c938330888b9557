#!/usr/bin/env node
// Browser end-to-end test of wgllm (run by `make test` through `make web-test`):
//   1. the native engine (`wgllm run --print-ids`) computes N greedy tokens for a prompt;
//   2. headless Chromium (Debian's, SwiftShader WebGPU) loads the demo page, downloads the model
//      into the origin's storage, and generates N greedy tokens for the same prompt through the JS
//      API: they must be identical;
//   3. a page reload loads the model from the origin's storage (no download);
//   4. a two-turn chat typed into the demo page: turn 2 must process only its new tokens;
//   5. clear errors: a missing model URL is a 'network' error, a non-GGUF file an engine error,
//      an unknown architecture 'unsupported_architecture', a browser without WebGPU 'no_webgpu';
//   6. a screenshot of the page after the replies is written to --out (path printed);
//   7. an AbortSignal stops a reply early;
//   8. the weights stream into GPU buffers: the engine read every tensor in windows of a few MiB
//      and its wasm heap stays smaller than the model file (the old path held the file twice);
//   9. the optional GPU features the adapter offers (subgroups, shader-f16) are enabled;
//  10. a lost GPU device fails requests with 'device_lost'; engine.reload() loads the stored model;
//  11. a storage quota too small for the model: it loads from memory, storage_error says why.
// Usage: node web/tests/browser_test.mjs --wgllm build/wgllm [--wasm-dir build-wasm/web]
//          [--model ~/.cache/wgllm/models/SmolLM2-135M-Instruct.Q4_1.gguf] [--tokens 32]
//          [--out build-wasm/web-test] [--chromium /usr/bin/chromium]
//          [--native-ids FILE (the native token ids as a JSON array: skips step 1, e.g. on a busy machine)]
import { spawnSync } from 'node:child_process';
import { mkdirSync, rmSync, existsSync, writeFileSync, readFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { homedir } from 'node:os';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { startServer } from '../serve.mjs';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const args = Object.fromEntries(process.argv.slice(2).reduce((a, x, i, all) => (i % 2 ? a : [...a, [x.replace(/^--/, ''), all[i + 1]]]), []));
const cache = process.env.WGLLM_CACHE || join(homedir(), '.cache', 'wgllm');
const opt = {
  wgllm: resolve(args.wgllm || join(ROOT, 'build', 'wgllm')),
  wasmDir: resolve(args['wasm-dir'] || join(ROOT, 'build-wasm', 'web')),
  model: resolve(args.model || join(cache, 'models', 'SmolLM2-135M-Instruct.Q4_1.gguf')),
  tokens: Number(args.tokens || 32),
  out: resolve(args.out || join(ROOT, 'build-wasm', 'web-test')),
  chromium: args.chromium || '/usr/bin/chromium',
  context: 2048,
};
const PROMPT = 'Write a short story about a robot who learns to paint.';
const TURN1 = 'Name one planet of the solar system.';
const TURN2 = 'How far is it from the sun?';

let failures = 0, passes = 0;
const log = (...a) => console.log('[browser-test]', ...a);
function check(ok, what, detail = '') {
  log(`${ok ? 'PASS' : 'FAIL'} ${what}${detail ? `: ${detail}` : ''}`);
  if (!ok) failures++;
  else passes++;
}

for (const [what, p] of [['native wgllm binary', opt.wgllm], ['wasm engine (make web)', join(opt.wasmDir, 'wgllm.wasm')],
  ['model', opt.model], ['chromium', opt.chromium]]) {
  if (!existsSync(p)) { console.error(`[browser-test] ${what} not found: ${p}`); process.exit(2); }
}
rmSync(opt.out, { recursive: true, force: true });
mkdirSync(opt.out, { recursive: true });

// 1. Native reference tokens, on the same software Vulkan driver the browser uses (SwiftShader).
const env = { ...process.env, XDG_RUNTIME_DIR: process.env.XDG_RUNTIME_DIR || '/tmp' };
if (existsSync('/usr/lib/chromium/vk_swiftshader_icd.json')) {
  env.VK_DRIVER_FILES = '/usr/lib/chromium/vk_swiftshader_icd.json';
  delete env.VK_ICD_FILENAMES;
}
const t0 = Date.now();
const nat = args['native-ids'] ? { status: 0, stdout: `token_ids: ${JSON.stringify(JSON.parse(readFileSync(args['native-ids'], 'utf8')).slice(0, opt.tokens))}\n`, stderr: '' } : spawnSync(opt.wgllm, ['run', '-m', opt.model, '-p', PROMPT, '-n', String(opt.tokens), '--ignore-eos',
  '-c', String(opt.context), '--print-ids'], { env, encoding: 'utf8', timeout: 600000 });
const m = /^token_ids: (\[.*\])$/m.exec(nat.stdout || '');
if (nat.status !== 0 || !m) {
  console.error(`[browser-test] native run failed (status ${nat.status}):\n${nat.stdout}\n${nat.stderr}`);
  process.exit(1);
}
const nativeIds = JSON.parse(m[1]);
log(`native: ${nativeIds.length} tokens in ${((Date.now() - t0) / 1000).toFixed(1)} s: ${nativeIds.join(',')}`);
log(`native stats: ${(nat.stderr.match(/\[.*TTFT.*\]?.*$/m) || [''])[0].trim()}`);

// 2..6 in the browser.
const server = await startServer({ port: 0, wasmDir: opt.wasmDir, modelsDir: dirname(opt.model), quiet: true });
const modelUrl = `/models/${basename(opt.model)}`;
const browser = await chromium.launch({
  executablePath: opt.chromium, headless: true,
  args: ['--enable-unsafe-webgpu', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const summary = { native_ids: nativeIds };
try {
  const context = await browser.newContext({ viewport: { width: 900, height: 800 } });
  const page = await context.newPage();
  page.on('pageerror', (e) => log(`page error: ${e.message}`));
  page.on('console', (msg) => { if (msg.type() === 'error' && !/favicon|404/.test(msg.text())) log(`console: ${msg.text()}`); });
  await page.goto(server.url);

  // 5a. A missing model is a clear network error.
  const missing = await page.evaluate(async () => {
    try { await window.demo.load('/models/no-such-model.gguf'); return null; } catch (e) { return { kind: e.kind, message: e.message }; }
  });
  check(missing && missing.kind === 'network' && /404/.test(missing.message), 'missing model URL -> network error', JSON.stringify(missing));
  // 5b. A file that is not GGUF is refused by the engine with a message naming the problem.
  const notGguf = await page.evaluate(async () => {
    const f = new File([new Uint8Array(64).fill(7)], 'junk.gguf');
    try { await window.demo.load(f); return null; } catch (e) { return { kind: e.kind, message: e.message }; }
  });
  check(notGguf && notGguf.kind === 'engine' && /gguf|magic/i.test(notGguf.message), 'non-GGUF file -> engine error', JSON.stringify(notGguf));

  // 5c. A GGUF of an architecture the engine does not know is refused by name.
  const foreign = await page.evaluate(async () => {
    const enc = new TextEncoder();
    const num = (v, n) => { const b = new Uint8Array(n); const d = new DataView(b.buffer);
      if (n === 4) d.setUint32(0, v, true); else d.setBigUint64(0, BigInt(v), true); return b; };
    const str = (x) => { const e = enc.encode(x); return [num(e.length, 8), e]; };
    // GGUF v3: magic, version, 0 tensors, 1 key: general.architecture = "gpt2" (type 8 = string)
    const f = new File([enc.encode('GGUF'), num(3, 4), num(0, 8), num(1, 8), ...str('general.architecture'), num(8, 4),
      ...str('gpt2')], 'gpt2.gguf');
    try { await window.demo.load(f); return null; } catch (e) { return { kind: e.kind, message: e.message }; }
  });
  check(foreign && foreign.kind === 'unsupported_architecture' && /gpt2/.test(foreign.message),
    'unknown architecture -> unsupported_architecture error', JSON.stringify(foreign));

  // 2. Download, store, load; greedy tokens equal to the native engine's.
  let t = Date.now();
  const info = await page.evaluate((u) => window.demo.load(u), modelUrl);
  log(`loaded in ${((Date.now() - t) / 1000).toFixed(1)} s: ${JSON.stringify(info)}`);
  check(info.cached === false && !info.storage_error, 'first load downloads and stores the model', `cached=${info.cached} ${info.storage_error || ''}`);
  t = Date.now();
  const greedy = await page.evaluate(async ({ prompt, n }) => {
    const r = await window.demo.engine.chat.completions.create({
      messages: [{ role: 'user', content: prompt }], temperature: 0, max_tokens: n, ignore_eos: true });
    return { ids: r.wgllm.token_ids, usage: r.usage, text: r.choices[0].message.content };
  }, { prompt: PROMPT, n: opt.tokens });
  log(`browser: ${greedy.ids.length} tokens in ${((Date.now() - t) / 1000).toFixed(1)} s: ${greedy.ids.join(',')}`);
  log(`browser text: ${JSON.stringify(greedy.text)}`);
  const firstDiff = nativeIds.findIndex((x, i) => greedy.ids[i] !== x);
  check(greedy.ids.length === opt.tokens && JSON.stringify(greedy.ids) === JSON.stringify(nativeIds),
    `${opt.tokens} greedy tokens identical to the native engine`, firstDiff < 0 ? '' : `first difference at ${firstDiff}`);
  summary.greedy = greedy;

  // 8. Streamed weights: read in windows, never the whole file in the wasm heap.
  const MiB = 2 ** 20;
  check(info.file_bytes > 0 && info.streamed_bytes >= 0.9 * info.file_bytes && info.largest_read_bytes <= 17 * MiB,
    'weights streamed from the file in windows', `read ${(info.streamed_bytes / MiB).toFixed(1)} MiB of ${(info.file_bytes / MiB).toFixed(1)}, ` +
    `largest read ${(info.largest_read_bytes / MiB).toFixed(1)} MiB`);
  check((info.heap_bytes_js == null || info.heap_bytes === info.heap_bytes_js) && info.heap_bytes < info.file_bytes,
    'wasm heap smaller than the model file', `heap ${(info.heap_bytes / MiB).toFixed(1)} MiB, file ${(info.file_bytes / MiB).toFixed(1)} MiB`);
  // 9. Optional features requested when offered.
  const ad = info.adapter;
  check(['subgroups', 'shader-f16'].every((f) => ad.adapter_features.includes(f) === ad.device_features.includes(f)),
    'subgroups / shader-f16 enabled when the adapter has them', `adapter: ${ad.adapter_features.join(' ')}; subgroup sizes ${ad.subgroupMinSize}..${ad.subgroupMaxSize}`);
  check(Array.isArray(info.inactive_switches) && info.inactive_switches.length === 0,
    'no inactive-switch notes at the default switches', JSON.stringify(info.inactive_switches));
  summary.load_info = info;

  // 3. A reload reads the model from the origin's storage.
  await page.reload();
  t = Date.now();
  const info2 = await page.evaluate((u) => window.demo.load(u), modelUrl);
  check(info2.cached === true, 'second visit loads the model from browser storage (OPFS)', `${((Date.now() - t) / 1000).toFixed(1)} s`);

  // 10. Device loss: requests fail clearly; reload() starts over from the stored model.
  const loss = await page.evaluate(async ({ prompt }) => {
    const e = window.demo.engine;
    await e.simulateDeviceLoss();
    for (let i = 0; i < 100 && !e.lost; ++i) await new Promise((r) => setTimeout(r, 50));
    let err = null;
    try {
      await e.chat.completions.create({ messages: [{ role: 'user', content: prompt }], max_tokens: 2 });
    } catch (x) { err = { kind: x.kind, message: x.message }; }
    const page = document.getElementById('status').textContent;
    const info = await window.demo.reload();
    const r = await e.chat.completions.create({ messages: [{ role: 'user', content: prompt }], temperature: 0, max_tokens: 4, ignore_eos: true });
    return { lost: e.lost, err, page, cached: info.cached, ids: r.wgllm.token_ids };
  }, { prompt: PROMPT });
  check(loss.err && loss.err.kind === 'device_lost' && /reload/.test(loss.err.message) && /device_lost/.test(loss.page),
    'lost device -> device_lost error (and on the page)', JSON.stringify(loss.err));
  check(loss.cached === true && JSON.stringify(loss.ids) === JSON.stringify(nativeIds.slice(0, 4)),
    'reload() after device loss loads the stored model and generates the same tokens', JSON.stringify(loss));

  // 4. Two turns typed into the demo page (short replies: each token is ~1-3 s on SwiftShader).
  await page.fill('#max-tokens', '20');
  const type = async (text, n) => {
    await page.fill('#prompt', text);
    await page.press('#prompt', 'Enter');
    await page.waitForFunction((k) => window.demo.turns.length === k && !window.demo.busy, n, { timeout: 0, polling: 250 });
  };
  await type(TURN1, 1);
  await type(TURN2, 2);
  const turns = await page.evaluate(() => window.demo.turns);
  const [a, b] = turns.map((x) => x.usage);
  log(`turn 1: ${JSON.stringify(turns[0].text)} usage ${JSON.stringify(a)}`);
  log(`turn 2: ${JSON.stringify(turns[1].text)} usage ${JSON.stringify(b)}`);
  check(a.extra.reused_tokens === 0 && a.extra.prefill_tokens_processed === a.prompt_tokens, 'turn 1 processes its whole prompt');
  // Turn 2's prompt = turn 1's prompt + reply + the template's closing text + the new message.
  // Everything up to the reply must be reused; only the rest is processed.
  const history = a.prompt_tokens + a.completion_tokens;
  check(b.extra.reused_tokens >= history - 1 && b.extra.prefill_tokens_processed === b.prompt_tokens - b.extra.reused_tokens &&
    b.extra.prefill_tokens_processed < b.prompt_tokens - a.prompt_tokens,
  'turn 2 processes only its new tokens',
  `processed ${b.extra.prefill_tokens_processed} of ${b.prompt_tokens} prompt tokens (reused ${b.extra.reused_tokens}; turn 1 history ${history})`);
  summary.turns = turns;

  // 6. Screenshot after the replies.
  const shot = join(opt.out, 'web-demo.png');
  await page.screenshot({ path: shot, fullPage: true });
  const shown = await page.textContent('#stats');
  log(`page stats line: ${shown}`);
  log(`screenshot: ${shot}`);
  summary.stats_line = shown;
  summary.screenshot = shot;

  // 7. Abort (AbortSignal -> interruptGenerate) during a third turn: the reply stops early.
  const aborted = await page.evaluate(async () => {
    const engine = window.demo.engine, ac = new AbortController();
    const messages = [...window.demo.messages, { role: 'user', content: 'Tell me more about it.' }];
    const stream = await engine.chat.completions.create({ messages, stream: true, max_tokens: 64, signal: ac.signal });
    let pieces = 0, last = null;
    for await (const c of stream) {
      if (c.choices[0].delta.content && ++pieces === 2) ac.abort();
      last = c;
    }
    return { finish: last.choices[0].finish_reason, usage: last.usage };
  });
  check(aborted.finish === 'abort' && aborted.usage.completion_tokens < 64 && aborted.usage.extra.reused_tokens > 0,
    'abort stops the reply (and turn 3 reused the conversation)', JSON.stringify(aborted));

  // 12. Raw text completions (engine.completions.create; base models have only these): whole and
  // streamed give the same greedy ids and text, and the chat conversation is untouched after them.
  const raw = await page.evaluate(async () => {
    const engine = window.demo.engine;
    const req = { prompt: 'The capital of France is', temperature: 0, max_tokens: 3, ignore_eos: true };
    const whole = await engine.completions.create(req);
    let text = '', last = null;
    for await (const c of await engine.completions.create({ ...req, stream: true })) { text += c.choices[0].text; last = c; }
    const messages = [...window.demo.messages, { role: 'user', content: 'Thanks.' }];
    const chat = await engine.chat.completions.create({ messages, temperature: 0, max_tokens: 2, ignore_eos: true });
    return { object: whole.object, ids: whole.wgllm.token_ids, text: whole.choices[0].text, finish: whole.choices[0].finish_reason,
      streamed_ids: last.wgllm.token_ids, streamed_text: text, streamed_object: last.object, chat_reused: chat.usage.extra.reused_tokens,
      hasTemplate: engine.info.chat_template };
  });
  check(raw.object === 'text_completion' && raw.ids.length === 3 && raw.finish === 'length' && raw.hasTemplate === true &&
    JSON.stringify(raw.ids) === JSON.stringify(raw.streamed_ids) && raw.text === raw.streamed_text && raw.streamed_object === 'text_completion',
  'raw completion: whole and streamed agree', JSON.stringify(raw));
  check(raw.chat_reused > 0, 'a chat turn after the completions still reuses the conversation', `reused ${raw.chat_reused}`);
} catch (e) {
  check(false, 'browser run', e.stack || e.message);
} finally {
  await browser.close();
  await server.close();
}
// 11. Storage quota too small (test override of navigator.storage.estimate): loads from memory.
{
  const server3 = await startServer({ port: 0, wasmDir: opt.wasmDir, modelsDir: dirname(opt.model), quiet: true });
  const b3 = await chromium.launch({ executablePath: opt.chromium, headless: true,
    args: ['--enable-unsafe-webgpu', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
  try {
    const page = await b3.newPage();
    await page.goto(server3.url);
    const r = await page.evaluate(async (u) => {
      const i = await window.demo.load(u, { storageQuotaForTest: 2 ** 20, warmup: false });
      return { cached: i.cached, storage_error: i.storage_error, arch: i.arch, status: document.getElementById('status').textContent };
    }, modelUrl);
    check(r.cached === false && /quota/.test(r.storage_error || '') && r.arch && /quota/.test(r.status),
      'storage quota too small -> loaded from memory, storage_error names the quota', JSON.stringify(r));
  } catch (e) {
    check(false, 'quota run', e.stack || e.message);
  } finally {
    await b3.close();
    await server3.close();
  }
}
// 5d. Without WebGPU (Chromium without --enable-unsafe-webgpu on this machine, or any browser
// whose adapter request fails) loading is refused with kind 'no_webgpu', and the page says so.
{
  const server2 = await startServer({ port: 0, wasmDir: opt.wasmDir, modelsDir: dirname(opt.model), quiet: true });
  const plain = await chromium.launch({ executablePath: opt.chromium, headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync', '--disable-features=WebGPU,Vulkan'] });
  try {
    const page = await plain.newPage();
    await page.goto(server2.url);
    const r = await page.evaluate(async (u) => {
      try { await window.demo.load(u); return { loaded: true }; } catch (e) { return { kind: e.kind, message: e.message }; }
    }, modelUrl);
    const shown = await page.textContent('#status');
    check(r.kind === 'no_webgpu' && /no_webgpu/.test(shown), 'no WebGPU -> no_webgpu error on the page', `${JSON.stringify(r)} | page: ${shown}`);
  } catch (e) {
    check(false, 'no-WebGPU run', e.stack || e.message);
  } finally {
    await plain.close();
    await server2.close();
  }
}
writeFileSync(join(opt.out, 'summary.json'), JSON.stringify(summary, null, 1));
log(failures ? `${failures} check(s) FAILED` : 'all checks passed', `(summary: ${join(opt.out, 'summary.json')})`);
console.log(`browser: ${passes} passed, ${failures} failed`);  // the plain closing line CI reads
process.exit(failures ? 1 : 0);
