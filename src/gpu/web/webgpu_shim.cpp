// The standard webgpu.h C functions wgllm's runtime calls (buffer.cpp, pipeline.cpp,
// recorder.cpp), implemented for the WebAssembly build on top of the browser's WebGPU JS API
// (through src/gpu/web/glue.js). Handles are indices into the glue's object table, cast to the
// header's opaque pointer types. Only what wgllm uses is implemented; the rest of webgpu.h is
// left undefined so that a new call fails at link time, not at run time.
//
// Waiting: mapAsync promises are awaited in wgpuDevicePoll (an asyncify import), which then runs
// the C callbacks, so map_read() in buffer.cpp works unchanged. Timestamp queries are not offered
// (Context::timestamps_inside_passes() is false in the browser), their entry points abort.
#include <emscripten.h>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "gpu/webgpu.h"

namespace {

int h(const void* p) { return int(reinterpret_cast<uintptr_t>(p)); }
template <class T>
T obj(int id) { return reinterpret_cast<T>(uintptr_t(id)); }
std::string view(WGPUStringView s) { return wgllm::gpu::str(s); }

// clang-format off
EM_JS(int, wgjs_create_buffer, (double size, int usage, const char* label), {
  return WG.add(WG.device().createBuffer({size: size, usage: usage, label: UTF8ToString(label)}));
});
EM_JS(void, wgjs_buffer_destroy, (int b), { WG.get(b).destroy(); });
EM_JS(void, wgjs_release, (int id), { WG.release(id); });
EM_JS(void, wgjs_write_buffer, (int b, double off, const void* data, double size), {
  WG.get(2).writeBuffer(WG.get(b), off, HEAPU8, data, size);
});
EM_JS(int, wgjs_map_read, (int b, double off, double size), {
  const t = WG.nextToken++;
  const rec = {status: 0, msg: ''};
  rec.promise = WG.get(b).mapAsync(GPUMapMode.READ, off, size).then(
      () => { rec.status = 1; },
      (e) => { rec.status = 2; rec.msg = String((e && e.message) || e); });
  WG.maps.set(t, rec);
  return t;
});
EM_ASYNC_JS(void, wgjs_wait_maps, (), {
  await Promise.all(Array.from(WG.maps.values(), (r) => r.promise));
});
EM_ASYNC_JS(void, wgjs_wait_idle, (), { await WG.get(2).onSubmittedWorkDone(); });
EM_JS(int, wgjs_map_status, (int t, char* msg, int cap), {
  const r = WG.maps.get(t);
  WG.maps.delete(t);
  if (!r) return 2;
  if (r.msg) stringToUTF8(r.msg, msg, cap);
  return r.status;
});
EM_JS(void, wgjs_copy_mapped, (int b, double off, double size, void* dst), {
  HEAPU8.set(new Uint8Array(WG.get(b).getMappedRange(off, size)), dst);
});
EM_JS(void, wgjs_unmap, (int b), { WG.get(b).unmap(); });
EM_JS(int, wgjs_create_encoder, (), { return WG.add(WG.device().createCommandEncoder()); });
EM_JS(void, wgjs_copy_b2b, (int enc, int src, double so, int dst, double doff, double size), {
  WG.get(enc).copyBufferToBuffer(WG.get(src), so, WG.get(dst), doff, size);
});
EM_JS(int, wgjs_finish, (int enc), { return WG.add(WG.get(enc).finish()); });
EM_JS(void, wgjs_submit, (const int* cmds, int n), {
  const list = [];
  for (let i = 0; i < n; ++i) list.push(WG.get(HEAP32[(cmds >> 2) + i]));
  WG.get(2).submit(list);
});
EM_JS(int, wgjs_begin_pass, (int enc), { return WG.add(WG.get(enc).beginComputePass()); });
EM_JS(void, wgjs_set_pipeline, (int pass, int p), { WG.get(pass).setPipeline(WG.get(p)); });
EM_JS(void, wgjs_set_bind_group, (int pass, int idx, int bg), { WG.get(pass).setBindGroup(idx, WG.get(bg)); });
EM_JS(void, wgjs_dispatch, (int pass, int x, int y, int z), { WG.get(pass).dispatchWorkgroups(x, y, z); });
EM_JS(void, wgjs_end_pass, (int pass), { WG.get(pass).end(); });
EM_JS(int, wgjs_create_bgl, (const int* e, int n, const char* label), {
  const kinds = ['read-only-storage', 'storage', 'uniform'];
  const entries = [];
  for (let i = 0; i < n; ++i) {
    const b = HEAP32[(e >> 2) + 2 * i], k = HEAP32[(e >> 2) + 2 * i + 1];
    entries.push({binding: b, visibility: GPUShaderStage.COMPUTE, buffer: {type: kinds[k]}});
  }
  return WG.add(WG.device().createBindGroupLayout({label: UTF8ToString(label), entries: entries}));
});
EM_JS(int, wgjs_create_pl, (const int* layouts, int n), {
  const l = [];
  for (let i = 0; i < n; ++i) l.push(WG.get(HEAP32[(layouts >> 2) + i]));
  return WG.add(WG.device().createPipelineLayout({bindGroupLayouts: l}));
});
// Browsers require `enable subgroups;` before subgroup builtins (wgpu-native rejects it, so the
// kernels' WGSL never carries it): added when the source uses them and the device has the feature.
EM_JS(int, wgjs_create_module, (const char* code, const char* label), {
  let src = UTF8ToString(code);
  if (src.includes('subgroup') && !src.includes('enable subgroups') && WG.device().features.has('subgroups'))
    src = 'enable subgroups;' + String.fromCharCode(10) + src;  // (no backslashes inside EM_JS)
  return WG.add(WG.device().createShaderModule({label: UTF8ToString(label), code: src}));
});
EM_JS(int, wgjs_create_pipeline, (int layout, int mod, const char* entry, const char* label), {
  return WG.add(WG.device().createComputePipeline({
      label: UTF8ToString(label), layout: WG.get(layout),
      compute: {module: WG.get(mod), entryPoint: UTF8ToString(entry)}}));
});
EM_JS(int, wgjs_create_bind_group, (int layout, const double* e, int n), {
  const entries = [];
  for (let i = 0; i < n; ++i) {
    const f = (e >> 3) + 4 * i;
    entries.push({binding: HEAPF64[f], resource: {buffer: WG.get(HEAPF64[f + 1]), offset: HEAPF64[f + 2], size: HEAPF64[f + 3]}});
  }
  return WG.add(WG.device().createBindGroup({layout: WG.get(layout), entries: entries}));
});
// clang-format on

struct PendingMap {
  int token;
  WGPUBufferMapCallbackInfo cb;
};
std::vector<PendingMap>& pending_maps() {
  static std::vector<PendingMap> v;
  return v;
}
std::map<int, std::vector<uint8_t>>& mapped() {
  static std::map<int, std::vector<uint8_t>> m;
  return m;
}

[[noreturn]] void unsupported(const char* what) {
  std::fprintf(stderr, "wgllm (browser): %s is not supported by the WebGPU glue\n", what);
  std::abort();
}

}  // namespace

extern "C" {

WGPUBuffer wgpuDeviceCreateBuffer(WGPUDevice, const WGPUBufferDescriptor* d) {
  return obj<WGPUBuffer>(wgjs_create_buffer(double(d->size), int(d->usage), view(d->label).c_str()));
}
void wgpuBufferDestroy(WGPUBuffer b) { wgjs_buffer_destroy(h(b)); }
void wgpuBufferRelease(WGPUBuffer b) { wgjs_release(h(b)); }
void wgpuQueueWriteBuffer(WGPUQueue, WGPUBuffer b, uint64_t off, const void* data, size_t size) {
  wgjs_write_buffer(h(b), double(off), data, double(size));
}

WGPUFuture wgpuBufferMapAsync(WGPUBuffer b, WGPUMapMode, size_t off, size_t size, WGPUBufferMapCallbackInfo cb) {
  pending_maps().push_back({wgjs_map_read(h(b), double(off), double(size)), cb});
  return WGPUFuture{0};
}

WGPUBool wgpuDevicePoll(WGPUDevice, WGPUBool wait, const WGPUSubmissionIndex*) {
  auto maps = std::move(pending_maps());
  pending_maps().clear();
  if (maps.empty()) {
    if (wait) wgjs_wait_idle();
    return 1;
  }
  wgjs_wait_maps();
  for (auto& m : maps) {
    char msg[512] = {0};
    const int st = wgjs_map_status(m.token, msg, sizeof msg);
    const WGPUMapAsyncStatus s = st == 1 ? WGPUMapAsyncStatus_Success : WGPUMapAsyncStatus_Error;
    m.cb.callback(s, WGPUStringView{msg, WGPU_STRLEN}, m.cb.userdata1, m.cb.userdata2);
  }
  return 1;
}

const void* wgpuBufferGetConstMappedRange(WGPUBuffer b, size_t off, size_t size) {
  auto& v = mapped()[h(b)];
  v.resize(size);
  wgjs_copy_mapped(h(b), double(off), double(size), v.data());
  return v.data();
}
void wgpuBufferUnmap(WGPUBuffer b) {
  wgjs_unmap(h(b));
  mapped().erase(h(b));
}

WGPUCommandEncoder wgpuDeviceCreateCommandEncoder(WGPUDevice, const WGPUCommandEncoderDescriptor*) {
  return obj<WGPUCommandEncoder>(wgjs_create_encoder());
}
void wgpuCommandEncoderCopyBufferToBuffer(WGPUCommandEncoder e, WGPUBuffer src, uint64_t so, WGPUBuffer dst,
                                          uint64_t doff, uint64_t size) {
  wgjs_copy_b2b(h(e), h(src), double(so), h(dst), double(doff), double(size));
}
WGPUCommandBuffer wgpuCommandEncoderFinish(WGPUCommandEncoder e, const WGPUCommandBufferDescriptor*) {
  return obj<WGPUCommandBuffer>(wgjs_finish(h(e)));
}
void wgpuCommandEncoderRelease(WGPUCommandEncoder e) { wgjs_release(h(e)); }
void wgpuCommandBufferRelease(WGPUCommandBuffer c) { wgjs_release(h(c)); }
void wgpuQueueSubmit(WGPUQueue, size_t n, const WGPUCommandBuffer* cmds) {
  std::vector<int> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = h(cmds[i]);
  wgjs_submit(ids.data(), int(n));
}

WGPUComputePassEncoder wgpuCommandEncoderBeginComputePass(WGPUCommandEncoder e, const WGPUComputePassDescriptor*) {
  return obj<WGPUComputePassEncoder>(wgjs_begin_pass(h(e)));
}
void wgpuComputePassEncoderSetPipeline(WGPUComputePassEncoder p, WGPUComputePipeline pipe) {
  wgjs_set_pipeline(h(p), h(pipe));
}
void wgpuComputePassEncoderSetBindGroup(WGPUComputePassEncoder p, uint32_t idx, WGPUBindGroup bg, size_t n_dyn,
                                        const uint32_t*) {
  if (n_dyn) unsupported("dynamic offsets");
  wgjs_set_bind_group(h(p), int(idx), h(bg));
}
void wgpuComputePassEncoderDispatchWorkgroups(WGPUComputePassEncoder p, uint32_t x, uint32_t y, uint32_t z) {
  wgjs_dispatch(h(p), int(x), int(y), int(z));
}
void wgpuComputePassEncoderEnd(WGPUComputePassEncoder p) { wgjs_end_pass(h(p)); }
void wgpuComputePassEncoderRelease(WGPUComputePassEncoder p) { wgjs_release(h(p)); }

WGPUBindGroupLayout wgpuDeviceCreateBindGroupLayout(WGPUDevice, const WGPUBindGroupLayoutDescriptor* d) {
  std::vector<int> e;
  for (size_t i = 0; i < d->entryCount; ++i) {
    const auto& x = d->entries[i];
    int k = 0;
    switch (x.buffer.type) {
      case WGPUBufferBindingType_ReadOnlyStorage: k = 0; break;
      case WGPUBufferBindingType_Storage: k = 1; break;
      case WGPUBufferBindingType_Uniform: k = 2; break;
      default: unsupported("a non-buffer binding");
    }
    e.push_back(int(x.binding));
    e.push_back(k);
  }
  return obj<WGPUBindGroupLayout>(wgjs_create_bgl(e.data(), int(d->entryCount), view(d->label).c_str()));
}
void wgpuBindGroupLayoutRelease(WGPUBindGroupLayout l) { wgjs_release(h(l)); }

WGPUPipelineLayout wgpuDeviceCreatePipelineLayout(WGPUDevice, const WGPUPipelineLayoutDescriptor* d) {
  std::vector<int> ids;
  for (size_t i = 0; i < d->bindGroupLayoutCount; ++i) ids.push_back(h(d->bindGroupLayouts[i]));
  return obj<WGPUPipelineLayout>(wgjs_create_pl(ids.data(), int(ids.size())));
}
void wgpuPipelineLayoutRelease(WGPUPipelineLayout l) { wgjs_release(h(l)); }

WGPUShaderModule wgpuDeviceCreateShaderModule(WGPUDevice, const WGPUShaderModuleDescriptor* d) {
  const WGPUChainedStruct* c = d->nextInChain;
  if (!c || c->sType != WGPUSType_ShaderSourceWGSL) unsupported("a shader module without WGSL source");
  const auto* src = reinterpret_cast<const WGPUShaderSourceWGSL*>(c);
  return obj<WGPUShaderModule>(wgjs_create_module(view(src->code).c_str(), view(d->label).c_str()));
}
void wgpuShaderModuleRelease(WGPUShaderModule m) { wgjs_release(h(m)); }

WGPUComputePipeline wgpuDeviceCreateComputePipeline(WGPUDevice, const WGPUComputePipelineDescriptor* d) {
  return obj<WGPUComputePipeline>(wgjs_create_pipeline(h(d->layout), h(d->compute.module),
                                                       view(d->compute.entryPoint).c_str(), view(d->label).c_str()));
}
void wgpuComputePipelineRelease(WGPUComputePipeline p) { wgjs_release(h(p)); }

WGPUBindGroup wgpuDeviceCreateBindGroup(WGPUDevice, const WGPUBindGroupDescriptor* d) {
  std::vector<double> e;
  for (size_t i = 0; i < d->entryCount; ++i) {
    const auto& x = d->entries[i];
    e.insert(e.end(), {double(x.binding), double(h(x.buffer)), double(x.offset), double(x.size)});
  }
  return obj<WGPUBindGroup>(wgjs_create_bind_group(h(d->layout), e.data(), int(d->entryCount)));
}
void wgpuBindGroupRelease(WGPUBindGroup g) { wgjs_release(h(g)); }

// Timestamp queries: never requested in the browser build (see context_web.cpp).
WGPUQuerySet wgpuDeviceCreateQuerySet(WGPUDevice, const WGPUQuerySetDescriptor*) { unsupported("timestamp queries"); }
void wgpuQuerySetRelease(WGPUQuerySet) {}
void wgpuComputePassEncoderWriteTimestamp(WGPUComputePassEncoder, WGPUQuerySet, uint32_t) { unsupported("timestamp queries"); }
void wgpuCommandEncoderResolveQuerySet(WGPUCommandEncoder, WGPUQuerySet, uint32_t, uint32_t, WGPUBuffer, uint64_t) {
  unsupported("timestamp queries");
}
float wgpuQueueGetTimestampPeriod(WGPUQueue) { return 1.0f; }

}  // extern "C"
