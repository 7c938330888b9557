// gpu::Context for the WebAssembly build: the browser's WebGPU device, created by the page or
// worker (web/worker.js) before the engine starts and handed over through the JS glue
// (src/gpu/web/glue.js). Same interface as the native context.cpp; adapter selection, backends
// and timestamp features do not apply in the browser. Validation errors and device loss arrive
// as JS events and are re-thrown as wgllm::Error at the next check().
#include <emscripten.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "gpu/context.h"

// webgpu_shim.cpp: 1 while the glue holds an error (WebGPU validation error, device loss).
extern "C" int wgllm_js_error_flag;

namespace wgllm::gpu {
namespace {

// clang-format off
EM_JS(char*, wgjs_init_device, (int* err_flag), {
  let s;
  try { s = WG.init(err_flag); } catch (e) { s = JSON.stringify({error: String(e.message || e)}); }
  const n = lengthBytesUTF8(s) + 1, p = _malloc(n);
  stringToUTF8(s, p, n);
  return p;
});
EM_JS(char*, wgjs_take_error, (), {
  if (!WG.lost && WG.errFlag) HEAP32[WG.errFlag >> 2] = 0;
  if (!WG.error) return 0;
  const s = WG.error;
  if (!WG.lost) WG.error = '';
  const n = lengthBytesUTF8(s) + 1, p = _malloc(n);
  stringToUTF8(s, p, n);
  return p;
});
EM_JS(int, wgjs_is_lost, (), { return WG.lost ? 1 : 0; });
EM_ASYNC_JS(void, wgjs_queue_idle, (), { await WG.get(2).onSubmittedWorkDone(); });
// clang-format on

std::string take(char* p) {
  if (!p) return {};
  std::string s(p);
  std::free(p);
  return s;
}

AdapterInfo describe(const nlohmann::json& j) {
  AdapterInfo r;
  r.name = j.value("name", "");
  r.vendor = j.value("vendor", "");
  r.architecture = j.value("architecture", "");
  r.driver = j.value("driver", "");
  r.backend = "browser";
  r.adapter_type = j.value("isFallbackAdapter", false) ? "CPU" : "Unknown";
  r.subgroup_min = j.value("subgroupMinSize", 0u);
  r.subgroup_max = j.value("subgroupMaxSize", 0u);
  for (const auto& f : j.at("features")) r.features.push_back(f.get<std::string>());
  const auto& L = j.at("limits");
  auto& o = r.limits;
#define WGLLM_LIMIT(name) if (L.contains(#name)) o.name = L[#name].get<decltype(o.name)>();
  WGLLM_LIMIT(maxBindGroups) WGLLM_LIMIT(maxBindingsPerBindGroup) WGLLM_LIMIT(maxStorageBuffersPerShaderStage)
  WGLLM_LIMIT(maxUniformBuffersPerShaderStage) WGLLM_LIMIT(maxUniformBufferBindingSize)
  WGLLM_LIMIT(maxStorageBufferBindingSize) WGLLM_LIMIT(minUniformBufferOffsetAlignment)
  WGLLM_LIMIT(minStorageBufferOffsetAlignment) WGLLM_LIMIT(maxBufferSize)
  WGLLM_LIMIT(maxComputeWorkgroupStorageSize) WGLLM_LIMIT(maxComputeInvocationsPerWorkgroup)
  WGLLM_LIMIT(maxComputeWorkgroupSizeX) WGLLM_LIMIT(maxComputeWorkgroupSizeY) WGLLM_LIMIT(maxComputeWorkgroupSizeZ)
  WGLLM_LIMIT(maxComputeWorkgroupsPerDimension)
#undef WGLLM_LIMIT
  return r;
}

nlohmann::json device_json() {
  auto j = nlohmann::json::parse(take(wgjs_init_device(&wgllm_js_error_flag)));
  if (j.contains("error")) throw Error("WebGPU: " + j["error"].get<std::string>());
  return j;
}

}  // namespace

std::vector<AdapterInfo> Context::list_adapters() { return {describe(device_json())}; }

std::unique_ptr<Context> Context::create(const ContextOptions& opts) {
  std::unique_ptr<Context> ctx(new Context());
  ctx->d_.info = describe(device_json());
  // The features the worker enabled on the device (web/worker.js requests shader-f16 and
  // subgroups when the adapter offers them), under the same names the kernels test natively.
  for (const std::string& f : ctx->d_.info.features) {
    if (f == "shader-f16") ctx->d_.enabled.push_back(WGPUFeatureName_ShaderF16);
    if (f == "subgroups") ctx->d_.enabled.push_back(WGPUFeatureName_Subgroups);
  }
  ctx->d_.device = reinterpret_cast<WGPUDevice>(uintptr_t(1));  // glue table handles
  ctx->d_.queue = reinterpret_cast<WGPUQueue>(uintptr_t(2));
  return ctx;
}

Context::~Context() = default;  // the device belongs to the page; it outlives the engine

void Context::check() {
  // No crossing into JS unless the glue has flagged an error (Recorder checks after every submit).
  if (!wgllm_js_error_flag && error_.empty()) return;
  if (std::string e = take(wgjs_take_error()); !e.empty()) {
    if (wgjs_is_lost()) lost_ = true;
    on_error(e);
  }
  throw_recorded_error();
}

void Context::wait_idle() {
  wgjs_queue_idle();
  check();
}

// The browser has no blocking waits to watch (mapAsync promises are awaited through asyncify;
// a lost device rejects them): poll_wait() is the plain shim poll and there is no timeout.
void Context::poll_wait() { wgpuDevicePoll(d_.device, true, nullptr); }
void Context::poll_wait_for(uint64_t) { wgpuDevicePoll(d_.device, true, nullptr); }
double Context::wait_timeout_s() const { return 0; }
// Subgroups when the device has the standard feature (the shim adds WGSL's `enable subgroups;`,
// which browsers require and wgpu-native rejects). The sizes are the adapter's own
// (GPUAdapterInfo.subgroupMinSize/MaxSize); {0, 0} when the browser does not report them, and
// then the matvec kernels keep their workgroup-memory reductions (kernels/ops.cpp).
bool Context::has_subgroups() const { return has_feature(WGPUFeatureName_Subgroups); }
bool Context::coop_matrix_f16() { return false; }  // browsers have no cooperative matrices (wgpu-native only)
std::string Context::coop_matrix_status() { return "browsers have no cooperative matrices"; }
std::pair<uint32_t, uint32_t> Context::measured_subgroup_sizes() {
  if (!has_subgroups() || !d_.info.subgroup_min || !d_.info.subgroup_max) return {0, 0};
  return {d_.info.subgroup_min, d_.info.subgroup_max};
}

}  // namespace wgllm::gpu
