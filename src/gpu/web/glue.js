// wgllm's WebGPU glue for the WebAssembly build (linked with --pre-js): a table of JS WebGPU
// objects addressed by small integer handles, and the few operations the C shim
// (webgpu_shim.cpp) needs. The device is created by the page/worker before the engine starts
// (Module.wgllmDevice, Module.wgllmAdapterInfo), so device creation needs no asyncify.
// Emscripten's own -sUSE_WEBGPU bindings target the 2022 API and fail in current browsers;
// this glue uses only today's standard WebGPU JS API.
//
// Command lists: command encoders live on the wasm side (webgpu_shim.cpp), which appends every
// encoder and queue operation (buffer writes, passes, pipelines, bind groups, dispatches, copies,
// submits, map requests) as u32 words to one list in wasm memory; replay() runs the whole list
// in one call at the next flush point (a submit, a wait): one wasm -> JS crossing per submission
// instead of three per dispatch. The opcodes below are the shim's `Op` enum; keep both in sync.
//
// Crossings: every call from wasm into JS (this glue's imports and Emscripten's own: clock,
// stdio, ...) is counted in WG.crossings (the imports are wrapped at instantiation, see
// instantiateWasm below) and WebGPU API calls made by replay() in WG.gpuCalls; the engine's
// bench reports both per decode step (web/wasm/engine.cpp wgllm_bench).
var WG = {
  objs: [null],
  free: [],
  error: '',
  lost: false,
  errFlag: 0,       // wasm address of an int32 set to 1 when an error is pending (read without a crossing)
  maps: new Map(),  // token -> {promise, status, msg}
  crossings: 0,
  gpuCalls: 0,
  add(o) {
    const id = this.free.length ? this.free.pop() : this.objs.length;
    this.objs[id] = o;
    return id;
  },
  get(id) {
    const o = this.objs[id];
    if (!o) throw new Error('wgllm WebGPU glue: stale handle ' + id);
    return o;
  },
  release(id) {
    if (id && this.objs[id]) {
      this.objs[id] = null;
      this.free.push(id);
    }
  },
  device() { return this.get(1); },
  onError(msg) {
    if (!this.error) this.error = msg;
    if (this.errFlag) HEAP32[this.errFlag >> 2] = 1;
  },
  // Called once from Context::create: registers the device (handle 1) and its queue (handle 2).
  init(errFlag) {
    const dev = Module['wgllmDevice'];
    if (!dev) throw new Error('wgllm: no WebGPU device was given to the engine (Module.wgllmDevice)');
    this.errFlag = errFlag;
    if (this.error) HEAP32[errFlag >> 2] = 1;
    if (this.objs.length === 1) {
      this.objs.push(dev, dev.queue);
      dev.addEventListener('uncapturederror', (e) => this.onError('WebGPU error: ' + e.error.message));
      dev.lost.then((info) => {
        if (info.reason === 'destroyed') return;
        this.lost = true;
        this.onError('WebGPU device lost: ' + info.message);
      });
    }
    const info = Module['wgllmAdapterInfo'] || {};
    const limits = {};
    for (const k in dev.limits) limits[k] = dev.limits[k];
    return JSON.stringify({
      name: info.description || [info.vendor, info.architecture].filter(Boolean).join(' ') || 'browser WebGPU adapter',
      vendor: info.vendor || '', architecture: info.architecture || '',
      driver: info.description || '', isFallbackAdapter: !!info.isFallbackAdapter,
      subgroupMinSize: info.subgroupMinSize || 0, subgroupMaxSize: info.subgroupMaxSize || 0,
      features: Array.from(dev.features), limits,
    });
  },
  // Replays a command list: `n` u32 words at wasm address `p` (webgpu_shim.cpp `Op`). Offsets and
  // sizes above 4 GiB come as (lo, hi) word pairs.
  replay(p, n) {
    const a = HEAPU32, o = this.objs, queue = o[2];
    let i = p >> 2;
    const end = i + n;
    let enc = null, pass = null, calls = 0;
    const cbs = [];
    while (i < end) {
      switch (a[i]) {
        case 1:  // WRITE buf off_lo off_hi src size: queue.writeBuffer from wasm memory
          queue.writeBuffer(o[a[i + 1]], a[i + 2] + a[i + 3] * 4294967296, HEAPU8, a[i + 4], a[i + 5]);
          i += 6; ++calls; break;
        case 2:  // ENCODER
          enc = o[1].createCommandEncoder(); i += 1; ++calls; break;
        case 3:  // PASS
          pass = enc.beginComputePass(); i += 1; ++calls; break;
        case 4:  // PIPELINE id
          pass.setPipeline(o[a[i + 1]]); i += 2; ++calls; break;
        case 5:  // BIND index id
          pass.setBindGroup(a[i + 1], o[a[i + 2]]); i += 3; ++calls; break;
        case 6:  // DISPATCH x y z
          pass.dispatchWorkgroups(a[i + 1], a[i + 2], a[i + 3]); i += 4; ++calls; break;
        case 7:  // END_PASS
          pass.end(); pass = null; i += 1; ++calls; break;
        case 8:  // COPY src so_lo so_hi dst do_lo do_hi size_lo size_hi
          enc.copyBufferToBuffer(o[a[i + 1]], a[i + 2] + a[i + 3] * 4294967296, o[a[i + 4]],
            a[i + 5] + a[i + 6] * 4294967296, a[i + 7] + a[i + 8] * 4294967296);
          i += 9; ++calls; break;
        case 9:  // FINISH
          cbs.push(enc.finish()); enc = null; i += 1; ++calls; break;
        case 10:  // SUBMIT
          queue.submit(cbs); cbs.length = 0; i += 1; ++calls; break;
        case 11:  // MAP token buf off size dst: mapAsync(READ); when done the range is copied to
          // wasm address dst and the buffer unmapped at once (the C side reads the copy)
          this.mapRead(a[i + 1], o[a[i + 2]], a[i + 3], a[i + 4], a[i + 5]); i += 6; ++calls; break;
        case 12:  // DESTROY buf
          o[a[i + 1]].destroy(); i += 2; ++calls; break;
        case 13:  // RELEASE id
          this.release(a[i + 1]); i += 2; break;
        case 14:  // WRITE_INLINE buf off_lo off_hi size, then the data (padded to words)
          queue.writeBuffer(o[a[i + 1]], a[i + 2] + a[i + 3] * 4294967296, HEAPU8, (i + 5) * 4, a[i + 4]);
          i += 5 + ((a[i + 4] + 3) >> 2); ++calls; break;
        default:
          throw new Error('wgllm WebGPU glue: bad command list opcode ' + a[i] + ' at word ' + (i - (p >> 2)));
      }
    }
    this.gpuCalls += calls;
  },
  mapRead(token, buf, off, size, dst) {
    const rec = {status: 0, msg: ''};
    rec.promise = buf.mapAsync(GPUMapMode.READ, off, size).then(
        () => {
          HEAPU8.set(new Uint8Array(buf.getMappedRange(off, size)), dst);
          buf.unmap();
          rec.status = 1;
        },
        (e) => { rec.status = 2; rec.msg = String((e && e.message) || e); });
    this.maps.set(token, rec);
  },
  // Writes the status of each of the `n` map tokens at wasm address `tok` (0 pending, 1 done,
  // 2 failed) into `st`; done tokens are forgotten (the C side runs their callbacks now).
  mapStatus(tok, n, st) {
    for (let k = 0; k < n; ++k) {
      const t = HEAP32[(tok >> 2) + k], r = this.maps.get(t);
      HEAP32[(st >> 2) + k] = r ? r.status : 2;
      if (r && r.status === 1) this.maps.delete(t);
    }
  },
  // Waits until at least one of the `n` map tokens has settled, then as mapStatus.
  async waitAny(tok, n, st) {
    const recs = [];
    for (let k = 0; k < n; ++k) recs.push(this.maps.get(HEAP32[(tok >> 2) + k]));
    if (recs.length && !recs.some((r) => !r || r.status)) await Promise.race(recs.map((r) => r.promise));
    this.mapStatus(tok, n, st);
  },
  // The message of a failed map token (and forgets the token).
  mapError(t) {
    const r = this.maps.get(t);
    this.maps.delete(t);
    return r ? r.msg : 'unknown map token ' + t;
  },
};
Module['wgllmGlue'] = WG;

// Instantiation (Emscripten's Module.instantiateWasm hook; wasmBinaryFile, stackSave, ... are
// Emscripten's own variables of this module's scope):
//  - every import is wrapped to count wasm -> JS calls (WG.crossings);
//  - C++ exceptions (-sDISABLE_EXCEPTION_CATCHING=0, JS-based) make every call that may throw from
//    a function with cleanups go through a JS `invoke_<sig>` import; Emscripten's invoke calls the
//    module's exports through ASYNCIFY's export wrappers (a call-stack push/pop, try/finally and
//    Function.apply each), and a decode step makes ~14,000 of them (the kernels' variant keys are
//    strings). The imports are replaced by equivalents calling the raw exports (stackSave,
//    stackRestore, setThrew, dynCall_<sig>): same semantics (a nested call never ends an
//    unwind, so skipping the wrapper of a call made inside wasm changes nothing), a fraction of
//    the cost. Falls back to Emscripten's invoke when an export cannot be found.
WG.invokes = [];  // [signature, record] of each replaced invoke import
WG.fastInvoke = function(sig, orig) {
  const rec = {call: null};
  WG.invokes.push([sig, rec]);
  return function(...args) {
    ++WG.crossings;
    const call = rec.call;
    if (!call) return orig(...args);
    const sp = WG.rawStackSave();
    try {
      return call(...args);
    } catch (e) {
      WG.rawStackRestore(sp);
      if (e !== e + 0) throw e;
      WG.rawSetThrew(1, 0);
    }
  };
};
// The raw export behind one of Emscripten's lazily bound export stubs
// (`function(){return(name=Module["name"]=Module["asm"]["Xy"]).apply(null,arguments)}`).
WG.rawExport = function(exports, name) {
  const m = /\["asm"\]\["([^"]+)"\]/.exec(String(Module[name]));
  return m && typeof exports[m[1]] === 'function' ? exports[m[1]] : null;
};
WG.bindRaw = function(exports) {
  WG.rawStackSave = WG.rawExport(exports, 'stackSave');
  WG.rawStackRestore = WG.rawExport(exports, 'stackRestore');
  WG.rawSetThrew = WG.rawExport(exports, '_setThrew');
  const ok = WG.rawStackSave && WG.rawStackRestore && WG.rawSetThrew;
  let bound = 0;
  for (let k = 0; k < WG.invokes.length; ++k) {  // (no destructuring: Emscripten 3.1.6's acorn)
    const rec = WG.invokes[k][1];
    rec.call = ok ? WG.rawExport(exports, 'dynCall_' + WG.invokes[k][0]) : null;
    if (rec.call) ++bound;
  }
  WG.fastInvokes = bound + '/' + WG.invokes.length;
};
Module['instantiateWasm'] = function(info, receiveInstance) {
  for (const ns in info) {
    const imports = info[ns];
    for (const k in imports) {
      const f = imports[k];
      if (typeof f !== 'function') continue;
      const inv = /^invoke_([a-z]+)$/.exec(f.name);
      imports[k] = inv ? WG.fastInvoke(inv[1], f) : function() { ++WG.crossings; return f.apply(null, arguments); };
    }
  }
  fetch(wasmBinaryFile, {credentials: 'same-origin'})
      .then((r) => {
        if (!r.ok) throw new Error('failed to load ' + wasmBinaryFile + ': ' + r.status);
        return r.arrayBuffer();
      })
      .then((bytes) => WebAssembly.instantiate(bytes, info))
      .then((res) => {
        WG.bindRaw(res.instance.exports);
        receiveInstance(res.instance, res.module);
      }, (e) => readyPromiseReject(e));
  return {};
};
