// Demo page: loads a model with progress, then chats with streamed output, TTFT and tokens/s.
// window.demo exposes load()/send()/turns for the headless tests (web/tests/browser_test.mjs).
import { CreateEngine } from './wgllm.js';

const $ = (id) => document.getElementById(id);
const ui = { preset: $('model-preset'), url: $('model-url'), file: $('model-file'), load: $('load'),
  progress: $('progress'), progressText: $('progress-text'), info: $('model-info'), status: $('status'),
  log: $('log'), form: $('chat-form'), prompt: $('prompt'), send: $('send'), stop: $('stop'), reset: $('reset'), stats: $('stats'),
  maxTokens: $('max-tokens'), temperature: $('temperature') };

const demo = { engine: null, messages: [], turns: [], busy: false };
window.demo = demo;

function status(text, isError = false) {
  ui.status.textContent = text;
  ui.status.className = isError ? 'error' : '';
}
const fmtMB = (b) => `${(b / 2 ** 20).toFixed(1)} MB`;

function setReady(ready) {
  ui.prompt.disabled = ui.send.disabled = ui.reset.disabled = !ready;
  ui.stop.disabled = true;
}

demo.load = async (source, options = {}) => {
  setReady(false);
  ui.load.disabled = true;
  if (demo.engine) { demo.engine.unload(); demo.engine = null; }
  demo.messages = []; demo.turns = []; ui.log.textContent = '';
  status('Loading…');
  try {
    demo.engine = await CreateEngine(source, {
      onProgress: (p) => {
        ui.progress.value = p.percent ?? 0;
        const what = { download: 'downloading', cache: 'found in browser storage', file: 'reading file', init: 'starting the engine',
          upload: 'uploading to the GPU' }[p.phase] || p.phase;
        ui.progressText.textContent = `${what}: ${fmtMB(p.loaded)}${p.total ? ` / ${fmtMB(p.total)}` : ''}` +
          (p.percent != null ? ` (${p.percent.toFixed(0)}%)` : '') + (p.stored ? ` · ${fmtMB(p.stored)} stored` : '');
      },
      onDeviceLost: (message) => {
        status(`[device_lost] The GPU device was lost (${message}). Reload the model to continue: it is read again from browser storage.`, true);
        setReady(false);
      },
      ...options,
    });
    const i = demo.engine.info;
    ui.progress.value = 100;
    ui.progressText.textContent = 'loaded';
    ui.info.textContent = `${i.arch}, ${i.n_layers} layers, context ${i.context_length} · weights ${fmtMB(i.weights_bytes)} · ` +
      `${i.adapter.description || i.adapter.vendor || 'GPU'}${i.adapter.isFallbackAdapter ? ' (software)' : ''} · ` +
      `loaded in ${(i.load_ms / 1000).toFixed(1)} s${i.cached ? ' from browser storage' : ''}` +
      (i.chat_template === false ? ' · base model (no chat template): your text is continued' : '');
    ui.prompt.placeholder = i.chat_template === false ? 'Type the start of a text to continue…' : 'Type a message…';
    status(i.storage_error ? `Ready (${i.storage_error})` : 'Ready.');
    setReady(true);
    return i;
  } catch (e) {
    status(`${e.kind ? `[${e.kind}] ` : ''}${e.message}`, true);
    throw e;
  } finally {
    ui.load.disabled = false;
  }
};

// After a device loss: a new worker and device, the model read again from browser storage.
demo.reload = async () => {
  status('Reloading…');
  const i = await demo.engine.reload();
  demo.messages = []; demo.turns = [];
  status(i.cached ? 'Ready (reloaded from browser storage).' : 'Ready (reloaded).');
  setReady(true);
  return i;
};

function bubble(role, text = '') {
  const d = document.createElement('div');
  d.className = `msg ${role}`;
  d.textContent = text;
  ui.log.appendChild(d);
  ui.log.scrollTop = ui.log.scrollHeight;
  return d;
}

demo.send = async (text, params = {}) => {
  if (demo.busy) throw new Error('a reply is being generated');
  demo.busy = true;
  setReady(false);
  ui.stop.disabled = false;
  bubble('user', text);
  const out = bubble('assistant');
  const body = document.createElement('span');
  out.appendChild(body);
  // A base model (no chat template in its GGUF) continues the text instead of answering it.
  const base = demo.engine.info && demo.engine.info.chat_template === false;
  if (!base) demo.messages.push({ role: 'user', content: text });
  let reply = '', last = null;
  try {
    const opts = { stream: true, max_tokens: Number(ui.maxTokens.value) || 256, temperature: Number(ui.temperature.value) || 0, ...params };
    const stream = base ? await demo.engine.completions.create({ prompt: text, ...opts })
      : await demo.engine.chat.completions.create({ messages: demo.messages, ...opts });
    for await (const chunk of stream) {
      reply += (base ? chunk.choices[0].text : chunk.choices[0].delta.content) ?? '';
      body.textContent = reply;
      ui.log.scrollTop = ui.log.scrollHeight;
      last = chunk;
    }
    if (!base) demo.messages.push({ role: 'assistant', content: reply });
    const u = last.usage, x = u.extra;
    const meta = document.createElement('span');
    meta.className = 'meta';
    meta.textContent = `TTFT ${x.ttft_ms.toFixed(0)} ms · ${x.decode_tokens_per_s.toFixed(1)} tok/s · ` +
      `${u.completion_tokens} tokens · prompt ${u.prompt_tokens} (processed ${x.prefill_tokens_processed}, reused ${x.reused_tokens})` +
      (last.choices[0].finish_reason === 'abort' ? ' · stopped' : '');
    out.appendChild(meta);
    ui.stats.textContent = `TTFT ${x.ttft_ms.toFixed(0)} ms (page ${x.page_ttft_ms?.toFixed(0) ?? '—'} ms) · decode ` +
      `${x.decode_tokens_per_s.toFixed(1)} tok/s · prefill ${x.prefill_tokens_processed} new tokens ` +
      `(${x.prefill_tokens_per_s.toFixed(0)} tok/s), ${x.reused_tokens} reused`;
    const turn = { usage: u, finish_reason: last.choices[0].finish_reason, token_ids: last.wgllm.token_ids, text: reply };
    demo.turns.push(turn);
    status('Ready.');
    return turn;
  } catch (e) {
    if (!base) demo.messages.pop();
    status(`${e.kind ? `[${e.kind}] ` : ''}${e.message}`, true);
    throw e;
  } finally {
    demo.busy = false;
    setReady(true);
  }
};

ui.preset.addEventListener('change', () => { ui.url.hidden = ui.preset.value !== ''; });
ui.load.addEventListener('click', () => {
  const file = ui.file.files[0];
  const src = file ? file : (ui.preset.value || ui.url.value.trim());
  if (!src) { status('Pick a model: a URL or a local .gguf file.', true); return; }
  demo.load(src).catch(() => {});
});
ui.form.addEventListener('submit', (ev) => {
  ev.preventDefault();
  const text = ui.prompt.value.trim();
  if (!text || !demo.engine) return;
  ui.prompt.value = '';
  demo.send(text).catch(() => {});
});
ui.prompt.addEventListener('keydown', (ev) => {
  if (ev.key === 'Enter' && !ev.shiftKey) { ev.preventDefault(); ui.form.requestSubmit(); }
});
ui.stop.addEventListener('click', () => demo.engine && demo.engine.interruptGenerate());
ui.reset.addEventListener('click', async () => {
  await demo.engine.resetChat();
  demo.messages = []; demo.turns = []; ui.log.textContent = '';
  status('New conversation.');
});
if (!('gpu' in navigator)) status('[no_webgpu] This browser has no WebGPU (navigator.gpu is missing).', true);
// ?model=URL loads that model at once (e.g. http://127.0.0.1:8000/?model=/models/x.gguf).
const preset = new URLSearchParams(location.search).get('model');
if (preset) demo.load(preset).catch(() => {});
