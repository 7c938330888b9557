// Probe: can WGSL reach the GPU's matrix units (tensor cores) through wgpu-native here?
//
// wgpu 29 has an experimental `wgpu_cooperative_matrix` WGSL extension (coop_mat16x16<f16, A|B|C>,
// coopLoad / coopLoadT / coopMultiplyAdd / coopStore) behind the native feature
// WGPUNativeFeature_CooperativeMatrix (0x0003003B). This program, on the first non-CPU Vulkan adapter:
//   1. reports whether the adapter lists the feature;
//   2. asks for a device with it (+ shader-f16, timestamps) and prints requestDevice's answer;
//   3. if granted: multiplies one 16x16x16 tile with each load form (coopLoad / coopLoadT) and prints
//      which memory order each form reads (compared with a CPU product);
//   4. times a 4096^3 f16 x f16 -> f32 GEMM built on 16x16x16 fragments (64x64 workgroup tile, 4
//      subgroups of 2x2 fragments, K steps of 32 through workgroup memory), checked against the CPU on
//      sampled outputs, and prints TFLOP/s (fp32 FMA peak of an H100/H200: 67 TFLOP/s).
// Built with the engine (build/tools/probes/coop_matrix_probe); by hand:
//   c++ -std=c++20 -O2 tools/probes/coop_matrix_probe.cpp -I$CACHE/wgpu-native \
//          -L$CACHE/wgpu-native -l:libwgpu_native-release.so -o coop_matrix_probe
// Exit status 0 whatever the answer (the answer is the output); 1 on a probe error.
#include <webgpu.h>
#include <wgpu.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

WGPUStringView sv(const char* s) { return WGPUStringView{s, strlen(s)}; }
std::string str(WGPUStringView v) { return v.data ? std::string(v.data, v.length == WGPU_STRLEN ? strlen(v.data) : v.length) : ""; }

WGPUInstance g_inst;
std::string g_err;

uint16_t to_half(float f) {  // round to nearest even, no NaN / denormal care (probe inputs are small)
  uint32_t x;
  memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000, e = (x >> 23) & 0xff, m = x & 0x7fffff;
  if (e == 0) return uint16_t(sign);
  int he = int(e) - 127 + 15;
  if (he <= 0) return uint16_t(sign);
  uint32_t hm = m >> 13, rest = m & 0x1fff;
  if (rest > 0x1000 || (rest == 0x1000 && (hm & 1))) { if (++hm == 0x400) { hm = 0; ++he; } }
  return uint16_t(sign | (uint32_t(he) << 10) | hm);
}
float from_half(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  uint32_t x = e == 0 ? sign : (sign | ((e - 15 + 127) << 23) | (m << 13));
  float f;
  memcpy(&f, &x, 4);
  return f;
}

WGPUBuffer buffer(WGPUDevice d, size_t bytes, WGPUBufferUsage usage) {
  WGPUBufferDescriptor bd = WGPU_BUFFER_DESCRIPTOR_INIT;
  bd.size = (bytes + 3) & ~size_t(3);
  bd.usage = usage;
  return wgpuDeviceCreateBuffer(d, &bd);
}

std::vector<float> read_back(WGPUDevice d, WGPUQueue q, WGPUBuffer src, size_t floats) {
  WGPUBuffer rb = buffer(d, floats * 4, WGPUBufferUsage_MapRead | WGPUBufferUsage_CopyDst);
  WGPUCommandEncoder enc = wgpuDeviceCreateCommandEncoder(d, nullptr);
  wgpuCommandEncoderCopyBufferToBuffer(enc, src, 0, rb, 0, floats * 4);
  WGPUCommandBuffer cb = wgpuCommandEncoderFinish(enc, nullptr);
  wgpuQueueSubmit(q, 1, &cb);
  bool done = false;
  WGPUBufferMapCallbackInfo mi = WGPU_BUFFER_MAP_CALLBACK_INFO_INIT;
  mi.mode = WGPUCallbackMode_AllowProcessEvents;
  mi.callback = [](WGPUMapAsyncStatus, WGPUStringView, void* u, void*) { *static_cast<bool*>(u) = true; };
  mi.userdata1 = &done;
  wgpuBufferMapAsync(rb, WGPUMapMode_Read, 0, floats * 4, mi);
  while (!done) { wgpuDevicePoll(d, true, nullptr); wgpuInstanceProcessEvents(g_inst); }
  std::vector<float> out(floats);
  memcpy(out.data(), wgpuBufferGetConstMappedRange(rb, 0, floats * 4), floats * 4);
  wgpuBufferUnmap(rb);
  wgpuBufferRelease(rb);
  return out;
}

WGPUComputePipeline pipeline(WGPUDevice d, const std::string& wgsl) {
  WGPUShaderSourceWGSL src = WGPU_SHADER_SOURCE_WGSL_INIT;
  src.code = WGPUStringView{wgsl.data(), wgsl.size()};
  WGPUShaderModuleDescriptor md = WGPU_SHADER_MODULE_DESCRIPTOR_INIT;
  md.nextInChain = &src.chain;
  g_err.clear();
  WGPUShaderModule m = wgpuDeviceCreateShaderModule(d, &md);
  WGPUComputePipelineDescriptor pd = WGPU_COMPUTE_PIPELINE_DESCRIPTOR_INIT;
  pd.compute.module = m;
  pd.compute.entryPoint = sv("main");
  WGPUComputePipeline p = wgpuDeviceCreateComputePipeline(d, &pd);
  wgpuDevicePoll(d, true, nullptr);
  if (!g_err.empty()) { printf("  pipeline error: %s\n", g_err.c_str()); return nullptr; }
  return p;
}

void run(WGPUDevice d, WGPUQueue q, WGPUComputePipeline p, std::vector<WGPUBuffer> bufs, uint32_t gx, uint32_t gy,
         int reps) {
  WGPUBindGroupLayout bgl = wgpuComputePipelineGetBindGroupLayout(p, 0);
  std::vector<WGPUBindGroupEntry> es(bufs.size());
  for (size_t i = 0; i < bufs.size(); ++i) {
    es[i] = WGPU_BIND_GROUP_ENTRY_INIT;
    es[i].binding = uint32_t(i);
    es[i].buffer = bufs[i];
    es[i].size = wgpuBufferGetSize(bufs[i]);
  }
  WGPUBindGroupDescriptor bd = WGPU_BIND_GROUP_DESCRIPTOR_INIT;
  bd.layout = bgl;
  bd.entryCount = es.size();
  bd.entries = es.data();
  WGPUBindGroup bg = wgpuDeviceCreateBindGroup(d, &bd);
  WGPUCommandEncoder enc = wgpuDeviceCreateCommandEncoder(d, nullptr);
  WGPUComputePassEncoder pass = wgpuCommandEncoderBeginComputePass(enc, nullptr);
  wgpuComputePassEncoderSetPipeline(pass, p);
  wgpuComputePassEncoderSetBindGroup(pass, 0, bg, 0, nullptr);
  for (int r = 0; r < reps; ++r) wgpuComputePassEncoderDispatchWorkgroups(pass, gx, gy, 1);
  wgpuComputePassEncoderEnd(pass);
  WGPUCommandBuffer cb = wgpuCommandEncoderFinish(enc, nullptr);
  wgpuQueueSubmit(q, 1, &cb);
  wgpuDevicePoll(d, true, nullptr);
}

const char* kTile = R"(
enable f16;
enable wgpu_cooperative_matrix;
@group(0) @binding(0) var<storage, read_write> a: array<f16>;
@group(0) @binding(1) var<storage, read_write> b: array<f16>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
@compute @workgroup_size(32)
fn main() {
  let ma = LOAD<coop_mat16x16<f16, A>>(&a[0], 16u);
  let mb = LOAD<coop_mat16x16<f16, B>>(&b[0], 16u);
  var mc = coop_mat16x16<f32, C>();
  mc = coopMultiplyAdd(ma, mb, mc);
  STORE(mc, &c[0], 16u);
}
)";

// C[M,N] = A[M,K] B[K,N], all row-major in memory; A, B f16, C f32. Workgroup: 128 threads = 4
// subgroups of 32; tile 64 x 64 of C; subgroup s computes rows 32*(s/2).., cols 32*(s%2).. as 2x2
// fragments. K steps of 32 through workgroup memory (A tile 64x32, B tile 32x64, row-major).
const char* kGemm = R"(
enable f16;
enable wgpu_cooperative_matrix;
@group(0) @binding(0) var<storage, read> a: array<f16>;
@group(0) @binding(1) var<storage, read> b: array<f16>;
@group(0) @binding(2) var<storage, read_write> c: array<f32>;
const M = 4096u; const N = 4096u; const K = 4096u;
var<workgroup> ta: array<f16, 2048>;   // 64 rows x 32 k
var<workgroup> tb: array<f16, 2048>;   // 32 k x 64 cols
@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wg: vec3u, @builtin(local_invocation_index) li: u32,
        @builtin(subgroup_id) sg: u32) {
  let r0 = wg.y * 64u; let c0 = wg.x * 64u;
  let sr = (sg / 2u) * 32u; let sc = (sg % 2u) * 32u;
  var c00 = coop_mat16x16<f32, C>(); var c01 = coop_mat16x16<f32, C>();
  var c10 = coop_mat16x16<f32, C>(); var c11 = coop_mat16x16<f32, C>();
  for (var k0 = 0u; k0 < K; k0 += 32u) {
    for (var i = li; i < 2048u; i += 128u) {
      ta[i] = a[(r0 + i / 32u) * K + k0 + i % 32u];
      tb[i] = b[(k0 + i / 64u) * N + c0 + i % 64u];
    }
    workgroupBarrier();
    for (var kk = 0u; kk < 32u; kk += 16u) {
      let a0 = LOADA<coop_mat16x16<f16, A>>(&ta[sr * 32u + kk], 32u);
      let a1 = LOADA<coop_mat16x16<f16, A>>(&ta[(sr + 16u) * 32u + kk], 32u);
      let b0 = LOADB<coop_mat16x16<f16, B>>(&tb[kk * 64u + sc], 64u);
      let b1 = LOADB<coop_mat16x16<f16, B>>(&tb[kk * 64u + sc + 16u], 64u);
      c00 = coopMultiplyAdd(a0, b0, c00); c01 = coopMultiplyAdd(a0, b1, c01);
      c10 = coopMultiplyAdd(a1, b0, c10); c11 = coopMultiplyAdd(a1, b1, c11);
    }
    workgroupBarrier();
  }
  let o = (r0 + sr) * N + c0 + sc;
  STORE(c00, &c[o], N); STORE(c01, &c[o + 16u], N);
  STORE(c10, &c[o + 16u * N], N); STORE(c11, &c[o + 16u * N + 16u], N);
}
)";

std::string subst(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size())) s.replace(p, from.size(), to);
  return s;
}

}  // namespace

int main() {
  WGPUInstanceExtras ix = {};
  ix.chain.sType = (WGPUSType)WGPUSType_InstanceExtras;
  ix.backends = WGPUInstanceBackend_Vulkan;
  WGPUInstanceDescriptor idesc = WGPU_INSTANCE_DESCRIPTOR_INIT;
  idesc.nextInChain = &ix.chain;
  g_inst = wgpuCreateInstance(&idesc);
  WGPUInstanceEnumerateAdapterOptions eo = {};
  eo.backends = WGPUInstanceBackend_Vulkan;
  size_t n = wgpuInstanceEnumerateAdapters(g_inst, &eo, nullptr);
  std::vector<WGPUAdapter> ads(n);
  if (n) wgpuInstanceEnumerateAdapters(g_inst, &eo, ads.data());
  WGPUAdapter ad = nullptr;
  for (WGPUAdapter a : ads) {
    WGPUAdapterInfo info = WGPU_ADAPTER_INFO_INIT;
    wgpuAdapterGetInfo(a, &info);
    printf("adapter: %s (type %d)\n", str(info.device).c_str(), int(info.adapterType));
    if (!ad && info.adapterType != WGPUAdapterType_CPU) ad = a;
  }
  if (!ad && n) ad = ads[0];
  if (!ad) { printf("no adapter\n"); return 1; }
  WGPUAdapterInfo info = WGPU_ADAPTER_INFO_INIT;
  wgpuAdapterGetInfo(ad, &info);
  printf("probing: %s, wgpu-native version 0x%08x\n", str(info.device).c_str(), wgpuGetVersion());
  const uint32_t kCoop = 0x0003003B;
  bool listed = wgpuAdapterHasFeature(ad, WGPUFeatureName(kCoop));
  printf("adapter lists CooperativeMatrix (0x0003003B): %s\n", listed ? "yes" : "no");

  std::vector<WGPUFeatureName> feats = {WGPUFeatureName_ShaderF16, WGPUFeatureName(kCoop)};
  if (wgpuAdapterHasFeature(ad, WGPUFeatureName(WGPUNativeFeature_Subgroup))) feats.push_back(WGPUFeatureName(WGPUNativeFeature_Subgroup));
  WGPULimits lim = WGPU_LIMITS_INIT;
  wgpuAdapterGetLimits(ad, &lim);
  WGPUDeviceDescriptor dd = WGPU_DEVICE_DESCRIPTOR_INIT;
  dd.requiredFeatureCount = feats.size();
  dd.requiredFeatures = feats.data();
  dd.requiredLimits = &lim;
  dd.uncapturedErrorCallbackInfo.callback = [](WGPUDevice const*, WGPUErrorType t, WGPUStringView m, void*, void*) {
    g_err = "type " + std::to_string(int(t)) + ": " + str(m);
  };
  struct Req { WGPUDevice dev = nullptr; std::string msg; bool done = false; } req;
  WGPURequestDeviceCallbackInfo cb = WGPU_REQUEST_DEVICE_CALLBACK_INFO_INIT;
  cb.mode = WGPUCallbackMode_AllowProcessEvents;
  cb.callback = [](WGPURequestDeviceStatus s, WGPUDevice dev, WGPUStringView m, void* u, void*) {
    auto* r = static_cast<Req*>(u);
    if (s == WGPURequestDeviceStatus_Success) r->dev = dev;
    r->msg = str(m);
    r->done = true;
  };
  cb.userdata1 = &req;
  wgpuAdapterRequestDevice(ad, &dd, cb);
  for (int i = 0; !req.done && i < 100000; ++i) wgpuInstanceProcessEvents(g_inst);
  printf("requestDevice with CooperativeMatrix: %s%s%s\n", req.dev ? "granted" : "refused",
         req.msg.empty() ? "" : ": ", req.msg.c_str());
  if (!req.dev) return 0;
  WGPUDevice d = req.dev;
  WGPUQueue q = wgpuDeviceGetQueue(d);

  // 3. one tile, each load form
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> U(-1.f, 1.f);
  std::vector<uint16_t> ha(256), hb(256);
  std::vector<float> fa(256), fb(256);
  for (int i = 0; i < 256; ++i) { ha[i] = to_half(U(rng)); fa[i] = from_half(ha[i]); hb[i] = to_half(U(rng)); fb[i] = from_half(hb[i]); }
  auto at = [](const std::vector<float>& m, int r, int c, bool rowmaj) { return rowmaj ? m[r * 16 + c] : m[c * 16 + r]; };
  WGPUBufferUsage su = WGPUBufferUsage_Storage | WGPUBufferUsage_CopySrc | WGPUBufferUsage_CopyDst;
  WGPUBuffer ba = buffer(d, 512, su), bb = buffer(d, 512, su), bc = buffer(d, 1024, su);
  wgpuQueueWriteBuffer(q, ba, 0, ha.data(), 512);
  wgpuQueueWriteBuffer(q, bb, 0, hb.data(), 512);
  for (const char* form : {"coopLoad", "coopLoadT"}) {
    std::string src = subst(subst(kTile, "LOAD", form), "STORE", std::string(form) == "coopLoad" ? "coopStore" : "coopStoreT");
    WGPUComputePipeline p = pipeline(d, src);
    if (!p) continue;
    run(d, q, p, {ba, bb, bc}, 1, 1, 1);
    std::vector<float> got = read_back(d, q, bc, 256);
    for (bool rm : {true, false}) {
      double worst = 0;
      for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c) {
          double s = 0;
          for (int k = 0; k < 16; ++k) s += double(at(fa, r, k, rm)) * at(fb, k, c, rm);
          worst = std::max(worst, std::fabs(s - at(got, r, c, rm)));
        }
      printf("  %s / its store, memory read as %s: max |gpu - cpu| = %.3g\n", form, rm ? "row-major" : "column-major", worst);
    }
  }

  // 4. GEMM 4096^3
  const uint32_t S = 4096;
  std::vector<uint16_t> A(size_t(S) * S), Bm(size_t(S) * S);
  for (auto& x : A) x = to_half(U(rng));
  for (auto& x : Bm) x = to_half(U(rng));
  WGPUBuffer gA = buffer(d, A.size() * 2, su), gB = buffer(d, Bm.size() * 2, su), gC = buffer(d, size_t(S) * S * 4, su);
  wgpuQueueWriteBuffer(q, gA, 0, A.data(), A.size() * 2);
  wgpuQueueWriteBuffer(q, gB, 0, Bm.data(), Bm.size() * 2);
  for (const char* form : {"coopLoadT", "coopLoad"}) {
    std::string src = kGemm;
    src = subst(src, "LOADA", form);
    src = subst(src, "LOADB", form);
    src = subst(src, "STORE", std::string(form) == "coopLoad" ? "coopStore" : "coopStoreT");
    WGPUComputePipeline p = pipeline(d, src);
    if (!p) continue;
    run(d, q, p, {gA, gB, gC}, S / 64, S / 64, 1);
    std::vector<float> got = read_back(d, q, gC, size_t(S) * S);
    double worst = 0;
    for (int t = 0; t < 64; ++t) {
      uint32_t r = (t * 2654435761u) % S, c = (t * 40503u + 7) % S;
      double s = 0;
      for (uint32_t k = 0; k < S; ++k) s += double(from_half(A[size_t(r) * S + k])) * from_half(Bm[size_t(k) * S + c]);
      worst = std::max(worst, std::fabs(s - got[size_t(r) * S + c]));
    }
    const int reps = 20;
    auto t0 = std::chrono::steady_clock::now();
    run(d, q, p, {gA, gB, gC}, S / 64, S / 64, reps);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double tflops = 2.0 * S * S * double(S) * reps / secs / 1e12;
    printf("GEMM 4096^3 f16 x f16 -> f32 with %s: max |gpu - cpu| over 64 samples %.3g (sums of 4096), "
           "%.2f ms each, %.1f TFLOP/s (wall clock over %d)\n", form, worst, secs * 1e3 / reps, tflops, reps);
  }
  return 0;
}
