#include "kernels/bandwidth_probe.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "core/error.h"
#include "gpu/buffer.h"
#include "gpu/context.h"
#include "gpu/pipeline.h"
#include "gpu/recorder.h"
#include "kernels/params_layout.h"
#include "kernels/wgsl.h"

namespace wgllm::kernels {
namespace {

using gpu::Bind;
using clk = std::chrono::steady_clock;

// copy_vec4's and read_vec4's uniform (matches their WGSL `struct P`: kernels/params_layout.h).
struct ProbeParams { uint32_t n, stride; };
WGLLM_PARAMS(ProbeParams, n, stride);

struct Probe {
  const char* label;
  uint64_t bytes_moved;  // per run
  std::vector<double> us;
};

BandwidthFigure figure(const Probe& p) {
  std::vector<double> gbps;
  for (double us : p.us) gbps.push_back(double(p.bytes_moved) / (us * 1e3));
  std::sort(gbps.begin(), gbps.end());
  BandwidthFigure f;
  if (gbps.empty()) return f;
  f.best_GBps = gbps.back();
  f.median_GBps = gbps[gbps.size() / 2];
  if (!std::isfinite(f.best_GBps) || !std::isfinite(f.median_GBps) || f.median_GBps <= 0)
    throw Error(std::string("bandwidth probe '") + p.label + "': non-finite or zero figure (timestamps broken?)");
  return f;
}

}  // namespace

double BandwidthReport::copy_GBps() const { return std::max(copy_engine.best_GBps, copy_kernel.best_GBps); }

BandwidthReport measure_bandwidth(gpu::Context& ctx, const BandwidthOptions& opt) {
  if (opt.repeats == 0) throw Error("bandwidth probe: repeats must be >= 1");
  const auto& lim = ctx.info().limits;
  const uint32_t kWg = 256;
  uint64_t bytes = std::min<uint64_t>({opt.bytes, lim.maxStorageBufferBindingSize, lim.maxBufferSize, 1ull << 34});
  bytes &= ~uint64_t(kWg * 16 - 1);  // whole workgroups of vec4f
  if (bytes == 0) throw Error("bandwidth probe: buffer size must be at least 4096 bytes");
  const uint32_t n = uint32_t(bytes / 16);  // vec4f elements
  const uint32_t gx = std::min<uint32_t>({(n + 4 * kWg - 1) / (4 * kWg), lim.maxComputeWorkgroupsPerDimension, 65535});
  const uint32_t stride = gx * kWg;  // threads

  gpu::Buffer src(ctx, bytes, gpu::BufferKind::Storage, "bw-src");
  gpu::Buffer dst(ctx, bytes, gpu::BufferKind::Storage, "bw-dst");      // copy engine
  gpu::Buffer dst_k(ctx, bytes, gpu::BufferKind::Storage, "bw-dst-k");  // copy kernel (checked apart)
  gpu::Buffer sums(ctx, uint64_t(stride) * 4, gpu::BufferKind::Storage, "bw-sums");
  // Source: element i = small integers (exact in f32 sums), written in 16 MiB pieces.
  {
    std::vector<float> piece(std::min<uint64_t>(bytes, 16ull << 20) / 4);
    for (uint64_t off = 0; off < bytes; off += piece.size() * 4) {
      const uint64_t m = std::min<uint64_t>(piece.size(), (bytes - off) / 4);
      for (uint64_t j = 0; j < m; ++j) piece[j] = float((off / 4 + j) % 7);
      src.write(ctx, off, piece.data(), m * 4);
    }
  }
  gpu::PipelineCache pipes(ctx);
  auto pipe = [&](const char* name) -> const gpu::Pipeline& {
    return pipes.get(name, [&] {
      return gpu::KernelSpec{"", specialize(name, {}), {Bind::ReadOnly, Bind::ReadWrite, Bind::Uniform}};
    });
  };
  const gpu::Pipeline& copy_k = pipe("copy_vec4");
  const gpu::Pipeline& read_k = pipe("read_vec4");
  ProbeParams prm{n, stride};

  gpu::Recorder rec(ctx, 4 * opt.repeats + 8);
  rec.set_profiling(true);
  Probe pe{"copy_engine", 2 * bytes, {}}, pc{"copy_kernel", 2 * bytes, {}}, pr{"read_kernel", bytes + 4ull * stride, {}};
  auto record = [&](Probe& p, bool timed) {
    if (&p == &pe) return rec.copy_timed(src, 0, dst, 0, bytes, p.label) && timed;
    rec.dispatch(&p == &pc ? copy_k : read_k, {src, &p == &pc ? dst_k : sums}, prm, gx, 1, 1, p.label);
    return rec.profiling() && timed;
  };
  // Warm-up (pipeline first use, page-in), then one submission per probe.
  rec.begin();
  for (Probe* p : {&pe, &pc, &pr}) record(*p, false);
  rec.submit();
  ctx.wait_idle();
  BandwidthReport r;
  r.bytes = bytes;
  r.repeats = opt.repeats;
  for (Probe* p : {&pe, &pc, &pr}) {
    rec.begin();
    bool ts = true;
    for (uint32_t i = 0; i < opt.repeats; ++i) ts = record(*p, true) && ts;
    const auto t0 = clk::now();
    rec.submit();
    ctx.wait_idle();
    const double wall_us = std::chrono::duration<double, std::micro>(clk::now() - t0).count();
    if (ts) {
      for (const auto& k : rec.last_profile()) p->us.push_back(k.us);
      if (p->us.size() != opt.repeats) throw Error(std::string("bandwidth probe '") + p->label + "': missing timestamps");
    } else {
      p->us.push_back(wall_us / opt.repeats);
    }
    (p == &pe ? r.copy_timestamps : r.kernel_timestamps) = ts;
  }
  rec.set_profiling(false);
  // The work happened: three slices of each copy equal src; the per-thread sums match the CPU's.
  for (uint64_t at : {uint64_t(0), (bytes / 2) & ~uint64_t(15), bytes - 4096}) {
    std::vector<float> a(1024), b(1024), c(1024);
    src.read(ctx, at, a.data(), 4096);
    dst.read(ctx, at, b.data(), 4096);
    dst_k.read(ctx, at, c.data(), 4096);
    if (a != b) throw Error("bandwidth probe: the buffer copy did not reach dst (offset " + std::to_string(at) + ")");
    if (a != c) throw Error("bandwidth probe: copy_vec4 did not reach dst (offset " + std::to_string(at) + ")");
  }
  std::vector<float> got(std::min<uint32_t>(stride, 256));
  sums.read(ctx, 0, got.data(), got.size() * 4);
  for (uint32_t t = 0; t < got.size(); ++t) {
    double want = 0;
    for (uint64_t i = t; i < n; i += stride)
      for (uint64_t l = 0; l < 4; ++l) want += double((4 * i + l) % 7);
    if (double(got[t]) != want)  // sums of small integers: exact in f32
      throw Error("bandwidth probe: read_vec4 sum mismatch at thread " + std::to_string(t));
  }
  r.copy_engine = figure(pe);
  r.copy_kernel = figure(pc);
  r.read_kernel = figure(pr);
  return r;
}

std::vector<ParamsLayout> bandwidth_probe_params_layouts() {
  return {WGLLM_LAYOUT(ProbeParams, "copy_vec4"), WGLLM_LAYOUT(ProbeParams, "read_vec4")};
}

}  // namespace wgllm::kernels
