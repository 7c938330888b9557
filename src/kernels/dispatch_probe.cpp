#include "kernels/dispatch_probe.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/error.h"
#include "gpu/buffer.h"
#include "gpu/context.h"
#include "gpu/pipeline.h"
#include "gpu/recorder.h"
#include "kernels/params_layout.h"
#include "kernels/wgsl.h"

namespace wgllm::kernels {
namespace {
// dispatch_probe's uniform (matches its WGSL `struct P`: kernels/params_layout.h).
struct DispatchProbeParams { uint32_t n, pad0, pad1, pad2; };
WGLLM_PARAMS(DispatchProbeParams, n, pad0, pad1, pad2);

using clk = std::chrono::steady_clock;
constexpr uint32_t kThreads = 64;   // dispatch_probe.wgsl's workgroup size
constexpr uint32_t kBuffers = 16;   // buffers the "independent" pattern rotates over

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double us_since(clk::time_point t0) { return std::chrono::duration<double, std::micro>(clk::now() - t0).count(); }

// x after k updates x = x * 0.5 + 1 from 0, in f32 (what every thread of the kernel computes).
float expected(uint64_t k) {
  float x = 0;
  for (uint64_t i = 0; i < std::min<uint64_t>(k, 200); ++i) x = x * 0.5f + 1.0f;  // fixed point 2 after ~25
  return x;
}

}  // namespace

DispatchReport measure_dispatch_cost(gpu::Context& ctx, const DispatchProbeOptions& opt) {
  if (opt.count < 2) throw Error("dispatch probe: count must be >= 2");
  if (opt.repeats == 0) throw Error("dispatch probe: repeats must be >= 1");
  if (opt.split_every == 0) throw Error("dispatch probe: split_every must be >= 1");
  if (opt.workgroups.empty()) throw Error("dispatch probe: no workgroup counts given");
  const uint32_t max_wg = ctx.info().limits.maxComputeWorkgroupsPerDimension;
  for (uint32_t wg : opt.workgroups)
    if (wg == 0 || wg > max_wg)
      throw Error("dispatch probe: workgroups must be in [1, " + std::to_string(max_wg) + "], got " + std::to_string(wg));
  const uint32_t wg_max = *std::max_element(opt.workgroups.begin(), opt.workgroups.end());
  const uint64_t bytes = uint64_t(wg_max) * kThreads * 4;

  std::vector<std::unique_ptr<gpu::Buffer>> bufs;
  for (uint32_t b = 0; b < kBuffers; ++b)
    bufs.push_back(std::make_unique<gpu::Buffer>(ctx, bytes, gpu::BufferKind::Storage, "dispatch-probe"));
  std::vector<uint64_t> updates(kBuffers, 0);  // updates each buffer's first n elements received
  const std::vector<float> zeros(bytes / 4, 0.0f);
  auto reset = [&] {
    for (uint32_t b = 0; b < kBuffers; ++b) bufs[b]->write(ctx, 0, zeros.data(), bytes);
    std::fill(updates.begin(), updates.end(), 0);
  };
  gpu::PipelineCache pipes(ctx);
  const gpu::Pipeline& pipe = pipes.get("dispatch_probe", [&] {
    return gpu::KernelSpec{"", specialize("dispatch_probe", {}), {gpu::Bind::ReadWrite, gpu::Bind::Uniform}};
  });
  // Split submissions restart the parameter slots, so the recorder needs room for `count` only.
  gpu::Recorder rec(ctx, opt.count + 8);

  DispatchReport rep;
  rep.count = opt.count;
  rep.repeats = opt.repeats;
  for (const char* pattern : {"chain", "independent", "split"}) {
    const bool indep = std::strcmp(pattern, "independent") == 0, split = std::strcmp(pattern, "split") == 0;
    for (uint32_t wg : opt.workgroups) {
      DispatchProbeParams prm{wg * kThreads, 0, 0, 0};
      // One submission of n dispatches; returns {record us, record + submit + wait us}.
      auto run = [&](uint32_t n, bool timed_gpu, std::vector<double>* gpu_us) {
        rec.set_profiling(timed_gpu);
        const auto t0 = clk::now();
        double record = 0;
        rec.begin();
        for (uint32_t i = 0; i < n; ++i) {
          const uint32_t b = indep ? i % kBuffers : 0;
          const auto r0 = clk::now();
          rec.dispatch(pipe, {*bufs[b]}, prm, wg, 1, 1, "dispatch_probe");
          record += us_since(r0);
          ++updates[b];
          if (split && (i + 1) % opt.split_every == 0 && i + 1 < n) {
            rec.submit();
            rec.begin();
          }
        }
        rec.submit();
        ctx.wait_idle();
        const double total = us_since(t0);
        if (timed_gpu && gpu_us)
          for (const auto& k : rec.last_profile()) gpu_us->push_back(k.us);
        return std::pair<double, double>{record, total};
      };
      reset();
      run(opt.count, false, nullptr);  // warm-up: pipeline, bind groups, page-in
      std::vector<double> rec_us, t1, tn, gpu_us;
      for (uint32_t r = 0; r < opt.repeats; ++r) {  // interleaved: N and 1 alternate
        auto [rn, wn] = run(opt.count, false, nullptr);
        rec_us.push_back(rn / opt.count);
        tn.push_back(wn);
        t1.push_back(run(1, false, nullptr).second);
      }
      rec.set_profiling(true);
      const bool ts = rec.profiling();
      if (ts && !split) run(opt.count, true, &gpu_us);
      rec.set_profiling(false);
      rep.timestamps = rep.timestamps || ts;
      // Check: every buffer holds the value of the updates it received.
      std::vector<float> got(wg * kThreads);
      for (uint32_t b = 0; b < kBuffers; ++b) {
        bufs[b]->read(ctx, 0, got.data(), got.size() * 4);
        const float want = expected(updates[b]);
        for (size_t i = 0; i < got.size(); ++i)
          if (got[i] != want)
            throw Error(std::string("dispatch probe (") + pattern + "): buffer " + std::to_string(b) + " element " +
                        std::to_string(i) + " is " + std::to_string(got[i]) + ", expected " + std::to_string(want));
      }
      DispatchFigure f;
      f.pattern = pattern;
      f.workgroups = wg;
      f.record_us = median(rec_us);
      f.total_us = (median(tn) - median(t1)) / double(opt.count - 1);
      if (!gpu_us.empty()) f.gpu_us = median(gpu_us);
      rep.rows.push_back(f);
    }
  }
  return rep;
}

std::vector<ParamsLayout> dispatch_probe_params_layouts() { return {WGLLM_LAYOUT(DispatchProbeParams, "dispatch_probe")}; }

}  // namespace wgllm::kernels
