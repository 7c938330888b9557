// `wgllm bench attention`: the attention op alone (kernels::attention, random Q and KV cache) for
// one forward of --tokens query tokens after --cache cached tokens, per kernel variant: per-row
// kernel (--no-attn-tiled), multi-query tiled kernel and register-tiled flash kernel (--attn-flash,
// T > 1 and head dims it covers; "flash-lp": its loop form, --no-attn-flash-unroll; "flash-pf": with --attn-flash-prefetch), each with and without the key split (the tiled and flash ones at
// each --split-targets value of KernelOptions::attention_tiled_split_target). Each variant also
// reports its arithmetic rate: causal attention FLOPs = 4 * HD * Hq * sum_t (cache + t + 1) (QK^T
// and PV, one FMA = 2 FLOP), as GFLOP/s and as a share of --peak-tflops (default 67, the H200's
// fp32 FMA peak; WGSL has no tensor cores).
// Default shape: SmolLM2-135M's layer (9 query heads, 3 KV heads, head dim 64), a session turn's
// 44 new tokens over a 1700-token cache. GPU time per forward from timestamp queries when the
// device has them inside passes, else wall time of submit + wait (includes the submit overhead).
// Median of --reps after one warm-up. Writes JSON (--json, default stdout).
// --window W: a sliding-window layer's forward (Gemma 3's local layers: each token sees its last W keys);
// its flash rows run with --attn-flash-window (named "-window"; on in the product since 2026-12-07).
// Decode (--tokens 1) adds the GQA decode kernel (attention_decode.wgsl, --attn-decode-gqa):
// unsplit (one dispatch), and split (+ combine) into each --decode-split-lens key count; each also with
// --attn-decode-late-v ("gqa-lv") and at each --decode-key-lanes value ("gqa-kl<N>", --attn-decode-key-lanes).
// --flash-lanes N,..: flash rows with --attn-flash-lanes N (attention_flash_sg.wgsl) at each --flash-lanes-threads,
// --flash-lanes-rows and --flash-lanes-keys value ("flash-l<N>t<threads>[r<rows>][k<keys>]"). Every row prints the largest |difference| of its output from the first
// row's (the per-row kernel): a variant that computes something else shows there.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <random>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench.h"
#include "bench_attention.h"
#include "core/error.h"
#include "gpu/context.h"
#include "kernels/ops.h"
#include "validate.h"

namespace wgllm::cli {

namespace {

struct AttnBenchOpts {
  DeviceArgs dev;  // --adapter, --shader-checks, --shader-loop-bounding
  uint32_t tokens = 44, cache = 1700, heads = 9, kv_heads = 3, head_dim = 64, reps = 5;
  uint32_t window = 0;  // AttentionShape::window (0: every earlier key)
  double peak_tflops = 67.0;  // fp32 FMA peak the GFLOP/s are compared with
  std::vector<uint32_t> split_targets = {512};  // KernelOptions::attention_tiled_split_target values
  std::vector<uint32_t> decode_split_lens = {64, 128, 256, 512};  // KernelOptions::attention_decode_split_len values
  std::vector<uint32_t> flash_split_tiles = {};  // KernelOptions::attention_flash_split_tiles values (flash-pf rows)
  std::vector<uint32_t> decode_key_lanes = {};   // KernelOptions::attention_decode_key_lanes values (gqa-kl rows)
  std::vector<uint32_t> flash_lanes = {};        // KernelOptions::attention_flash_lanes values (flash-l<N> rows)
  std::vector<uint32_t> flash_lanes_threads = {256};  // KernelOptions::attention_flash_lanes_threads values
  std::vector<uint32_t> flash_lanes_rows = {0};        // KernelOptions::attention_flash_lanes_rows values (0: auto)
  std::vector<uint32_t> flash_lanes_keys = {0};        // KernelOptions::attention_flash_lanes_keys values (0: auto)
  std::string json_path;
};

gpu::Buffer random_buffer(gpu::Context& ctx, size_t n, uint32_t seed, const char* name) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(g);
  gpu::Buffer b(ctx, n * 4, gpu::BufferKind::Storage, name);
  b.write(ctx, 0, v.data(), n * 4);
  return b;
}

int run_attention_bench(const AttnBenchOpts& b) {
  using clk = std::chrono::steady_clock;
  auto ctx = bench_context(b.dev);
  gpu::PipelineCache pipes(*ctx);
  gpu::Recorder rec(*ctx);
  const bool ts = ctx->timestamps_inside_passes();
  rec.set_profiling(ts);
  const uint32_t T = b.tokens, Hq = b.heads, Hkv = b.kv_heads, HD = b.head_dim, kv_dim = Hkv * HD;
  const size_t rows = size_t(b.cache) + T;
  // Every buffer must fit one storage binding of this device (a clear error, not a device error).
  const uint64_t limit = ctx->info().limits.maxStorageBufferBindingSize;
  const uint32_t max_target = *std::max_element(b.split_targets.begin(), b.split_targets.end());
  const uint64_t scratch_floats = kernels::attention_split_floats(T, Hq, HD, max_target);
  for (auto [what, bytes] : {std::pair<const char*, uint64_t>{"the K and V caches", uint64_t(rows) * kv_dim * 4},
                             {"the queries", uint64_t(T) * Hq * HD * 4}, {"the split-keys scratch", scratch_floats * 4}})
    if (bytes > limit)
      throw Error(fmt::format("bench attention: {} take {} bytes, over this device's maxStorageBufferBindingSize {} "
                              "(lower --cache, --tokens, --heads, --kv-heads or --head-dim)", what, bytes, limit));
  auto kc = random_buffer(*ctx, rows * kv_dim, 1, "k"), vc = random_buffer(*ctx, rows * kv_dim, 2, "v");
  auto q = random_buffer(*ctx, size_t(T) * Hq * HD, 3, "q");
  gpu::Buffer out(*ctx, size_t(T) * Hq * HD * 4, gpu::BufferKind::Storage, "out");
  gpu::Buffer scratch(*ctx, scratch_floats * 4, gpu::BufferKind::Storage, "split");
  const kernels::AttentionShape s{T, b.cache, Hq, Hkv, HD, 1.0f / std::sqrt(float(HD)), b.window};
  nlohmann::json variants = nlohmann::json::array();
  fmt::print(stderr, "attention: {} tokens after {} cached, {} / {} heads, head dim {}{} on {} ({})\n", T, b.cache, Hq, Hkv,
             HD, b.window ? fmt::format(", sliding window {}", b.window) : "", ctx->info().name,
             ts ? "timestamps" : "wall clock of submit + wait");
  struct Variant { bool tiled, split; uint32_t target; bool gqa = false; uint32_t split_len = 0; bool flash = false; bool loop = false;
                   bool pf = false; uint32_t split_tiles = 0; bool lv = false; uint32_t kl = 0; uint32_t lanes = 0;
                   uint32_t lthreads = 0, lrows = 0, lkeys = 0; };
  std::vector<Variant> vs = {{false, false, 0}, {false, true, 0}, {true, false, 0}};
  for (uint32_t t : b.split_targets) vs.push_back({true, true, t});
  if (T == 1) {
    vs.push_back({false, false, 0, true, 0});
    for (uint32_t len : b.decode_split_lens) vs.push_back({false, true, 0, true, len});
    // and with --attn-decode-late-v ("gqa-lv")
    vs.push_back({false, false, 0, true, 0, false, false, false, 0, true});
    for (uint32_t len : b.decode_split_lens) vs.push_back({false, true, 0, true, len, false, false, false, 0, true});
    // and at each --decode-key-lanes value (--attn-decode-key-lanes; "gqa-kl<N>")
    for (uint32_t kl : b.decode_key_lanes) {
      vs.push_back({false, false, 0, true, 0, false, false, false, 0, false, kl});
      for (uint32_t len : b.decode_split_lens) vs.push_back({false, true, 0, true, len, false, false, false, 0, false, kl});
    }
  }
  {
    kernels::KernelOptions fo;
    fo.attention_flash = 1;
    fo.attention_flash_wide = true;  // the flash rows at head dims 160..256 too (--attn-flash-wide-heads)
    fo.attention_flash_window = true;  // and with a sliding window (--attn-flash-window)
    fo.attention_chunk = 0;
    if (kernels::attention_flash_used(kernels::OpContext{*ctx, pipes, rec, fo}, s)) {
      // The flash kernel in this adapter's default form, and in its loop form (--no-attn-flash-unroll)
      // when that default is the generated register tile.
      const bool unrolled = kernels::attention_flash_unrolled(kernels::OpContext{*ctx, pipes, rec, fo});
      for (bool loop : {false, true}) {
        if (loop && !unrolled) continue;
        vs.push_back({true, false, 0, false, 0, true, loop});
        for (uint32_t t : b.split_targets) vs.push_back({true, true, t, false, 0, true, loop});
      }
      // --attn-flash-prefetch (the default form), where the tile takes it.
      fo.attention_flash_prefetch = true;
      const kernels::OpContext fpo{*ctx, pipes, rec, fo};
      if (kernels::attention_flash_prefetch(fpo, kernels::attention_flash_tile(fpo, HD), HD)) {
        vs.push_back({true, false, 0, false, 0, true, false, true});
        for (uint32_t t : b.split_targets) vs.push_back({true, true, t, false, 0, true, false, true});
        // and at each --flash-split-tiles value (--attn-flash-split-tiles) but the default
        for (uint32_t st : b.flash_split_tiles)
          if (st != fo.attention_flash_split_tiles)
            for (uint32_t t : b.split_targets) vs.push_back({true, true, t, false, 0, true, false, true, st});
      }
      // --attn-flash-lanes N (attention_flash_sg.wgsl, with the prefetch where its tile takes it) at each
      // --flash-lanes-threads value, where the lanes tile applies ("flash-l<N>t<threads>").
      for (uint32_t lanes : b.flash_lanes)
        for (uint32_t nt : b.flash_lanes_threads)
          for (uint32_t rows : b.flash_lanes_rows)
            for (uint32_t keys : b.flash_lanes_keys) {
          kernels::KernelOptions lo = fo;
          lo.attention_flash_lanes = lanes;
          lo.attention_flash_lanes_threads = nt;
          lo.attention_flash_lanes_rows = rows;
          lo.attention_flash_lanes_keys = keys;
          if (kernels::attention_flash_lanes_tile(kernels::OpContext{*ctx, pipes, rec, lo}, HD).bc == 0) {
            fmt::print(stderr, "  (flash-l{}t{}r{}k{}: the lanes tile does not apply here)\n", lanes, nt, rows, keys);
            continue;
          }
          Variant v{true, false, 0, false, 0, true, false, true};
          v.lanes = lanes;
          v.lthreads = nt;
          v.lrows = rows;
          v.lkeys = keys;
          vs.push_back(v);
          for (uint32_t t : b.split_targets) {
            v.split = true;
            v.target = t;
            vs.push_back(v);
          }
        }
    } else {
      fmt::print(stderr, "  (flash kernel: not used for this shape: T = 1, or head dim {} not covered / over this adapter's limits)\n", HD);
    }
  }
  // Causal FLOPs of the forward: token t sees cache + t + 1 keys (with a window at most W); per key
  // and query head 2 * HD FLOP for the score and 2 * HD for the value sum.
  double keys_seen = 0;
  for (uint32_t t = 0; t < T; ++t) keys_seen += b.window ? std::min(b.cache + t + 1, b.window) : b.cache + t + 1;
  const double flop = 4.0 * HD * Hq * keys_seen;
  std::vector<float> first_out;  // the first variant's output (agreement check)
  for (const Variant& v : vs) {
    {
      const bool tiled = v.tiled, split = v.split;
      kernels::KernelOptions ko;
      ko.attention_tiled_prefill = tiled;
      ko.attention_flash = v.flash ? 1 : 0;
      ko.attention_flash_wide = v.flash;
      ko.attention_flash_window = v.flash;
      ko.attention_flash_unroll = v.loop ? 0 : 2;
      ko.attention_flash_prefetch = v.pf;
      if (v.split_tiles) ko.attention_flash_split_tiles = v.split_tiles;
      ko.attention_decode_late_v = v.lv;
      ko.attention_decode_key_lanes = v.kl;
      ko.attention_flash_lanes = v.lanes;
      ko.attention_flash_lanes_threads = v.lthreads;
      ko.attention_flash_lanes_rows = v.lrows;
      ko.attention_flash_lanes_keys = v.lkeys;
      ko.attention_chunk = 0;  // the flash rows are what --attn-chunk runs for a short chunk over a long cache
      ko.attention_decode_split = split;  // the variant splits whichever kernel it runs
      ko.attention_prefill_split = split;
      if (v.target) ko.attention_tiled_split_target = v.target;
      ko.attention_decode_gqa = v.gqa ? 1 : 0;
      ko.attention_decode_split_min = v.split_len ? 0 : (1u << 30);  // a split variant always splits
      if (v.split_len) ko.attention_decode_split_len = v.split_len;
      kernels::OpContext o{*ctx, pipes, rec, ko};
      std::vector<double> us;
      std::vector<std::string> labels;
      float sink = 0;
      for (uint32_t r = 0; r <= b.reps; ++r) {
        rec.begin();
        kernels::attention(o, s, {q, 0}, Hq * HD, kc, vc, {out, 0}, Hq * HD, &scratch);
        rec.read_after(out, 0, 4);
        const auto t0 = clk::now();
        rec.submit(&sink);
        const double wall = std::chrono::duration<double, std::micro>(clk::now() - t0).count();
        double gpu = 0;
        labels.clear();
        for (const auto& k : rec.last_profile()) {
          gpu += k.us;
          labels.push_back(k.label);
        }
        if (r > 0) us.push_back(ts ? gpu : wall);  // r = 0: warm-up (pipeline creation)
      }
      std::sort(us.begin(), us.end());
      const double med = us[us.size() / 2];
      // Agreement: the largest |difference| from the first variant's output (the per-row kernel).
      std::vector<float> got(size_t(T) * Hq * HD);
      out.read(*ctx, 0, got.data(), got.size() * 4);
      if (first_out.empty()) first_out = got;
      double max_diff = 0;
      for (size_t i = 0; i < got.size(); ++i) max_diff = std::max(max_diff, double(std::fabs(got[i] - first_out[i])));
      std::string joined;
      for (const auto& x : labels) joined += (joined.empty() ? "  " : " + ") + x;
      const std::string tgt = v.split_tiles ? fmt::format(" (target {} wgs, >= {} tiles)", v.target, v.split_tiles)
                              : v.target ? fmt::format(" (target {} wgs)", v.target)
                              : v.split_len ? fmt::format(" ({} keys per split)", v.split_len) : "";
      const double gflops = flop / (med * 1e3);
      // (flash rows at head dims > 128 run with --attn-flash-wide-heads: "-wide"; with a window,
      // --attn-flash-window: "-window"; both on in the product since 2026-12-07)
      const std::string name = (v.lanes ? fmt::format("flash-l{}t{}", v.lanes, v.lthreads) +
                                              (v.lrows ? fmt::format("r{}", v.lrows) : "") + (v.lkeys ? fmt::format("k{}", v.lkeys) : "")
                               : v.lv ? "gqa-lv"
                               : v.kl ? fmt::format("gqa-kl{}", v.kl) : v.gqa ? "gqa-dec" : v.loop ? "flash-lp"
                               : v.pf ? "flash-pf" : v.flash ? "flash" : tiled ? "tiled" : "per-row") +
                               std::string(v.flash && HD > 128 ? "-wide" : "") + std::string(v.flash && b.window ? "-window" : "");
      fmt::print(stderr, "  {:<8} split {:<3}{}: {:>9.1f} us (min {:.1f}, max {:.1f}) {:>8.1f} GFLOP/s = {:5.1f}% of {} TFLOP/s, "
                 "max |diff| {:.2g}{}\n",
                 name, split ? "on" : "off", tgt, med, us.front(),
                 us.back(), gflops, gflops / (b.peak_tflops * 10), b.peak_tflops, max_diff, joined);
      // (the prefetch as the tile takes it: a lanes tile of more than 8 vec4 per thread does not; the lanes
      // kernel is always generated code, no loop form)
      const bool pf_taken = v.pf && kernels::attention_flash_prefetch(o, kernels::attention_flash_pick(o, HD), HD);
      variants.push_back({{"attn_tiled", tiled}, {"attn_flash", v.flash},
                          {"attn_flash_unroll", v.flash && !v.lanes && kernels::attention_flash_unrolled(o)},
                          {"attn_flash_prefetch", pf_taken}, {"attn_flash_wide_heads", v.flash && HD > 128}, {"attn_flash_window", v.flash && b.window != 0}, {"attn_flash_split_tiles", ko.attention_flash_split_tiles}, {"attn_split", split}, {"split_target", v.target},
                          {"attn_decode_gqa", v.gqa}, {"attn_decode_late_v", v.lv}, {"attn_decode_key_lanes", v.kl}, {"decode_split_len", v.split_len},
                          {"attn_flash_lanes", v.lanes}, {"attn_flash_lanes_threads", v.lthreads},
                          {"attn_flash_lanes_rows", v.lrows}, {"attn_flash_lanes_keys", v.lkeys}, {"max_abs_diff_vs_first", max_diff}, {"median_us", med},
                          {"min_us", us.front()}, {"max_us", us.back()}, {"samples_us", us}, {"gflops", gflops},
                          {"peak_fraction", gflops / (b.peak_tflops * 1e3)}, {"kernels", labels}});
    }
  }
  nlohmann::json j = {{"benchmark", "attention"}, {"adapter", ctx->info().name},
                      {"timing", ts ? "timestamps" : "wall_clock_submit_wait"},
                      {"tokens", T}, {"cache", b.cache}, {"window", b.window}, {"heads", Hq}, {"kv_heads", Hkv}, {"head_dim", HD},
                      {"reps", b.reps}, {"flop", flop}, {"peak_tflops", b.peak_tflops}, {"variants", variants}};
  print_or_write_json(b.json_path, j.dump(1));
  return 0;
}

}  // namespace

std::function<int()> add_bench_attention(CLI::App& app) {
  CLI::App* bench = bench_subcommand(app);
  auto b = std::make_shared<AttnBenchOpts>();
  auto* cmd = bench->add_subcommand("attention", "time the attention op alone: per-row vs tiled vs flash kernel, split on/off");
  add_device_options(cmd, b->dev);
  cmd->add_option("--tokens", b->tokens, "query tokens of the forward, 1..65536 (default 44: a session turn)")
      ->transform(integer(1, 65536));
  cmd->add_option("--cache", b->cache, "cached tokens before them, 0..1048576 (default 1700)")->transform(integer(0, 1u << 20));
  cmd->add_option("--heads", b->heads, "query heads, 1..256, a multiple of --kv-heads (default 9)")->transform(integer(1, 256));
  cmd->add_option("--kv-heads", b->kv_heads, "KV heads, 1..256 (default 3)")->transform(integer(1, 256));
  cmd->add_option("--head-dim", b->head_dim, "head dim, a multiple of 4 in 4..256 (default 64)")
      ->transform(integer(4, 256, /*multiple_of=*/4));
  cmd->add_option("--window", b->window, "sliding window in keys, 0..1048576 (default 0: none; Gemma 3's local layers: 512)")
      ->transform(integer(0, 1u << 20));
  cmd->add_option("--split-targets", b->split_targets, "tiled + split: workgroup targets to try, 1..4096 (default 512)")
      ->delimiter(',')->transform(integer(1, 4096));
  cmd->add_option("--decode-split-lens", b->decode_split_lens,
                  "--tokens 1: keys per split of the GQA decode kernel to try, 1..1048576 (default 64,128,256,512)")
      ->delimiter(',')->transform(integer(1, 1u << 20));
  cmd->add_option("--decode-key-lanes", b->decode_key_lanes,
                  "--tokens 1: also gqa rows at these threads per key (--attn-decode-key-lanes), powers of two 1..8 (default: none)")
      ->delimiter(',')->check(CLI::IsMember({1, 2, 4, 8}));
  cmd->add_option("--flash-split-tiles", b->flash_split_tiles,
                  "flash-pf rows: also at these minimum key tiles per split (--attn-flash-split-tiles), 1..64 (default: none)")
      ->delimiter(',')->transform(integer(1, 64));
  cmd->add_option("--flash-lanes", b->flash_lanes,
                  "also flash rows with the query rows in registers over N subgroup lanes (--attn-flash-lanes), 4..32 "
                  "(default: none)")
      ->delimiter(',')->check(CLI::IsMember({4, 8, 16, 32}));
  cmd->add_option("--flash-lanes-threads", b->flash_lanes_threads,
                  "--flash-lanes rows at these threads per workgroup (--attn-flash-lanes-threads), 32..1024 (default 256)")
      ->delimiter(',')->check(CLI::IsMember({32, 64, 128, 256, 512, 1024}));
  cmd->add_option("--flash-lanes-rows", b->flash_lanes_rows,
                  "--flash-lanes rows at these query rows per thread (--attn-flash-lanes-rows), 0 (auto), 1, 2, 4 (default 0)")
      ->delimiter(',')->check(CLI::IsMember({0, 1, 2, 4}));
  cmd->add_option("--flash-lanes-keys", b->flash_lanes_keys,
                  "--flash-lanes rows at these keys per softmax group (--attn-flash-lanes-keys), 0 (auto), 2..32 (default 0)")
      ->delimiter(',')->check(CLI::IsMember({0, 2, 4, 8, 16, 32}));
  cmd->add_option("--reps", b->reps, "measured repetitions after one warm-up, 1..100000 (default 5)")->transform(integer(1, 100000));
  cmd->add_option("--peak-tflops", b->peak_tflops, "fp32 FMA peak the GFLOP/s are compared with, in TFLOP/s (default 67: H200)")
      ->check(real(1e-3, 1e4));
  add_json_option(cmd, b->json_path);
  // Grouped-query attention: every KV head serves heads / kv_heads query heads. Checked at parse
  // time (a ValidationError from the callback is a command-line error like the ones above).
  cmd->parse_complete_callback([b] {
    if (b->heads % b->kv_heads)
      throw CLI::ValidationError("--heads", fmt::format("{} is not a multiple of --kv-heads {}", b->heads, b->kv_heads));
  });
  return [=]() -> int { return *cmd ? run_attention_bench(*b) : -1; };
}

}  // namespace wgllm::cli
