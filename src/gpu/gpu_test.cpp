// Runtime smoke tests on whatever Vulkan adapter the loader offers (lavapipe on CPU-only CI: scripts/vulkan_env.sh).
#include <gtest/gtest.h>

#include <cstdio>
#include <numeric>

#include <unistd.h>

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

TEST(Gpu, SubgroupSizeIsMeasured) {
  auto ctx = Context::create();
  auto [lo, hi] = ctx->measured_subgroup_sizes();
  if (!ctx->has_subgroups()) GTEST_SKIP() << "adapter without subgroups";
  EXPECT_GE(lo, 1u);
  EXPECT_LE(lo, hi);
  EXPECT_LE(hi, 256u);
  EXPECT_EQ(hi & (hi - 1), 0u) << "subgroup sizes are powers of two";
}

// Submits a kernel that runs far longer than a microsecond and waits for it.
static void wait_for_long_kernel() {
  auto ctx = Context::create();
  PipelineCache cache(*ctx);
  const auto& p = cache.get("spin", [] {
    return KernelSpec{"", R"(
@group(0) @binding(0) var<storage, read_write> o: array<f32>;
struct P { n: u32, pad: u32 }
@group(0) @binding(1) var<uniform> p: P;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3u) {
  var a = f32(g.x);
  for (var i = 0u; i < p.n; i++) { a = a * 0.999 + 1.0; }
  o[g.x] = a;
})",
                      {Bind::ReadWrite, Bind::Uniform}};
  });
  Buffer o(*ctx, 64 * 64 * 4, BufferKind::Storage, "o");
  Recorder rec(*ctx);
  struct { uint32_t n, pad; } prm{1u << 20, 0};
  rec.begin();
  rec.dispatch(p, {Binding(o)}, prm, 64);
  rec.submit();
  ctx->wait_idle();
}

// A submission that outlives the wait timeout ends the process with a clear message instead of
// hanging it (a hung device cannot be interrupted). The child re-executes this test binary.
TEST(GpuDeathTest, WaitTimeoutExitsWithClearError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("WGLLM_GPU_TIMEOUT_S", "0.000001", 1);
        wait_for_long_kernel();
        std::exit(0);
      },
      ::testing::ExitedWithCode(kGpuTimeoutExitCode), "GPU timeout: .* did not finish within");
}

// Device loss (a driver reset, a removed GPU): work after the loss is a clear wgllm::Error at the
// next synchronisation point, never a crash or a hang.
TEST(Gpu, DeviceLossIsAClearError) {
  auto ctx = Context::create();
  PipelineCache cache(*ctx);
  const auto& p = cache.get("add_one", [] {
    return KernelSpec{"", kAddOne, {Bind::ReadOnly, Bind::ReadWrite, Bind::Uniform}};
  });
  Buffer a(*ctx, 256, BufferKind::Storage, "a"), b(*ctx, 256, BufferKind::Storage, "b");
  ctx->lose_device_for_testing();
  EXPECT_TRUE(ctx->lost());
  auto work = [&] {
    Recorder rec(*ctx);
    struct { uint32_t n; float add; } prm{64, 1.0f};
    rec.begin();
    rec.dispatch(p, {Binding(a), Binding(b)}, prm, 1);
    std::vector<float> out(64);
    rec.read_after(b, 0, 256);
    rec.submit(out.data());
  };
  try {
    work();
    FAIL() << "work on a lost device did not throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("device lost"), std::string::npos) << e.what();
  }
  // Still an error the second time (the loss is sticky), and creating buffers does not crash.
  EXPECT_THROW(work(), Error);
}

// Adds 1.5 to 64 floats on ctx's device; the result read back.
static std::vector<float> add_one_on(Context& ctx) {
  PipelineCache cache(ctx);
  const auto& p = cache.get("add_one", [] {
    return KernelSpec{"", kAddOne, {Bind::ReadOnly, Bind::ReadWrite, Bind::Uniform}};
  });
  std::vector<float> x(64, 2.0f), out(64);
  Buffer a(ctx, 256, BufferKind::Storage, "a"), b(ctx, 256, BufferKind::Storage, "b");
  a.write(ctx, 0, x.data(), 256);
  Recorder rec(ctx);
  struct { uint32_t n; float add; } prm{64, 1.5f};
  rec.begin();
  rec.dispatch(p, {Binding(a), Binding(b)}, prm, 1);
  rec.read_after(b, 0, 256);
  rec.submit(out.data());
  return out;
}

// Contexts with the same options share the process's device (wgpu-native does not free a released
// Vulkan device, and a driver runs out after a few dozen); a validation error reaches only the
// Context whose call raised it, a loss every Context on the device; a lost device is replaced for
// the next Context. Checked to fail with the error sent to every Context on the device.
TEST(Gpu, ContextsShareTheProcessDevice) {
  auto a = Context::create();
  auto b = Context::create();
  EXPECT_EQ(a->device(), b->device());
  ContextOptions no_ts;
  no_ts.want_timestamps = false;
  auto c = Context::create(no_ts);
  EXPECT_NE(c->device(), a->device()) << "other features: another device";
  {  // a validation error goes to the Context whose call raised it, not to the others on the device
    PipelineCache cache(*a);
    EXPECT_THROW(cache.get("broken", [] { return KernelSpec{"", "fn main( {", {Bind::Uniform}}; }), Error);
    EXPECT_NO_THROW(b->check()) << "b saw a's error";
    EXPECT_NO_THROW(a->check()) << "the error stays after it was thrown";
  }
  a.reset();  // one user ending leaves the device to the others
  EXPECT_EQ(add_one_on(*b), std::vector<float>(64, 3.5f));
  b->lose_device_for_testing();
  EXPECT_TRUE(b->lost());
  EXPECT_FALSE(c->lost()) << "a loss reaches only the Contexts on that device";
  auto d = Context::create();
  EXPECT_FALSE(d->lost());
  EXPECT_NE(d->device(), b->device()) << "the lost device is replaced";
  EXPECT_EQ(add_one_on(*d), std::vector<float>(64, 3.5f));
  EXPECT_EQ(add_one_on(*c), std::vector<float>(64, 3.5f));
  EXPECT_THROW(add_one_on(*b), Error);
}

static long resident_kib() {  // this process's resident set (Linux /proc), KiB
  FILE* f = std::fopen("/proc/self/statm", "r");
  long pages = 0, resident = 0;
  if (!f) return -1;
  if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = -1;
  std::fclose(f);
  return resident < 0 ? -1 : resident * (sysconf(_SC_PAGESIZE) / 1024);
}

// The memory of an ended Context's buffers is freed although its device lives on: 24 Contexts in
// turn each fill a 32 MiB buffer; the process grows by far less than one of them (measured on
// software adapters, whose device memory is this process's memory; on a GPU the same code path).
TEST(Gpu, EndedContextsMemoryIsFreed) {
  auto keep = Context::create();  // the device outlives every Context below
  if (!keep->info().is_software()) GTEST_SKIP() << "device memory is not host memory here";
  const uint64_t bytes = 32ull << 20;
  std::vector<float> fill(bytes / 4, 1.0f);
  long base = 0;
  for (int i = 0; i < 24; ++i) {
    {
      auto ctx = Context::create();
      Buffer big(*ctx, bytes, BufferKind::Storage, "big");
      big.write(*ctx, 0, fill.data(), bytes);
      ctx->wait_idle();
    }
    if (i == 3) base = resident_kib();
  }
  ASSERT_GT(base, 0);
  EXPECT_LT(resident_kib() - base, long(bytes / 1024 / 2)) << "KiB grown over 20 Contexts";
}
