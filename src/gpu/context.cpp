#include "gpu/context.h"

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <atomic>
#include <map>
#include <string>
#include <tuple>
#include <mutex>
#include <thread>

#include "core/error.h"
#include "gpu/buffer.h"
#include "gpu/pipeline.h"
#include "gpu/recorder.h"

namespace wgllm::gpu {
namespace {

std::string backend_name(WGPUBackendType b) {
  switch (b) {
    case WGPUBackendType_Vulkan: return "Vulkan";
    case WGPUBackendType_Metal: return "Metal";
    case WGPUBackendType_D3D12: return "D3D12";
    case WGPUBackendType_OpenGL: return "OpenGL";
    case WGPUBackendType_OpenGLES: return "OpenGLES";
    case WGPUBackendType_Null: return "Null";
    default: return "Unknown";
  }
}

std::string adapter_type_name(WGPUAdapterType t) {
  switch (t) {
    case WGPUAdapterType_DiscreteGPU: return "DiscreteGPU";
    case WGPUAdapterType_IntegratedGPU: return "IntegratedGPU";
    case WGPUAdapterType_CPU: return "CPU";
    default: return "Unknown";
  }
}

std::string feature_name(uint32_t f) {
  switch (f) {
    case WGPUFeatureName_CoreFeaturesAndLimits: return "core-features-and-limits";
    case WGPUFeatureName_DepthClipControl: return "depth-clip-control";
    case WGPUFeatureName_Depth32FloatStencil8: return "depth32float-stencil8";
    case WGPUFeatureName_TextureCompressionBC: return "texture-compression-bc";
    case WGPUFeatureName_TextureCompressionETC2: return "texture-compression-etc2";
    case WGPUFeatureName_TextureCompressionASTC: return "texture-compression-astc";
    case WGPUFeatureName_TimestampQuery: return "timestamp-query";
    case WGPUFeatureName_IndirectFirstInstance: return "indirect-first-instance";
    case WGPUFeatureName_ShaderF16: return "shader-f16";
    case WGPUFeatureName_RG11B10UfloatRenderable: return "rg11b10ufloat-renderable";
    case WGPUFeatureName_BGRA8UnormStorage: return "bgra8unorm-storage";
    case WGPUFeatureName_Float32Filterable: return "float32-filterable";
    case WGPUFeatureName_Float32Blendable: return "float32-blendable";
    case WGPUFeatureName_ClipDistances: return "clip-distances";
    case WGPUFeatureName_DualSourceBlending: return "dual-source-blending";
    case WGPUFeatureName_Subgroups: return "subgroups";
    case WGPUNativeFeature_Immediates: return "native:immediates";
    case WGPUNativeFeature_PipelineStatisticsQuery: return "native:pipeline-statistics-query";
    case WGPUNativeFeature_ShaderF64: return "native:shader-f64";
    case WGPUNativeFeature_ShaderI16: return "native:shader-i16";
    case WGPUNativeFeature_Subgroup: return "native:subgroup";
    case WGPUNativeFeature_SubgroupBarrier: return "native:subgroup-barrier";
    case WGPUNativeFeature_TimestampQueryInsideEncoders: return "native:timestamp-query-inside-encoders";
    case WGPUNativeFeature_TimestampQueryInsidePasses: return "native:timestamp-query-inside-passes";
    case WGPUNativeFeature_MappablePrimaryBuffers: return "native:mappable-primary-buffers";
    case WGPUFeatureName_TextureCompressionBCSliced3D: return "texture-compression-bc-sliced-3d";
    case WGPUFeatureName_TextureCompressionASTCSliced3D: return "texture-compression-astc-sliced-3d";
    case WGPUFeatureName_TextureFormatsTier1: return "texture-formats-tier1";
    case WGPUFeatureName_TextureFormatsTier2: return "texture-formats-tier2";
    case WGPUFeatureName_PrimitiveIndex: return "primitive-index";
    case WGPUFeatureName_TextureComponentSwizzle: return "texture-component-swizzle";
    case WGPUNativeFeature_TextureAdapterSpecificFormatFeatures: return "native:texture-adapter-specific-format-features";
    case WGPUNativeFeature_MultiDrawIndirectCount: return "native:multi-draw-indirect-count";
    case WGPUNativeFeature_VertexWritableStorage: return "native:vertex-writable-storage";
    case WGPUNativeFeature_TextureBindingArray: return "native:texture-binding-array";
    case WGPUNativeFeature_SampledTextureAndStorageBufferArrayNonUniformIndexing: return "native:sampled-texture-and-storage-buffer-array-non-uniform-indexing";
    case WGPUNativeFeature_StorageResourceBindingArray: return "native:storage-resource-binding-array";
    case WGPUNativeFeature_PartiallyBoundBindingArray: return "native:partially-bound-binding-array";
    case WGPUNativeFeature_TextureFormat16bitNorm: return "native:texture-format16bit-norm";
    case WGPUNativeFeature_TextureCompressionAstcHdr: return "native:texture-compression-astc-hdr";
    case WGPUNativeFeature_BufferBindingArray: return "native:buffer-binding-array";
    case WGPUNativeFeature_StorageTextureArrayNonUniformIndexing: return "native:storage-texture-array-non-uniform-indexing";
    case WGPUNativeFeature_AddressModeClampToZero: return "native:address-mode-clamp-to-zero";
    case WGPUNativeFeature_AddressModeClampToBorder: return "native:address-mode-clamp-to-border";
    case WGPUNativeFeature_PolygonModeLine: return "native:polygon-mode-line";
    case WGPUNativeFeature_PolygonModePoint: return "native:polygon-mode-point";
    case WGPUNativeFeature_ConservativeRasterization: return "native:conservative-rasterization";
    case WGPUNativeFeature_ClearTexture: return "native:clear-texture";
    case WGPUNativeFeature_Multiview: return "native:multiview";
    case WGPUNativeFeature_VertexAttribute64bit: return "native:vertex-attribute64bit";
    case WGPUNativeFeature_TextureFormatNv12: return "native:texture-format-nv12";
    case WGPUNativeFeature_RayQuery: return "native:ray-query";
    case WGPUNativeFeature_ShaderEarlyDepthTest: return "native:shader-early-depth-test";
    case WGPUNativeFeature_SubgroupVertex: return "native:subgroup-vertex";
    case WGPUNativeFeature_ShaderInt64: return "native:shader-int64";
    case WGPUNativeFeature_ShaderFloat32Atomic: return "native:shader-float32-atomic";
    case WGPUNativeFeature_TextureAtomic: return "native:texture-atomic";
    case WGPUNativeFeature_TextureFormatP010: return "native:texture-format-p010";
    case WGPUNativeFeature_PipelineCache: return "native:pipeline-cache";
    case WGPUNativeFeature_ShaderInt64AtomicMinMax: return "native:shader-int64-atomic-min-max";
    case WGPUNativeFeature_ShaderInt64AtomicAllOps: return "native:shader-int64-atomic-all-ops";
    case WGPUNativeFeature_TextureInt64Atomic: return "native:texture-int64-atomic";
    case WGPUNativeFeature_ShaderBarycentrics: return "native:shader-barycentrics";
    case WGPUNativeFeature_SelectiveMultiview: return "native:selective-multiview";
    case WGPUNativeFeature_MultisampleArray: return "native:multisample-array";
    case WGPUNativeFeature_CooperativeMatrix: return "native:cooperative-matrix";
    case WGPUNativeFeature_ShaderPerVertex: return "native:shader-per-vertex";
    case WGPUNativeFeature_ShaderDrawIndex: return "native:shader-draw-index";
    case WGPUNativeFeature_AccelerationStructureBindingArray: return "native:acceleration-structure-binding-array";
    case WGPUNativeFeature_MemoryDecorationCoherent: return "native:memory-decoration-coherent";
    case WGPUNativeFeature_MemoryDecorationVolatile: return "native:memory-decoration-volatile";
    default: {
      char b[32];
      std::snprintf(b, sizeof b, "0x%08x", f);
      return b;
    }
  }
}

WGPUInstance make_instance() {
  WGPUInstanceExtras extras = {};
  extras.chain.sType = (WGPUSType)WGPUSType_InstanceExtras;
  extras.backends = WGPUInstanceBackend_Vulkan;  // never a GL or null fallback
  WGPUInstanceDescriptor desc = WGPU_INSTANCE_DESCRIPTOR_INIT;
  desc.nextInChain = &extras.chain;
  WGPUInstance inst = wgpuCreateInstance(&desc);
  if (!inst) throw Error("WebGPU: wgpuCreateInstance failed");
  return inst;
}

std::vector<WGPUAdapter> enumerate(WGPUInstance inst) {
  WGPUInstanceEnumerateAdapterOptions opts = {};
  opts.backends = WGPUInstanceBackend_Vulkan;
  size_t n = wgpuInstanceEnumerateAdapters(inst, &opts, nullptr);
  std::vector<WGPUAdapter> out(n);
  if (n) wgpuInstanceEnumerateAdapters(inst, &opts, out.data());
  return out;
}

AdapterInfo describe(WGPUAdapter a) {
  AdapterInfo r;
  WGPUAdapterInfo info = WGPU_ADAPTER_INFO_INIT;
  wgpuAdapterGetInfo(a, &info);
  r.name = str(info.device);
  r.vendor = str(info.vendor);
  r.architecture = str(info.architecture);
  r.driver = str(info.description);
  r.backend = backend_name(info.backendType);
  r.adapter_type = adapter_type_name(info.adapterType);
  r.vendor_id = info.vendorID;
  r.device_id = info.deviceID;
  r.subgroup_min = info.subgroupMinSize;
  r.subgroup_max = info.subgroupMaxSize;
  wgpuAdapterInfoFreeMembers(info);
  WGPUSupportedFeatures feats = WGPU_SUPPORTED_FEATURES_INIT;
  wgpuAdapterGetFeatures(a, &feats);
  for (size_t i = 0; i < feats.featureCount; ++i) r.features.push_back(feature_name(feats.features[i]));
  wgpuSupportedFeaturesFreeMembers(feats);
  wgpuAdapterGetLimits(a, &r.limits);
  return r;
}

const char* kNoAdapterAdvice =
    "no Vulkan adapter found. Install a GPU Vulkan driver, or on a CPU-only machine point the "
    "Vulkan loader at a software driver, e.g. "
    "VK_DRIVER_FILES=/usr/lib/chromium/vk_swiftshader_icd.json (Debian package chromium); "
    "`make setup` installs it and `scripts/vulkan_env.sh` prints the setting";

}  // namespace

std::vector<AdapterInfo> Context::list_adapters() {
  WGPUInstance inst = make_instance();
  std::vector<AdapterInfo> out;
  for (WGPUAdapter a : enumerate(inst)) {
    out.push_back(describe(a));
    wgpuAdapterRelease(a);
  }
  wgpuInstanceRelease(inst);
  if (out.empty()) throw Error(std::string("WebGPU: ") + kNoAdapterAdvice);
  return out;
}

// One WebGPU device per adapter and feature set for the whole process, shared by every Context
// asking for it. wgpu-native (0.32) does not free a released Vulkan device (its instance and the
// driver's file descriptors stay open: pygfx/wgpu-py#405, gfx-rs/wgpu#155), and the NVIDIA driver
// stops enumerating adapters after a few dozen such devices in one process (H200, 2026-12-05:
// "no Vulkan adapter found" after ~30 models created and destroyed in one test binary). So a
// device is created once and kept until the process exits or the device is lost; a Context that
// ends releases its own objects and polls the device so their memory is reclaimed.
struct SharedDevice {
  DeviceHandles h;  // owned: released in the destructor
  std::pair<uint32_t, uint32_t> subgroup_measured{0, 0};
  int coop_f16 = -1;                // Context::coop_matrix_f16(): -1 not yet probed, else 0 / 1
  std::mutex mu;                    // guards users, lost, lost_msg, subgroup_measured and coop_f16
  std::vector<Context*> users;      // the live Contexts on this device (error / loss callbacks)
  bool lost = false;
  std::string lost_msg;
  std::atomic<bool> destroy_is_loss = false;  // set by lose_device_for_testing(); read by the lost callback

  /// An error raised on this device: to the Context whose call raised it (ContextCall) when that
  /// one is on this device, else to every Context on it.
  void on_error(const std::string& m) {
    std::lock_guard<std::mutex> lk(mu);
    Context* cur = ContextCall::current();
    if (cur && std::find(users.begin(), users.end(), cur) != users.end()) return cur->on_error(m);
    for (Context* c : users) c->on_error(m);
  }
  void attach(Context* c) {
    std::lock_guard<std::mutex> lk(mu);
    users.push_back(c);
    if (lost) c->on_lost(lost_msg);  // lost between the pool's check and now
  }
  void detach(Context* c) {
    std::lock_guard<std::mutex> lk(mu);
    users.erase(std::remove(users.begin(), users.end(), c), users.end());
  }
  bool is_lost() {
    std::lock_guard<std::mutex> lk(mu);
    return lost;
  }
  void mark_lost(const std::string& msg) {
    std::lock_guard<std::mutex> lk(mu);
    if (lost) return;
    lost = true;
    lost_msg = msg;
    for (Context* c : users) c->on_lost(msg);
  }
  ~SharedDevice() {  // only a lost device is ever destroyed (see DevicePool)
    if (h.queue) wgpuQueueRelease(h.queue);
    if (h.device) wgpuDeviceRelease(h.device);
    if (h.adapter) wgpuAdapterRelease(h.adapter);
    if (h.instance) wgpuInstanceRelease(h.instance);
  }
};

namespace {

std::shared_ptr<SharedDevice> create_device(const ContextOptions& opts) {
  auto d = std::make_shared<SharedDevice>();
  d->h.instance = make_instance();
  std::vector<WGPUAdapter> adapters = enumerate(d->h.instance);
  if (adapters.empty()) throw Error(std::string("WebGPU: ") + kNoAdapterAdvice);
  int pick = opts.adapter_index;
  if (pick >= int(adapters.size())) {
    for (WGPUAdapter a : adapters) wgpuAdapterRelease(a);
    throw Error("WebGPU: adapter index " + std::to_string(pick) + " out of range (" +
                std::to_string(adapters.size()) + " adapters; see `wgllm devices`)");
  }
  std::vector<AdapterInfo> infos;
  for (WGPUAdapter a : adapters) infos.push_back(describe(a));
  if (pick < 0) {
    for (size_t i = 0; i < infos.size() && pick < 0; ++i)
      if (!infos[i].is_software() && infos[i].backend == "Vulkan") pick = int(i);
    for (size_t i = 0; i < infos.size() && pick < 0; ++i)
      if (infos[i].backend == "Vulkan") pick = int(i);
  }
  for (size_t i = 0; i < adapters.size(); ++i)
    if (int(i) != pick) wgpuAdapterRelease(adapters[i]);
  if (pick < 0) throw Error(std::string("WebGPU: ") + kNoAdapterAdvice);
  d->h.adapter = adapters[pick];
  d->h.info = infos[pick];
  if (d->h.info.backend != "Vulkan")
    throw Error("WebGPU: adapter '" + d->h.info.name + "' uses backend " + d->h.info.backend +
                ", only Vulkan is supported natively");

  // Features we use when present.
  WGPUSupportedFeatures feats = WGPU_SUPPORTED_FEATURES_INIT;
  wgpuAdapterGetFeatures(d->h.adapter, &feats);
  auto has = [&](uint32_t f) {
    for (size_t i = 0; i < feats.featureCount; ++i)
      if (uint32_t(feats.features[i]) == f) return true;
    return false;
  };
  // Subgroup operations: the standard feature, or wgpu-native's own where the adapter only
  // reports that one (lavapipe); either lets WGSL use the subgroup builtins (naga in wgpu-native
  // 0.32 rejects `enable subgroups;` and needs no enable directive).
  std::vector<uint32_t> want = {WGPUFeatureName_Subgroups, WGPUNativeFeature_Subgroup,
                               WGPUFeatureName_ShaderF16};
  if (opts.want_timestamps) {
    want.push_back(WGPUFeatureName_TimestampQuery);
    want.push_back(WGPUNativeFeature_TimestampQueryInsidePasses);
    want.push_back(WGPUNativeFeature_TimestampQueryInsideEncoders);
  }
  if (opts.want_coop_matrix) want.push_back(WGPUNativeFeature_CooperativeMatrix);
  for (uint32_t f : want)
    if (has(f)) d->h.enabled.push_back(WGPUFeatureName(f));
  d->h.ts_inside_passes = opts.want_timestamps && has(WGPUNativeFeature_TimestampQueryInsidePasses);
  wgpuSupportedFeaturesFreeMembers(feats);

  WGPULimits limits = d->h.info.limits;  // ask for everything the adapter offers
  WGPUDeviceDescriptor dd = WGPU_DEVICE_DESCRIPTOR_INIT;
  dd.label = sv("wgllm");
  dd.requiredLimits = &limits;
  // The callbacks reach every Context on the device. The SharedDevice outlives its device's
  // callbacks: it releases the device only in its destructor, after every user has gone.
  dd.deviceLostCallbackInfo.mode = WGPUCallbackMode_AllowSpontaneous;
  dd.deviceLostCallbackInfo.callback = [](WGPUDevice const*, WGPUDeviceLostReason reason,
                                          WGPUStringView msg, void* u1, void*) {
    auto* s = static_cast<SharedDevice*>(u1);
    if (reason == WGPUDeviceLostReason_CallbackCancelled) return;
    if (reason == WGPUDeviceLostReason_Destroyed && !s->destroy_is_loss) return;  // teardown
    s->mark_lost(str(msg).empty() ? "device destroyed" : str(msg));
  };
  dd.deviceLostCallbackInfo.userdata1 = d.get();
  dd.uncapturedErrorCallbackInfo.callback = [](WGPUDevice const*, WGPUErrorType type,
                                               WGPUStringView msg, void* u1, void*) {
    static_cast<SharedDevice*>(u1)->on_error("WebGPU error (type " + std::to_string(int(type)) + "): " + str(msg));
  };
  dd.uncapturedErrorCallbackInfo.userdata1 = d.get();

  struct Req { WGPUDevice dev = nullptr; std::string msg; bool done = false; };
  auto request = [&]() {
    Req req;
    dd.requiredFeatureCount = d->h.enabled.size();
    dd.requiredFeatures = d->h.enabled.data();
    WGPURequestDeviceCallbackInfo cb = WGPU_REQUEST_DEVICE_CALLBACK_INFO_INIT;
    cb.mode = WGPUCallbackMode_AllowProcessEvents;
    cb.callback = [](WGPURequestDeviceStatus status, WGPUDevice dev, WGPUStringView msg, void* u1, void*) {
      auto* r = static_cast<Req*>(u1);
      if (status == WGPURequestDeviceStatus_Success) r->dev = dev;
      r->msg = str(msg);
      r->done = true;
    };
    cb.userdata1 = &req;
    wgpuAdapterRequestDevice(d->h.adapter, &dd, cb);
    for (int i = 0; !req.done && i < 100000; ++i) wgpuInstanceProcessEvents(d->h.instance);
    return req;
  };
  Req req = request();
  const WGPUFeatureName coop = WGPUFeatureName(WGPUNativeFeature_CooperativeMatrix);
  if (!req.dev && req.done && std::find(d->h.enabled.begin(), d->h.enabled.end(), coop) != d->h.enabled.end()) {
    // wgpu-native may refuse wgpu's experimental features: the device without them.
    d->h.coop_refusal = req.msg.empty() ? "requestDevice failed" : req.msg;
    d->h.enabled.erase(std::find(d->h.enabled.begin(), d->h.enabled.end(), coop));
    req = request();
  }
  if (!req.dev) throw Error("WebGPU: requestDevice failed on '" + d->h.info.name + "': " + req.msg);
  d->h.device = req.dev;
  d->h.queue = wgpuDeviceGetQueue(d->h.device);
  return d;
}

// The process's devices by (adapter index asked for, timestamps wanted, cooperative matrices wanted). Never destroyed: the
// devices live until exit (destroying a Vulkan device during static teardown crashes some
// drivers, gfx-rs/wgpu#8365).
class DevicePool {
 public:
  static DevicePool& get() {
    static DevicePool* p = new DevicePool();
    return *p;
  }
  std::shared_ptr<SharedDevice> acquire(const ContextOptions& opts) {
    std::shared_ptr<SharedDevice> replaced;  // a lost device, released after the lock (its release may wait)
    std::lock_guard<std::mutex> lk(m_);
    auto& slot = devices_[{opts.adapter_index, opts.want_timestamps, opts.want_coop_matrix}];
    if (slot && slot->is_lost()) replaced = std::move(slot);
    if (!slot) slot = create_device(opts);  // first use, or a lost device replaced
    return slot;
  }

 private:
  std::mutex m_;
  std::map<std::tuple<int, bool, bool>, std::shared_ptr<SharedDevice>> devices_;
};

}  // namespace

std::unique_ptr<Context> Context::create(const ContextOptions& opts) {
  std::shared_ptr<SharedDevice> d = DevicePool::get().acquire(opts);
  std::unique_ptr<Context> ctx(new Context());
  ctx->shared_ = d;
  ctx->d_ = d->h;
  ctx->wait_timeout_s_ = opts.wait_timeout_s;
  ctx->shader_checks_ = opts.shader_runtime_checks;
  ctx->loop_bounding_ = opts.shader_loop_bounding;
  d->attach(ctx.get());
  return ctx;
}

Context::~Context() {
  {
    // This Context's buffers, pipelines and bind groups were released before it ends (their
    // owners hold a Context&). An empty submission flushes the queue's pending buffer writes (wgpu
    // keeps their staging memory until the next submission) and a blocking poll frees it all now.
    ContextCall call(*this);
    if (!shared_->is_lost()) {
      wgpuQueueSubmit(d_.queue, 0, nullptr);
      poll_wait();  // under the watchdog: a hung device ends the process with a message
    }
  }
  shared_->detach(this);
}

void Context::check() { throw_recorded_error(); }

namespace {

// GPU wait watchdog. wgpuDevicePoll(wait = true) has no timeout, so a hung device would hang the
// process silently. One background thread watches the armed deadline; when a wait outlives it
// the process exits with a clear message (the blocked driver call cannot be interrupted).
class Watchdog {
 public:
  static Watchdog& get() {
    static Watchdog* w = new Watchdog();  // never destroyed: the thread outlives static teardown
    return *w;
  }
  void arm(double seconds, const std::string& what) {
    std::lock_guard<std::mutex> lk(m_);
    deadline_ = std::chrono::steady_clock::now() + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                                        std::chrono::duration<double>(seconds));
    seconds_ = seconds;
    what_ = what;
    armed_ = true;
    cv_.notify_all();
  }
  void disarm() {
    std::lock_guard<std::mutex> lk(m_);
    armed_ = false;
  }

 private:
  Watchdog() { std::thread([this] { loop(); }).detach(); }
  void loop() {
    std::unique_lock<std::mutex> lk(m_);
    for (;;) {
      if (!armed_) {
        cv_.wait(lk);
        continue;
      }
      auto dl = deadline_;
      if (cv_.wait_until(lk, dl) == std::cv_status::timeout && armed_ && deadline_ == dl) {
        std::fprintf(stderr,
                     "wgllm: GPU timeout: %s did not finish within %.3g s (the device hung or was lost); "
                     "exiting. Set WGLLM_GPU_TIMEOUT_S to allow longer submissions.\n",
                     what_.c_str(), seconds_);
        std::fflush(stderr);
        std::_Exit(kGpuTimeoutExitCode);
      }
    }
  }
  std::mutex m_;
  std::condition_variable cv_;
  std::chrono::steady_clock::time_point deadline_{};
  double seconds_ = 0;
  std::string what_;
  bool armed_ = false;
};

}  // namespace

void Context::lose_device_for_testing() {
  shared_->destroy_is_loss = true;
  wgpuDeviceDestroy(d_.device);
  wgpuDevicePoll(d_.device, false, nullptr);  // a lost callback, if this wgpu-native delivers one (0.32 does not)
  shared_->mark_lost("device destroyed (simulated loss)");
}

double Context::wait_timeout_s() const {
  if (const char* e = std::getenv("WGLLM_GPU_TIMEOUT_S")) {
    char* end = nullptr;
    double v = std::strtod(e, &end);
    if (end != e && *end == '\0' && std::isfinite(v) && v > 0) return v;
  }
  if (wait_timeout_s_ > 0) return wait_timeout_s_;
  // Software adapters run a long prefill on the CPU (minutes on a busy 2-core machine).
  return d_.info.is_software() ? 1800.0 : 120.0;
}

void Context::poll_wait() {
  ContextCall call(*this);
  Watchdog::get().arm(wait_timeout_s(), "a GPU submission on '" + d_.info.name + "'");
  wgpuDevicePoll(d_.device, true, nullptr);
  Watchdog::get().disarm();
}

void Context::poll_wait_for(uint64_t index) {
  ContextCall call(*this);
  Watchdog::get().arm(wait_timeout_s(), "a GPU submission on '" + d_.info.name + "'");
  const WGPUSubmissionIndex i = index;
  wgpuDevicePoll(d_.device, true, &i);
  Watchdog::get().disarm();
}

void Context::wait_idle() {
  poll_wait();
  check();
}

bool Context::has_subgroups() const {
  return has_feature(WGPUFeatureName_Subgroups) || has_feature(WGPUFeatureName(WGPUNativeFeature_Subgroup));
}

std::pair<uint32_t, uint32_t> Context::measured_subgroup_sizes() {
  if (!has_subgroups()) return {0, 0};
  {
    std::lock_guard<std::mutex> lk(shared_->mu);
    if (shared_->subgroup_measured.first) return shared_->subgroup_measured;
  }
  ContextCall call(*this);
  // The adapter info's subgroupMinSize/MaxSize are 0 on wgpu-native 0.32 (not filled in), so ask
  // the shader compiler: every invocation of a 256-wide workgroup writes its subgroup_size.
  const uint32_t n = 256;
  KernelSpec spec{"probe_subgroup_size",
                  "struct P { n: u32, pad0: u32, pad1: u32, pad2: u32 }\n"
                  "@group(0) @binding(0) var<storage, read_write> o: array<u32>;\n"
                  "@group(0) @binding(1) var<uniform> p: P;\n"
                  "@compute @workgroup_size(256)\n"
                  "fn main(@builtin(subgroup_size) s: u32, @builtin(local_invocation_index) i: u32) {\n"
                  "  if (i < p.n) { o[i] = s; }\n"
                  "}\n",
                  {Bind::ReadWrite, Bind::Uniform}};
  Pipeline pipe(*this, spec);
  Buffer out(*this, n * 4, BufferKind::Storage, "subgroup-probe");
  Recorder rec(*this, 1);
  struct { uint32_t n, pad0, pad1, pad2; } prm{n, 0, 0, 0};
  rec.begin();
  rec.dispatch(pipe, {Binding(out)}, prm, 1);
  std::vector<uint32_t> sizes(n);
  rec.read_after(out, 0, n * 4);
  rec.submit(sizes.data());
  auto [lo, hi] = std::minmax_element(sizes.begin(), sizes.end());
  if (*lo == 0 || *hi > 1024) throw Error("subgroup-size probe returned " + std::to_string(*lo) + ".." + std::to_string(*hi));
  std::lock_guard<std::mutex> lk(shared_->mu);
  shared_->subgroup_measured = {*lo, *hi};
  return shared_->subgroup_measured;
}

bool Context::coop_matrix_f16() {
  if (!has_feature(WGPUFeatureName(WGPUNativeFeature_CooperativeMatrix)) || !has_subgroups() ||
      !has_feature(WGPUFeatureName_ShaderF16))
    return false;
  {
    std::lock_guard<std::mutex> lk(shared_->mu);
    if (shared_->coop_f16 >= 0) return shared_->coop_f16 == 1;
  }
  const auto [sg_lo, sg_hi] = measured_subgroup_sizes();
  bool ok = false;
  if (sg_lo == sg_hi && sg_lo >= 8) {
    // One 16 x 16 x 16 fragment product of small integers (exact in f16 and f32), A loaded column-major
    // (coopLoad) and B row-major (coopLoadT) from workgroup memory as kernels/matmul_coop.wgsl loads them.
    const std::string sgs = std::to_string(sg_lo);
    KernelSpec spec{"probe_coop_matrix",
                    "enable f16;\nenable wgpu_cooperative_matrix;\n"
                    "struct P { n: u32, pad0: u32, pad1: u32, pad2: u32 }\n"
                    "@group(0) @binding(0) var<storage, read_write> o: array<f32>;\n"
                    "@group(0) @binding(1) var<uniform> p: P;\n"
                    "var<workgroup> a: array<f16, 256>;\nvar<workgroup> b: array<f16, 256>;\nvar<workgroup> c: array<f32, 256>;\n"
                    "@compute @workgroup_size(" + sgs + ")\n"
                    "fn main(@builtin(local_invocation_index) i: u32) {\n"
                    "  for (var e = i; e < 256u; e += " + sgs + "u) {\n"
                    "    a[e] = f16(f32((e / 16u + e % 16u) % 5u) - 2.0);\n"
                    "    b[e] = f16(f32((e * 3u + e / 16u) % 7u) - 3.0);\n"
                    "  }\n"
                    "  workgroupBarrier();\n"
                    "  let ma = coopLoad<coop_mat16x16<f16, A>>(&a[0], 16u);\n"
                    "  let mb = coopLoadT<coop_mat16x16<f16, B>>(&b[0], 16u);\n"
                    "  var mc = coop_mat16x16<f32, C>();\n"
                    "  mc = coopMultiplyAdd(ma, mb, mc);\n"
                    "  coopStoreT(mc, &c[0], 16u);\n"
                    "  workgroupBarrier();\n"
                    "  for (var e = i; e < 256u; e += " + sgs + "u) { if (e < p.n) { o[e] = c[e]; } }\n"
                    "}\n",
                    {Bind::ReadWrite, Bind::Uniform}};
    check();  // an earlier error of this Context is not the probe's (Pipeline would throw it)
    try {
      Pipeline pipe(*this, spec);
      Buffer out(*this, 256 * 4, BufferKind::Storage, "coop-probe");
      Recorder rec(*this, 1);
      struct { uint32_t n, pad0, pad1, pad2; } prm{256, 0, 0, 0};
      rec.begin();
      rec.dispatch(pipe, {Binding(out)}, prm, 1);
      std::vector<float> got(256);
      rec.read_after(out, 0, 256 * 4);
      rec.submit(got.data());
      ok = true;
      for (int r = 0; r < 16 && ok; ++r)
        for (int n = 0; n < 16 && ok; ++n) {
          float want = 0;
          for (int k = 0; k < 16; ++k) {
            const int ea = k * 16 + r, eb = k * 16 + n;  // A column-major, B row-major
            want += float((ea / 16 + ea % 16) % 5 - 2) * float((eb * 3 + eb / 16) % 7 - 3);
          }
          ok = got[r * 16 + n] == want;
        }
    } catch (const std::exception&) {
      ok = false;  // the driver or naga rejects these fragments: the kernels keep their other forms
    }
  }
  std::lock_guard<std::mutex> lk(shared_->mu);
  shared_->coop_f16 = ok ? 1 : 0;
  return ok;
}

std::string Context::coop_matrix_status() {
  if (coop_matrix_f16()) return "";
  if (!d_.coop_refusal.empty()) return "wgpu-native refused them: " + d_.coop_refusal;
  if (!has_feature(WGPUFeatureName(WGPUNativeFeature_CooperativeMatrix))) return "the adapter does not list them";
  if (!has_subgroups() || !has_feature(WGPUFeatureName_ShaderF16)) return "granted, but the device lacks subgroups or shader-f16";
  const auto [lo, hi] = measured_subgroup_sizes();
  if (lo != hi || lo < 8) return "granted, but the subgroup size varies (" + std::to_string(lo) + ".." + std::to_string(hi) + ")";
  return "granted, but the probe's 16x16x16 fragment product failed or did not compile";
}

}  // namespace wgllm::gpu
