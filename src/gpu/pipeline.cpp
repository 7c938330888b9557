#include "gpu/pipeline.h"

#include "core/error.h"
#include "gpu/context.h"

namespace wgllm::gpu {

Pipeline::Pipeline(Context& ctx, const KernelSpec& spec) : key_(spec.key), kinds_(spec.bindings) {
  ContextCall call(ctx);
  std::vector<WGPUBindGroupLayoutEntry> entries;
  for (size_t i = 0; i < spec.bindings.size(); ++i) {
    WGPUBindGroupLayoutEntry e = WGPU_BIND_GROUP_LAYOUT_ENTRY_INIT;
    e.binding = uint32_t(i);
    e.visibility = WGPUShaderStage_Compute;
    switch (spec.bindings[i]) {
      case Bind::ReadOnly: e.buffer.type = WGPUBufferBindingType_ReadOnlyStorage; break;
      case Bind::ReadWrite: e.buffer.type = WGPUBufferBindingType_Storage; break;
      case Bind::Uniform: e.buffer.type = WGPUBufferBindingType_Uniform; break;
    }
    entries.push_back(e);
  }
  WGPUBindGroupLayoutDescriptor bd = WGPU_BIND_GROUP_LAYOUT_DESCRIPTOR_INIT;
  bd.label = sv(key_);
  bd.entryCount = entries.size();
  bd.entries = entries.data();
  bgl_ = wgpuDeviceCreateBindGroupLayout(ctx.device(), &bd);
  WGPUPipelineLayoutDescriptor pd = WGPU_PIPELINE_LAYOUT_DESCRIPTOR_INIT;
  pd.bindGroupLayoutCount = 1;
  pd.bindGroupLayouts = &bgl_;
  pl_ = wgpuDeviceCreatePipelineLayout(ctx.device(), &pd);

  WGPUShaderSourceWGSL src = WGPU_SHADER_SOURCE_WGSL_INIT;
  src.code = sv(spec.wgsl);
  WGPUShaderModuleDescriptor md = WGPU_SHADER_MODULE_DESCRIPTOR_INIT;
  md.nextInChain = &src.chain;
  md.label = sv(key_);
#ifdef __EMSCRIPTEN__
  WGPUShaderModule mod = wgpuDeviceCreateShaderModule(ctx.device(), &md);
#else
  // ContextOptions::shader_runtime_checks / shader_loop_bounding: naga's bounds checks and loop
  // bounding, each on request (both: the checked module every WebGPU implementation gives).
  WGPUShaderRuntimeChecks checks = WGPUShaderRuntimeChecks_None;
  if (ctx.shader_runtime_checks()) checks |= WGPUShaderRuntimeChecks_BoundsChecks;
  if (ctx.shader_loop_bounding()) checks |= WGPUShaderRuntimeChecks_ForceLoopBounding;
  WGPUShaderModule mod =
      checks == (WGPUShaderRuntimeChecks_BoundsChecks | WGPUShaderRuntimeChecks_ForceLoopBounding)
          ? wgpuDeviceCreateShaderModule(ctx.device(), &md)
          : wgpuDeviceCreateShaderModuleTrusted(ctx.device(), &md, checks);
#endif
  try {
    ctx.check();
  } catch (const Error& e) {
    if (mod) wgpuShaderModuleRelease(mod);
    throw Error("compiling kernel '" + key_ + "': " + e.what());
  }
  WGPUComputePipelineDescriptor cd = WGPU_COMPUTE_PIPELINE_DESCRIPTOR_INIT;
  cd.label = sv(key_);
  cd.layout = pl_;
  cd.compute.module = mod;
  cd.compute.entryPoint = sv(spec.entry);
  pipe_ = wgpuDeviceCreateComputePipeline(ctx.device(), &cd);
  wgpuShaderModuleRelease(mod);
  try {
    ctx.check();
  } catch (const Error& e) {
    throw Error("creating pipeline '" + key_ + "': " + e.what());
  }
  if (!pipe_) throw Error("creating pipeline '" + key_ + "' failed");
}

Pipeline::~Pipeline() {
  if (pipe_) wgpuComputePipelineRelease(pipe_);
  if (pl_) wgpuPipelineLayoutRelease(pl_);
  if (bgl_) wgpuBindGroupLayoutRelease(bgl_);
}

}  // namespace wgllm::gpu
