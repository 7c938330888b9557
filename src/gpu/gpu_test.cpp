// Runtime smoke tests on whatever Vulkan adapter the loader offers (SwiftShader on CPU-only CI).
#include <gtest/gtest.h>

#include <numeric>

#include "core/error.h"
#include "gpu/context.h"
#include "gpu/recorder.h"

using namespace wgllm;
using namespace wgllm::gpu;

static const char* kAddOne = R"(
@group(0) @binding(0) var<storage, read> src: array<f32>;
@group(0) @binding(1) var<storage, read_write> dst: array<f32>;
struct P { n: u32, add: f32 }
@group(0) @binding(2) var<uniform> p: P;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3u) {
  if (g.x < p.n) { dst[g.x] = src[g.x] + p.add; }
})";

TEST(Gpu, ListsVulkanAdapter) {
  auto list = Context::list_adapters();
  ASSERT_FALSE(list.empty());
  for (auto& a : list) EXPECT_EQ(a.backend, "Vulkan");
}

TEST(Gpu, DispatchChainAndReadback) {
  auto ctx = Context::create();
  PipelineCache cache(*ctx);
  const auto& p = cache.get("add_one", [] {
    return KernelSpec{"", kAddOne, {Bind::ReadOnly, Bind::ReadWrite, Bind::Uniform}};
  });
  const uint32_t n = 1000;
  std::vector<float> x(n);
  std::iota(x.begin(), x.end(), 0.0f);
  Buffer a(*ctx, n * 4, BufferKind::Storage, "a"), b(*ctx, n * 4, BufferKind::Storage, "b");
  a.write(*ctx, 0, x.data(), n * 4);
  Recorder rec(*ctx);
  struct { uint32_t n; float add; } prm{n, 1.5f};
  for (int step = 0; step < 3; ++step) {  // the same recording replayed uses cached bind groups
    rec.begin();
    rec.dispatch(p, {a, b}, prm, (n + 63) / 64);
    prm.add = 2.0f;
    rec.dispatch(p, {b, a}, prm, (n + 63) / 64);
    std::vector<float> out(n);
    rec.read_after(a, 0, n * 4);
    rec.submit(out.data());
    for (uint32_t i = 0; i < n; i += 97) EXPECT_EQ(out[i], x[i] + 3.5f * (step + 1)) << i;
    prm.add = 1.5f;
  }
  EXPECT_EQ(rec.last_dispatch_count(), 2u);
}

TEST(Gpu, BadShaderIsAClearError) {
  auto ctx = Context::create();
  PipelineCache cache(*ctx);
  try {
    cache.get("broken", [] { return KernelSpec{"", "fn main( {", {Bind::Uniform}}; });
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("broken"), std::string::npos) << e.what();
  }
}
