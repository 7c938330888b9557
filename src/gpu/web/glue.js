// wgllm's WebGPU glue for the WebAssembly build (linked with --pre-js): a table of JS WebGPU
// objects addressed by small integer handles, and the few operations the C shim
// (webgpu_shim.cpp) needs. The device is created by the page/worker before the engine starts
// (Module.wgllmDevice, Module.wgllmAdapterInfo), so device creation needs no asyncify.
// Emscripten's own -sUSE_WEBGPU bindings target the 2022 API and fail in current browsers;
// this glue uses only today's standard WebGPU JS API.
var WG = {
  objs: [null],
  free: [],
  error: '',
  lost: false,
  maps: new Map(),  // token -> {promise, status, msg}
  nextToken: 1,
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
  onError(msg) { if (!this.error) this.error = msg; },
  // Called once from Context::create: registers the device (handle 1) and its queue (handle 2).
  init() {
    const dev = Module['wgllmDevice'];
    if (!dev) throw new Error('wgllm: no WebGPU device was given to the engine (Module.wgllmDevice)');
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
};
Module['wgllmGlue'] = WG;
