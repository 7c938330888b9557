// The standard webgpu.h C functions wgllm's runtime calls (buffer.cpp, pipeline.cpp,
// recorder.cpp), implemented for the WebAssembly build on top of the browser's WebGPU JS API
// (through src/gpu/web/glue.js). Handles are indices into the glue's object table, cast to the
// header's opaque pointer types. Only what wgllm uses is implemented; the rest of webgpu.h is
// left undefined so that a new call fails at link time, not at run time.
//
// Command lists: encoders, passes and command buffers exist only on the wasm side. Their commands,
// and the queue's writes, map requests, destroys and releases, are appended as u32 words to one
// list in wasm memory that glue.js (WG.replay) runs in a single call at the next flush point: a
// submit, a poll, a large write. A decode step thus crosses into JS a few times (submit, wait)
// instead of about three times per dispatch; the WebGPU JS calls made are the same.
//
// Waiting: mapAsync promises are awaited in wgpuDevicePoll (an asyncify import), which then runs
// the C callbacks of the maps that have settled (each map's range is copied into wasm memory and
// the buffer unmapped by the glue as soon as it is mapped), so map_read() in buffer.cpp and the
// recorder's readback ring (several maps in flight: a pipelined decode) work unchanged.
// Timestamp queries are not offered (Context::timestamps_inside_passes() is false in the
// browser), their entry points abort.
#include <emscripten.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
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
// The command list (see `Op` below) replayed in one crossing.
EM_JS(void, wgjs_replay, (const uint32_t* list, int n), { WG.replay(list, n); });
// Replays `list`, then writes the status of each map token (0 pending, 1 done, 2 failed) to st.
EM_JS(void, wgjs_replay_status, (const uint32_t* list, int n, const int* tok, int nt, int* st), {
  if (n) WG.replay(list, n);
  WG.mapStatus(tok, nt, st);
});
EM_ASYNC_JS(void, wgjs_wait_any, (const int* tok, int nt, int* st), { await WG.waitAny(tok, nt, st); });
EM_ASYNC_JS(void, wgjs_replay_wait_idle, (const uint32_t* list, int n), {
  if (n) WG.replay(list, n);
  await WG.get(2).onSubmittedWorkDone();
});
EM_JS(void, wgjs_write_buffer, (int b, double off, const void* data, double size), {
  WG.get(2).writeBuffer(WG.get(b), off, HEAPU8, data, size);
});
EM_JS(char*, wgjs_map_error, (int t), {
  const s = WG.mapError(t);
  const n = lengthBytesUTF8(s) + 1, p = _malloc(n);
  stringToUTF8(s, p, n);
  return p;
});
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

// Command-list opcodes, each followed by its operand words (glue.js WG.replay; keep in sync).
// 64-bit offsets and sizes are (lo, hi) word pairs.
enum Op : uint32_t {
  kWrite = 1,      // buf, off lo, off hi, wasm address of the data, size (data read at the replay)
  kEncoder = 2,    // createCommandEncoder
  kPass = 3,       // beginComputePass
  kPipeline = 4,   // pipeline
  kBindGroup = 5,  // index, bind group
  kDispatch = 6,   // x, y, z
  kEndPass = 7,
  kCopy = 8,       // src, off lo, off hi, dst, off lo, off hi, size lo, size hi
  kFinish = 9,     // the encoder's command buffer joins the next submit
  kSubmit = 10,    // queue.submit of the command buffers finished since the last one
  kMap = 11,       // token, buf, off, size, wasm address the mapped range is copied to
  kDestroy = 12,   // buf
  kRelease = 13,   // any handle (its table slot is freed)
  kWriteInline = 14,  // buf, off lo, off hi, size, then ceil(size/4) words of data
};

uint32_t lo(uint64_t v) { return uint32_t(v); }
uint32_t hi(uint64_t v) { return uint32_t(v >> 32); }

// The queue-level list: operations in program order since the last flush (a crossing that
// replays it). Encoder commands go into their encoder's own list and join this one at the
// submit, so a write or map made while an encoder records is ordered as the queue sees it.
std::vector<uint32_t>& queue_list() {
  static std::vector<uint32_t> v = [] {
    std::vector<uint32_t> r;
    r.reserve(1 << 16);
    return r;
  }();
  return v;
}
// Handles released while an encoder was open wait until no encoder is open (an open encoder may
// name them), then go at the end of a flushed list (after every operation that names them, and
// before the id can be given to a new object).
std::vector<uint32_t>& releases() {
  static std::vector<uint32_t> v;
  return v;
}
int g_open_encoders = 0;

void append_releases() {
  if (g_open_encoders) return;
  auto& q = queue_list();
  for (uint32_t id : releases()) q.insert(q.end(), {kRelease, id});
  releases().clear();
}

// One crossing: replays everything queued (a no-op without anything queued).
void flush() {
  append_releases();
  auto& q = queue_list();
  if (q.empty()) return;
  wgjs_replay(q.data(), int(q.size()));
  q.clear();
}

struct Encoder {
  std::vector<uint32_t> ops;
  bool in_pass = false;
};
struct CommandBuffer {
  std::vector<uint32_t> ops;
};
Encoder* enc(WGPUCommandEncoder e) { return reinterpret_cast<Encoder*>(e); }
Encoder* pass(WGPUComputePassEncoder p) { return reinterpret_cast<Encoder*>(p); }  // a pass records into its encoder

struct PendingMap {
  int token;
  int buffer;
  uint64_t offset;
  WGPUBufferMapCallbackInfo cb;
  std::vector<uint8_t> data;  // JS copies the mapped range here once mapped
};
std::vector<std::unique_ptr<PendingMap>>& pending_maps() {
  static std::vector<std::unique_ptr<PendingMap>> v;
  return v;
}
struct Mapped {
  uint64_t offset = 0;
  std::vector<uint8_t> data;
};
std::map<int, Mapped>& mapped() {
  static std::map<int, Mapped> m;
  return m;
}
int g_next_token = 1;

// Runs the callbacks of the settled maps (status per pending map: 0 pending, 1 done, 2 failed).
void settle(const std::vector<int>& st) {
  auto maps = std::move(pending_maps());
  pending_maps().clear();
  for (size_t i = 0; i < maps.size(); ++i) {
    auto& m = maps[i];
    if (st[i] == 0) {
      pending_maps().push_back(std::move(m));
      continue;
    }
    std::string msg;
    WGPUMapAsyncStatus s = WGPUMapAsyncStatus_Success;
    if (st[i] == 1) {
      mapped()[m->buffer] = Mapped{m->offset, std::move(m->data)};
    } else {
      char* p = wgjs_map_error(m->token);
      msg = p;
      std::free(p);
      s = WGPUMapAsyncStatus_Error;
    }
    m->cb.callback(s, WGPUStringView{msg.c_str(), msg.size()}, m->cb.userdata1, m->cb.userdata2);
  }
}

[[noreturn]] void unsupported(const char* what) {
  std::fprintf(stderr, "wgllm (browser): %s is not supported by the WebGPU glue\n", what);
  std::abort();
}

}  // namespace

extern "C" {

// Set to 1 by the JS glue when a WebGPU error or device loss is pending (context_web.cpp reads it
// without a crossing).
int wgllm_js_error_flag = 0;

WGPUBuffer wgpuDeviceCreateBuffer(WGPUDevice, const WGPUBufferDescriptor* d) {
  return obj<WGPUBuffer>(wgjs_create_buffer(double(d->size), int(d->usage), view(d->label).c_str()));
}
void wgpuBufferDestroy(WGPUBuffer b) { queue_list().insert(queue_list().end(), {kDestroy, uint32_t(h(b))}); }
void wgpuBufferRelease(WGPUBuffer b) {
  mapped().erase(h(b));
  releases().push_back(uint32_t(h(b)));
}

// Writes up to kInlineWrite bytes travel in the list (copied now); larger ones (weights at load)
// are written at once, after the list.
constexpr size_t kInlineWrite = 1024;
void wgpuQueueWriteBuffer(WGPUQueue, WGPUBuffer b, uint64_t off, const void* data, size_t size) {
  if (size <= kInlineWrite) {
    auto& q = queue_list();
    q.insert(q.end(), {kWriteInline, uint32_t(h(b)), lo(off), hi(off), uint32_t(size)});
    const size_t at = q.size();
    q.resize(at + (size + 3) / 4, 0);
    std::memcpy(q.data() + at, data, size);
    return;
  }
  flush();
  wgjs_write_buffer(h(b), double(off), data, double(size));
}

// See webgpu.h: `data` is read at the next flush (the next submit), not copied.
void wgllmQueueWriteBufferDeferred(WGPUQueue, WGPUBuffer b, uint64_t off, const void* data, size_t size) {
  queue_list().insert(queue_list().end(), {kWrite, uint32_t(h(b)), lo(off), hi(off),
                                           uint32_t(reinterpret_cast<uintptr_t>(data)), uint32_t(size)});
}

WGPUFuture wgpuBufferMapAsync(WGPUBuffer b, WGPUMapMode mode, size_t off, size_t size, WGPUBufferMapCallbackInfo cb) {
  if (mode != WGPUMapMode_Read) unsupported("a map mode other than read");
  auto m = std::make_unique<PendingMap>();
  m->token = g_next_token++;
  m->buffer = h(b);
  m->offset = off;
  m->cb = cb;
  m->data.resize(size);
  queue_list().insert(queue_list().end(), {kMap, uint32_t(m->token), uint32_t(h(b)), uint32_t(off), uint32_t(size),
                                           uint32_t(reinterpret_cast<uintptr_t>(m->data.data()))});
  pending_maps().push_back(std::move(m));
  return WGPUFuture{0};
}

// Replays the list; then, with pending maps, runs the callbacks of those already settled, and
// when none has (and `wait`), awaits the first to settle (asyncify) and runs its callback.
// Without pending maps and with `wait`: awaits the queue's idle.
WGPUBool wgpuDevicePoll(WGPUDevice, WGPUBool wait, const WGPUSubmissionIndex*) {
  append_releases();
  auto& q = queue_list();
  const size_t n = pending_maps().size();
  if (n == 0) {
    if (wait) {
      wgjs_replay_wait_idle(q.data(), int(q.size()));
      q.clear();
    } else {
      flush();
    }
    return 1;
  }
  std::vector<int> tok(n), st(n, 0);
  for (size_t i = 0; i < n; ++i) tok[i] = pending_maps()[i]->token;
  wgjs_replay_status(q.data(), int(q.size()), tok.data(), int(n), st.data());
  q.clear();
  bool any = false;
  for (int s : st) any = any || s != 0;
  if (!any && wait) wgjs_wait_any(tok.data(), int(n), st.data());
  settle(st);
  return 1;
}

const void* wgpuBufferGetConstMappedRange(WGPUBuffer b, size_t off, size_t size) {
  auto it = mapped().find(h(b));
  if (it == mapped().end() || off < it->second.offset || off + size > it->second.offset + it->second.data.size())
    return nullptr;
  return it->second.data.data() + (off - it->second.offset);
}
// The glue unmapped the buffer when it copied the range: only the copy is dropped.
void wgpuBufferUnmap(WGPUBuffer b) { mapped().erase(h(b)); }

WGPUCommandEncoder wgpuDeviceCreateCommandEncoder(WGPUDevice, const WGPUCommandEncoderDescriptor*) {
  auto* e = new Encoder();
  e->ops.reserve(4096);
  e->ops.push_back(kEncoder);
  ++g_open_encoders;
  return reinterpret_cast<WGPUCommandEncoder>(e);
}
void wgpuCommandEncoderCopyBufferToBuffer(WGPUCommandEncoder e, WGPUBuffer src, uint64_t so, WGPUBuffer dst,
                                          uint64_t doff, uint64_t size) {
  enc(e)->ops.insert(enc(e)->ops.end(), {kCopy, uint32_t(h(src)), lo(so), hi(so), uint32_t(h(dst)), lo(doff), hi(doff),
                                         lo(size), hi(size)});
}
WGPUCommandBuffer wgpuCommandEncoderFinish(WGPUCommandEncoder e, const WGPUCommandBufferDescriptor*) {
  auto* c = new CommandBuffer();
  c->ops = std::move(enc(e)->ops);
  c->ops.push_back(kFinish);
  return reinterpret_cast<WGPUCommandBuffer>(c);
}
void wgpuCommandEncoderRelease(WGPUCommandEncoder e) {
  delete enc(e);
  --g_open_encoders;
}
void wgpuCommandBufferRelease(WGPUCommandBuffer c) { delete reinterpret_cast<CommandBuffer*>(c); }
// One crossing: the queued writes, maps and releases, then every command buffer's commands and
// the submit.
void wgpuQueueSubmit(WGPUQueue, size_t n, const WGPUCommandBuffer* cmds) {
  auto& q = queue_list();
  for (size_t i = 0; i < n; ++i) {
    const auto& ops = reinterpret_cast<const CommandBuffer*>(cmds[i])->ops;
    q.insert(q.end(), ops.begin(), ops.end());
  }
  q.push_back(kSubmit);
  flush();
}

// The pass records into its encoder (the pass handle is the encoder).
WGPUComputePassEncoder wgpuCommandEncoderBeginComputePass(WGPUCommandEncoder e, const WGPUComputePassDescriptor*) {
  enc(e)->ops.push_back(kPass);
  enc(e)->in_pass = true;
  return reinterpret_cast<WGPUComputePassEncoder>(e);
}
void wgpuComputePassEncoderSetPipeline(WGPUComputePassEncoder p, WGPUComputePipeline pipe) {
  pass(p)->ops.insert(pass(p)->ops.end(), {kPipeline, uint32_t(h(pipe))});
}
void wgpuComputePassEncoderSetBindGroup(WGPUComputePassEncoder p, uint32_t idx, WGPUBindGroup bg, size_t n_dyn,
                                        const uint32_t*) {
  if (n_dyn) unsupported("dynamic offsets");
  pass(p)->ops.insert(pass(p)->ops.end(), {kBindGroup, idx, uint32_t(h(bg))});
}
void wgpuComputePassEncoderDispatchWorkgroups(WGPUComputePassEncoder p, uint32_t x, uint32_t y, uint32_t z) {
  pass(p)->ops.insert(pass(p)->ops.end(), {kDispatch, x, y, z});
}
void wgpuComputePassEncoderEnd(WGPUComputePassEncoder p) {
  pass(p)->ops.push_back(kEndPass);
  pass(p)->in_pass = false;
}
void wgpuComputePassEncoderRelease(WGPUComputePassEncoder) {}

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
void wgpuBindGroupLayoutRelease(WGPUBindGroupLayout l) { releases().push_back(uint32_t(h(l))); }

WGPUPipelineLayout wgpuDeviceCreatePipelineLayout(WGPUDevice, const WGPUPipelineLayoutDescriptor* d) {
  std::vector<int> ids;
  for (size_t i = 0; i < d->bindGroupLayoutCount; ++i) ids.push_back(h(d->bindGroupLayouts[i]));
  return obj<WGPUPipelineLayout>(wgjs_create_pl(ids.data(), int(ids.size())));
}
void wgpuPipelineLayoutRelease(WGPUPipelineLayout l) { releases().push_back(uint32_t(h(l))); }

WGPUShaderModule wgpuDeviceCreateShaderModule(WGPUDevice, const WGPUShaderModuleDescriptor* d) {
  const WGPUChainedStruct* c = d->nextInChain;
  if (!c || c->sType != WGPUSType_ShaderSourceWGSL) unsupported("a shader module without WGSL source");
  const auto* src = reinterpret_cast<const WGPUShaderSourceWGSL*>(c);
  return obj<WGPUShaderModule>(wgjs_create_module(view(src->code).c_str(), view(d->label).c_str()));
}
void wgpuShaderModuleRelease(WGPUShaderModule m) { releases().push_back(uint32_t(h(m))); }

WGPUComputePipeline wgpuDeviceCreateComputePipeline(WGPUDevice, const WGPUComputePipelineDescriptor* d) {
  return obj<WGPUComputePipeline>(wgjs_create_pipeline(h(d->layout), h(d->compute.module),
                                                       view(d->compute.entryPoint).c_str(), view(d->label).c_str()));
}
void wgpuComputePipelineRelease(WGPUComputePipeline p) { releases().push_back(uint32_t(h(p))); }

WGPUBindGroup wgpuDeviceCreateBindGroup(WGPUDevice, const WGPUBindGroupDescriptor* d) {
  std::vector<double> e;
  for (size_t i = 0; i < d->entryCount; ++i) {
    const auto& x = d->entries[i];
    e.insert(e.end(), {double(x.binding), double(h(x.buffer)), double(x.offset), double(x.size)});
  }
  return obj<WGPUBindGroup>(wgjs_create_bind_group(h(d->layout), e.data(), int(d->entryCount)));
}
void wgpuBindGroupRelease(WGPUBindGroup g) { releases().push_back(uint32_t(h(g))); }

// Timestamp queries: never requested in the browser build (see context_web.cpp).
WGPUQuerySet wgpuDeviceCreateQuerySet(WGPUDevice, const WGPUQuerySetDescriptor*) { unsupported("timestamp queries"); }
void wgpuQuerySetRelease(WGPUQuerySet) {}
void wgpuComputePassEncoderWriteTimestamp(WGPUComputePassEncoder, WGPUQuerySet, uint32_t) { unsupported("timestamp queries"); }
void wgpuCommandEncoderResolveQuerySet(WGPUCommandEncoder, WGPUQuerySet, uint32_t, uint32_t, WGPUBuffer, uint64_t) {
  unsupported("timestamp queries");
}
float wgpuQueueGetTimestampPeriod(WGPUQueue) { return 1.0f; }

}  // extern "C"
