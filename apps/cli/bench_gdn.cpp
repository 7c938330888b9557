// `wgllm bench gdn`: the chunkwise gated delta rule of one Gated DeltaNet layer alone
// (kernels::gdn_chunked: gdn_chunk_prep then the scan) for --tokens tokens, at each --chunks value
// (KernelOptions::gdn_chunk) and each --scan-cols value (KernelOptions::gdn_scan_cols; 0 = the
// one-column-per-invocation scan), each --scan-stage value (KernelOptions::gdn_scan_stage; a tiled
// scan only), each --scan-prefetch value (KernelOptions::gdn_scan_prefetch; a staged scan only) and each
// --prep-stage value (KernelOptions::gdn_prep_stage; a setting that does not apply runs what the product
// runs there, once), on random operands of the model's layout (q, k L2-normalised,
// decays g <= 0, beta in (0, 1), a random starting state). Default shape: Qwen3.5-0.8B's
// linear-attention layer (16 key and 16 value heads of 128), a 512-token prompt. GPU time per
// kernel from timestamp queries when the device has them inside passes, else the wall time of
// submit + wait (both kernels together). Median of --reps after one warm-up (pipeline creation).
// Each variant's output and final state are compared bit for bit with the first variant of the
// same chunk size (the scan tiles promise the same bits). Writes JSON (--json, default stdout).
#include "bench_gdn.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <array>
#include <map>
#include <set>
#include <random>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench.h"
#include "core/error.h"
#include "gpu/context.h"
#include "kernels/gdn_ops.h"
#include "validate.h"

namespace wgllm::cli {

namespace {

struct GdnBenchOpts {
  DeviceArgs dev;  // --adapter, --shader-checks, --shader-loop-bounding
  uint32_t tokens = 512, nk = 16, nv = 16, dk = 128, dv = 128, reps = 5;
  std::vector<uint32_t> chunks = {16, 32, 64};  // KernelOptions::gdn_chunk values
  std::vector<uint32_t> scan_cols = {0, 8};     // KernelOptions::gdn_scan_cols values
  std::vector<uint32_t> scan_stage = {1};       // KernelOptions::gdn_scan_stage values (0, 1)
  std::vector<uint32_t> prep_stage = {1};       // KernelOptions::gdn_prep_stage values (0, 1)
  std::vector<uint32_t> scan_prefetch = {1};    // KernelOptions::gdn_scan_prefetch values (0, 1)
  std::string json_path;
};

int run_gdn_bench(const GdnBenchOpts& b) {
  using clk = std::chrono::steady_clock;
  auto ctx = bench_context(b.dev);
  gpu::PipelineCache pipes(*ctx);
  gpu::Recorder rec(*ctx);
  const bool ts = ctx->timestamps_inside_passes();
  rec.set_profiling(ts);
  const uint32_t T = b.tokens, NK = b.nk, NV = b.nv, DK = b.dk, DV = b.dv;
  const uint32_t stride = 2 * NK * DK + NV * DV;  // one token's [q | k | v]
  std::mt19937 g(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uniform_real_distribution<float> ud(0.0f, 1.0f);
  std::vector<float> qkv(size_t(T) * stride), gates(size_t(T) * 2 * NV), state(size_t(NV) * DK * DV);
  for (auto& x : qkv) x = nd(g);
  for (uint32_t t = 0; t < T; ++t)  // q and k of every head L2-normalised, as the model feeds them
    for (uint32_t hh = 0; hh < 2 * NK; ++hh) {
      float* v = &qkv[size_t(t) * stride + size_t(hh) * DK];
      double s = 0;
      for (uint32_t i = 0; i < DK; ++i) s += double(v[i]) * v[i];
      for (uint32_t i = 0; i < DK; ++i) v[i] = float(v[i] / std::sqrt(s + 1e-6));
    }
  for (uint32_t t = 0; t < T; ++t)
    for (uint32_t h = 0; h < NV; ++h) {
      gates[size_t(t) * 2 * NV + h] = -0.5f * ud(g);       // log decay g <= 0
      gates[size_t(t) * 2 * NV + NV + h] = ud(g);          // beta in (0, 1)
    }
  for (auto& x : state) x = 0.1f * nd(g);
  uint64_t work_floats = 0;  // the largest over the chunks (not monotonic in the chunk: partial last chunks)
  for (uint32_t C : b.chunks) work_floats = std::max(work_floats, kernels::gdn_chunk_work_floats(T, C, NV, DK, DV));
  const uint64_t limit = ctx->info().limits.maxStorageBufferBindingSize;
  for (auto [what, bytes] : {std::pair<const char*, uint64_t>{"q, k, v", qkv.size() * 4ull},
                             {"the chunk work buffer", work_floats * 4}, {"the output", uint64_t(T) * NV * DV * 4}})
    if (bytes > limit)
      throw Error(fmt::format("bench gdn: {} take {} bytes, over this device's maxStorageBufferBindingSize {} "
                              "(lower --tokens or the head sizes)", what, bytes, limit));
  auto upload = [&](const std::vector<float>& v, const char* name) {
    gpu::Buffer buf(*ctx, v.size() * 4, gpu::BufferKind::Storage, name);
    buf.write(*ctx, 0, v.data(), v.size() * 4);
    return buf;
  };
  auto qb = upload(qkv, "qkv"), gb = upload(gates, "gates"), sb = upload(state, "state");
  gpu::Buffer ob(*ctx, uint64_t(T) * NV * DV * 4, gpu::BufferKind::Storage, "out");
  const std::vector<float> nan_out(size_t(T) * NV * DV, std::nanf(""));
  gpu::Buffer wb(*ctx, work_floats * 4, gpu::BufferKind::Storage, "work");
  const uint32_t wg_bytes = ctx->info().limits.maxComputeWorkgroupStorageSize;
  fmt::print(stderr, "gdn: {} tokens, {} key / {} value heads, DK {} DV {} on {} ({})\n", T, NK, NV, DK, DV,
             ctx->info().name, ts ? "timestamps" : "wall clock of submit + wait");
  nlohmann::json variants = nlohmann::json::array();
  std::map<uint32_t, std::pair<std::vector<float>, std::vector<float>>> first;  // chunk -> (out, state) of its first variant
  std::set<std::array<uint32_t, 5>> timed;  // (chunk, columns, staged, prep staged, prefetch) run so far
  for (uint32_t C : b.chunks)
    for (uint32_t cols : b.scan_cols)
    for (uint32_t stage : b.scan_stage)
    for (uint32_t prep_asked : b.prep_stage)
    for (uint32_t pf_asked : b.scan_prefetch) {
      // What runs: staging where it applies (a tile, DK % 4, room beside it), prefetch only when staged; a
      // setting that falls back runs what the product runs there, once per (chunk, columns).
      const kernels::GdnScanTile tile = kernels::gdn_scan_tile(C, DK, cols, wg_bytes, stage != 0);
      const uint32_t prep = prep_asked && kernels::gdn_prep_staged(true, C, DK, DV, wg_bytes);
      const uint32_t pf = pf_asked && tile.stage;
      if (!timed.insert({C, cols, tile.stage, prep, pf}).second) continue;
      kernels::KernelOptions ko;
      ko.gdn_chunk = C;
      ko.gdn_scan_cols = cols;
      ko.gdn_scan_stage = tile.stage;
      ko.gdn_prep_stage = prep != 0;
      ko.gdn_scan_prefetch = pf != 0;
      kernels::OpContext o{*ctx, pipes, rec, ko};
      std::map<std::string, std::vector<double>> per;  // kernel label -> samples
      std::vector<double> total;
      float sink = 0;
      for (uint32_t r = 0; r <= b.reps; ++r) {
        sb.write(*ctx, 0, state.data(), state.size() * 4);  // every repetition starts from the same state
        ob.write(*ctx, 0, nan_out.data(), nan_out.size() * 4);  // an output a variant leaves unwritten stays NaN
        rec.begin();
        kernels::GdnOperands a{qb, 0, NK * DK, 2 * NK * DK, stride, gb, 0, 2 * NV, sb, ob, 0, NV * DV,
                               T, NK, NV, DK, DV, 1.0f / std::sqrt(float(DK))};
        kernels::gdn_chunked(o, a, wb);
        rec.read_after(ob, 0, 4);
        const auto t0 = clk::now();
        rec.submit(&sink);
        const double wall = std::chrono::duration<double, std::micro>(clk::now() - t0).count();
        if (r == 0) continue;  // warm-up (pipeline creation)
        double gpu_us = 0;
        for (const auto& k : rec.last_profile()) {
          per[k.label].push_back(k.us);
          gpu_us += k.us;
        }
        total.push_back(ts ? gpu_us : wall);
      }
      auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
      };
      std::vector<float> out(size_t(T) * NV * DV), st(state.size());
      ob.read(*ctx, 0, out.data(), out.size() * 4);
      sb.read(*ctx, 0, st.data(), st.size() * 4);
      auto [it, fresh] = first.try_emplace(C, out, st);
      const bool same = fresh || (std::memcmp(it->second.first.data(), out.data(), out.size() * 4) == 0 &&
                                  std::memcmp(it->second.second.data(), st.data(), st.size() * 4) == 0);
      nlohmann::json kern = nlohmann::json::object();
      std::string line;
      for (const auto& [label, v] : per) {
        kern[label] = median(v);
        line += fmt::format("  {} {:.1f} us", label, median(v));
      }
      const double med = median(total);
      fmt::print(stderr, "  chunk {:>3} scan cols {:>2} stage {} prefetch {} prep stage {} (tile {} x {} threads): {:>10.1f} us{}{}\n",
                 C, cols, int(tile.stage), pf, prep, tile.cols, tile.threads, med, ts ? line : "", fresh ? "" : same ? "  [same bits]" : "  [BITS DIFFER]");
      variants.push_back({{"gdn_chunk", C}, {"gdn_scan_cols", cols}, {"gdn_scan_stage", tile.stage}, {"gdn_prep_stage", prep}, {"gdn_scan_prefetch", pf},
                          {"tile_cols", tile.cols},
                          {"tile_threads", tile.threads},
                          {"median_us", med}, {"samples_us", total}, {"kernels_median_us", kern},
                          {"same_bits_as_first_of_chunk", same}});
      if (!same)
        fmt::print(stderr, "bench gdn: chunk {} scan cols {} stage {} prefetch {} prep stage {} differs from chunk {}'s first variant\n",
                   C, cols, int(tile.stage), pf, prep, C);
    }
  nlohmann::json j = {{"benchmark", "gdn"}, {"adapter", ctx->info().name},
                      {"timing", ts ? "timestamps" : "wall_clock_submit_wait"}, {"tokens", T}, {"nk", NK}, {"nv", NV},
                      {"dk", DK}, {"dv", DV}, {"reps", b.reps}, {"variants", variants}};
  print_or_write_json(b.json_path, j.dump(1));
  for (const auto& v : variants)
    if (!v["same_bits_as_first_of_chunk"].get<bool>()) return 1;
  return 0;
}

}  // namespace

std::function<int()> add_bench_gdn(CLI::App& app) {
  CLI::App* bench = bench_subcommand(app);
  auto b = std::make_shared<GdnBenchOpts>();
  auto* cmd = bench->add_subcommand("gdn", "time the Gated DeltaNet chunkwise prefill alone: per chunk size and scan tile");
  add_device_options(cmd, b->dev);
  cmd->add_option("--tokens", b->tokens, "prompt tokens, 1..65536 (default 512)")->transform(integer(1, 65536));
  cmd->add_option("--key-heads", b->nk, "key heads, 1..256 (default 16)")->transform(integer(1, 256));
  cmd->add_option("--value-heads", b->nv, "value heads, 1..256, a multiple of --key-heads (default 16)")->transform(integer(1, 256));
  cmd->add_option("--key-dim", b->dk, "key head dim, 1..1024 (default 128)")->transform(integer(1, 1024));
  cmd->add_option("--value-dim", b->dv, "value head dim, 1..1024 (default 128)")->transform(integer(1, 1024));
  cmd->add_option("--chunks", b->chunks, "chunk sizes to try (--gdn-chunk), 1..256 (default 16,32,64)")
      ->delimiter(',')->transform(integer(1, 256));
  cmd->add_option("--scan-cols", b->scan_cols, "scan tiles to try (--gdn-scan-cols), 0..64 (default 0,8)")
      ->delimiter(',')->transform(integer(0, 64));
  cmd->add_option("--scan-stage", b->scan_stage,
                  "scan staging to try (--gdn-scan-stage) with each tiled --scan-cols, 0..1 (default 1, the product)")
      ->delimiter(',')->transform(integer(0, 1));
  cmd->add_option("--scan-prefetch", b->scan_prefetch,
                  "staged-scan prefetch to try (--gdn-scan-prefetch) with each --scan-stage 1, 0..1 (default 1, the product)")
      ->delimiter(',')->transform(integer(0, 1));
  cmd->add_option("--prep-stage", b->prep_stage, "prep staging to try (--gdn-prep-stage), 0..1 (default 1, the product)")
      ->delimiter(',')->transform(integer(0, 1));
  cmd->add_option("--reps", b->reps, "measured repetitions after one warm-up, 1..100000 (default 5)")->transform(integer(1, 100000));
  add_json_option(cmd, b->json_path);
  cmd->parse_complete_callback([b] {
    if (b->nv % b->nk)
      throw CLI::ValidationError("--value-heads", fmt::format("{} is not a multiple of --key-heads {}", b->nv, b->nk));
  });
  return [=]() -> int { return *cmd ? run_gdn_bench(*b) : -1; };
}

}  // namespace wgllm::cli
