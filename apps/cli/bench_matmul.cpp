// `wgllm bench matmul`: kernels::matmul alone (random weights of --type, random activations) for
// each --shapes N:K at each --tokens T, per kernel variant: the per-row kernel (--no-matmul-tiled)
// and the tiled prefill kernel (kernels/matmul_tiled.h) at each --tiles tile, in f32 and (--f16,
// when the adapter has shader-f16) f16, and (--int8) the int8 variant (kernels/matmul_int8.h: its
// time is the quantize_q8 dispatch plus the int8 matmul; quantize_us gives the first apart). Default shapes: one SmolLM2-135M layer's prefill matmuls
// (QKV 960:576, attention output 576:576, gate+up 3072:576, down 576:1536). Prints the median GPU
// time (timestamp queries when the device has them inside passes, else wall time of submit + wait)
// and the achieved rate 2 N K T / time in GFLOP/s and as a share of --peak-tflops (default 67: the
// H200's fp32 FMA peak); per variant also the layer total (sum over the shapes). JSON to --json
// (default stdout).
// `wgllm bench matvec`: the decode matrix-vector kernel (matvec.wgsl, T <= 8) alone, per launch
// shape (rows per workgroup / rows per thread / lanes; 0 = the by-shape default) and prologue
// (none, the fused RMSNorm, the fused SiLU gate), as bytes moved per second and as a share of the
// device's measured copy bandwidth (kernels/bandwidth_probe.h): the yardstick of issue 11 item 2.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <random>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench.h"
#include "bench_matmul.h"
#include "core/error.h"
#include "core/half.h"
#include "formats/dtype.h"
#include "gpu/context.h"
#include "kernels/bandwidth_probe.h"
#include "kernels/matmul_coop.h"
#include "kernels/matmul_tiled.h"
#include "kernels/ops.h"
#include "validate.h"

namespace wgllm::cli {

namespace {

struct MatmulBenchOpts {
  DeviceArgs dev;  // --adapter, --shader-checks, --shader-loop-bounding
  std::vector<std::string> shapes = {"960:576", "576:576", "3072:576", "576:1536"};
  std::vector<uint32_t> tokens = {512, 4096};
  // 8 x 8 register tiles are left out by default: 64 vec4 accumulators exceed NVIDIA's 255 registers.
  std::vector<std::string> tiles = {"64x64/4x4", "32x64/4x4", "64x32/4x4", "32x32/4x4", "128x64/8x4",
                                    "64x128/4x8", "64x64/8x4", "64x64/4x8"};
  std::string type = "q4_1";
  bool per_row = true, f16 = false, int8 = false;
  bool coop = false;                  // the cooperative-matrix kernel (kernels/matmul_coop.h) at each --coop-tiles tile
  std::vector<std::string> coop_tiles = {"64x64", "128x64", "64x128", "128x128", "32x64"};
  bool q6k_packed = false;  // ModelOptions::q6k_packed: Q6_K's GPU layout (the product's by default)
  uint32_t reps = 5;
  double peak_tflops = 67.0;
  uint32_t min_wgs = 264;
  std::string json_path;
};

// --q6k-packed of bench matmul and bench matvec.
constexpr const char* kQ6kPackedHelp =
    "Q6_K weights in their 6.56-bit GPU layout or widened to 10 bits (default, as the product: ModelOptions::q6k_packed)";

DType parse_type(const std::string& s) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q4_1, DType::Q8_0, DType::Q4_K, DType::Q6_K})
    if (dtype_name(t) == s) return t;
  throw Error("bench matmul: --type must be one of f32, f16, bf16, q4_0, q4_1, q8_0, q4_K, q6_K (got '" + s + "')");
}

// Random well-formed blocks: random quant bytes, small positive f16 scales (floats: N(0, 1)).
std::vector<uint8_t> random_blocks(DType t, uint32_t K, uint32_t N) {
  std::mt19937 g(7);
  const size_t bb = dtype_block_bytes(t), nb = size_t(K) * N / dtype_block_elems(t);
  std::vector<uint8_t> d(nb * bb);
  for (auto& b : d) b = uint8_t(g());
  auto f16 = [](uint8_t* p, float v) { const uint16_t h = f32_to_f16(v); p[0] = uint8_t(h); p[1] = uint8_t(h >> 8); };
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (size_t i = 0; i < nb; ++i) {
    uint8_t* b = d.data() + i * bb;
    if (t == DType::F16) f16(b, nd(g));
    else if (t == DType::BF16) { const uint32_t u = bits_from_f32(nd(g)); b[0] = uint8_t(u >> 16); b[1] = uint8_t(u >> 24); }
    else if (t == DType::F32) { const float v = nd(g); std::memcpy(b, &v, 4); }
    else if (t == DType::Q6_K) f16(b + 208, 0.002f);
    else { f16(b, 0.01f); if (t == DType::Q4_1 || t == DType::Q4_K) f16(b + 2, t == DType::Q4_1 ? -0.08f : 0.01f); }
  }
  return d;
}

kernels::MatmulTile parse_tile(const std::string& s) {
  kernels::MatmulTile t;
  char c1 = 0, c2 = 0, c3 = 0;
  if (std::sscanf(s.c_str(), "%ux%u%c%ux%u", &t.bn, &t.bt, &c1, &t.rn, &t.rt) != 5 || c1 != '/')
    throw Error("bench matmul: tile '" + s + "' is not BNxBT/RNxRT (e.g. 64x64/4x4)");
  if (t.bn == 0 || t.bt == 0 || t.bn > 256 || t.bt > 256 || (t.rn != 4 && t.rn != 8) || (t.rt != 4 && t.rt != 8))
    throw Error("bench matmul: tile '" + s + "': BN and BT must be in 1..256, RN and RT 4 or 8");
  (void)c2, (void)c3;
  return t;
}

int run_matmul_bench(const MatmulBenchOpts& b) {
  using clk = std::chrono::steady_clock;
  // Every argument is checked before the device is created.
  const DType type = parse_type(b.type);
  struct Shape { uint32_t N, K; };
  std::vector<Shape> shapes;
  for (const auto& s : b.shapes) {
    Shape sh{};
    char extra = 0;
    if (std::sscanf(s.c_str(), "%u:%u%c", &sh.N, &sh.K, &extra) != 2 || !sh.N || !sh.K || sh.N > 65536 || sh.K > 65536)
      throw Error("bench matmul: shape '" + s + "' is not N:K with N and K in 1..65536");
    shapes.push_back(sh);
  }
  for (const auto& t : b.tiles)
    if (!t.empty()) parse_tile(t);  // --tiles "": the auto variants only
  auto ctx = bench_context(b.dev, b.coop);
  gpu::PipelineCache pipes(*ctx);
  gpu::Recorder rec(*ctx);
  const bool ts = ctx->timestamps_inside_passes();
  rec.set_profiling(ts);
  struct Variant { std::string name; kernels::KernelOptions ko; };
  std::vector<Variant> vs;
  if (b.per_row) {
    kernels::KernelOptions ko;
    ko.matmul_tiled = 0;
    vs.push_back({"per-row", ko});
  }
  kernels::KernelOptions auto_ko;
  auto_ko.matmul_tiled_min_workgroups = b.min_wgs;
  auto_ko.matmul_tiled = 1;  // also on software adapters
  vs.push_back({"tiled auto", auto_ko});  // the default: adapter tile, small-grid halving
  const bool has_f16 = ctx->has_feature(WGPUFeatureName_ShaderF16);
  if (b.f16 && has_f16) {
    kernels::KernelOptions ko = auto_ko;
    ko.matmul_tiled_f16 = true;
    vs.push_back({"tiled auto f16", ko});
  }
  if (b.int8) {
    kernels::KernelOptions ko = auto_ko;
    ko.matmul_int8 = 1;
    vs.push_back({"tiled auto int8", ko});
  }
  if (b.f16 && !has_f16) fmt::print(stderr, "adapter has no shader-f16: --f16 variants skipped\n");
  if (b.coop) {
    if (!ctx->coop_matrix_f16())
      fmt::print(stderr, "no 16x16x16 f16 cooperative matrices on this device ({}): --coop variants skipped\n",
                 ctx->coop_matrix_status());
    else
      for (const auto& ct : b.coop_tiles) {
        uint32_t bn = 0, bt = 0;
        char extra = 0;
        if (std::sscanf(ct.c_str(), "%ux%u%c", &bn, &bt, &extra) != 2)
          throw Error("bench matmul: coop tile '" + ct + "' is not BNxBT");
        kernels::KernelOptions ko = auto_ko;
        ko.matmul_coop = true;
        ko.matmul_coop_tile_n = bn, ko.matmul_coop_tile_t = bt;
        try {
          kernels::coop_tile(kernels::OpContext{*ctx, pipes, rec, ko});
        } catch (const Error& e) {
          fmt::print(stderr, "skipping coop tile {}: {}\n", ct, e.what());
          continue;
        }
        vs.push_back({"coop " + ct, ko});
      }
  }
  for (const auto& ts_ : b.tiles) {
    if (ts_.empty()) continue;
    for (int mode = 0; mode < 3; ++mode) {  // f32, f16, int8
      const bool f16 = mode == 1;
      if (f16 && !(b.f16 && has_f16)) continue;
      if (mode == 2 && !b.int8) continue;
      const kernels::MatmulTile t = parse_tile(ts_);
      kernels::KernelOptions ko;
      ko.matmul_tile_n = t.bn, ko.matmul_tile_t = t.bt, ko.matmul_reg_n = t.rn, ko.matmul_reg_t = t.rt;
      ko.matmul_tiled = 1;  // also on software adapters (as the auto variants)
      ko.matmul_tiled_f16 = f16;
      ko.matmul_int8 = mode == 2 ? 1 : 0;
      kernels::OpContext o{*ctx, pipes, rec, ko};
      try {
        kernels::matmul_tile(o, f16);
      } catch (const Error& e) {
        fmt::print(stderr, "skipping tile {}: {}\n", ts_, e.what());
        continue;
      }
      vs.push_back({"tiled " + t.str() + (f16 ? " f16" : mode == 2 ? " int8" : ""), ko});
    }
  }
  fmt::print(stderr, "matmul ({}) on {} ({}); rate = 2 N K T / time; peak {} TFLOP/s\n", b.type, ctx->info().name,
             ts ? "timestamps" : "wall clock of submit + wait", b.peak_tflops);
  nlohmann::json results = nlohmann::json::array();
  for (uint32_t T : b.tokens) {
    std::vector<double> layer_us(vs.size(), 0.0);
    double layer_flop = 0;
    for (const Shape& sh : shapes) {
      const uint32_t K = sh.K, N = sh.N;
      auto blocks = random_blocks(type, K, N);
      auto W = kernels::upload_weight(*ctx, kernels::pack_weight(type, blocks.data(), K, N, b.q6k_packed), "w");
      std::vector<float> xv(size_t(T) * K);
      std::mt19937 g(3);
      std::normal_distribution<float> nd(0.0f, 1.0f);
      for (auto& v : xv) v = nd(g);
      gpu::Buffer x(*ctx, xv.size() * 4, gpu::BufferKind::Storage, "x");
      x.write(*ctx, 0, xv.data(), xv.size() * 4);
      gpu::Buffer y(*ctx, size_t(T) * N * 4, gpu::BufferKind::Storage, "y");
      const double flop = 2.0 * N * K * T;
      layer_flop += flop;
      for (size_t vi = 0; vi < vs.size(); ++vi) {
        kernels::OpContext o{*ctx, pipes, rec, vs[vi].ko};
        std::vector<double> us, qus;  // qus: the int8 variant's quantize_q8 dispatch
        float sink = 0;
        for (uint32_t r = 0; r <= b.reps; ++r) {
          rec.begin();
          kernels::matmul(o, W, {x, 0}, K, {y, 0}, N, T, false);
          rec.read_after(y, 0, 4);
          const auto t0 = clk::now();
          rec.submit(&sink);
          const double wall = std::chrono::duration<double, std::micro>(clk::now() - t0).count();
          double gpu = 0;
          for (const auto& k : rec.last_profile()) gpu += k.us;
          if (r > 0) us.push_back(ts ? gpu : wall);  // r = 0: warm-up (pipeline creation)
          if (r > 0 && ts && rec.last_profile().size() == 2) qus.push_back(rec.last_profile().front().us);
        }
        std::sort(us.begin(), us.end());
        std::sort(qus.begin(), qus.end());
        const double med = us[us.size() / 2], gflops = flop / med / 1e3;
        layer_us[vi] += med;
        std::string name = vs[vi].name;
        if (name.rfind("tiled auto", 0) == 0 && !kernels::matmul_coop_used(o, W))
          name += " " + kernels::matmul_tile(o, kernels::matmul_tiled_uses_f16(o), N, T).str();
        fmt::print(stderr, "  T={:<5} N={:<5} K={:<5} {:<26} {:>9.1f} us  {:>9.1f} GFLOP/s  {:>5.1f}% of peak\n", T, N, K,
                   name, med, gflops, 100.0 * gflops / (b.peak_tflops * 1e3));
        results.push_back({{"T", T}, {"N", N}, {"K", K}, {"variant", name}, {"median_us", med},
                           {"min_us", us.front()}, {"max_us", us.back()}, {"gflops", gflops},
                           {"peak_fraction", gflops / (b.peak_tflops * 1e3)}});
        if (!qus.empty()) results.back()["quantize_us"] = qus[qus.size() / 2];
      }
    }
    fmt::print(stderr, "  T={} all {} shapes (sum):\n", T, shapes.size());
    for (size_t vi = 0; vi < vs.size(); ++vi) {
      const double gflops = layer_flop / layer_us[vi] / 1e3;
      fmt::print(stderr, "    {:<26} {:>9.1f} us  {:>9.1f} GFLOP/s  {:>5.1f}% of peak\n", vs[vi].name, layer_us[vi],
                 gflops, 100.0 * gflops / (b.peak_tflops * 1e3));
      results.push_back({{"T", T}, {"shapes", "all"}, {"variant", vs[vi].name}, {"median_us", layer_us[vi]},
                         {"gflops", gflops}, {"peak_fraction", gflops / (b.peak_tflops * 1e3)}});
    }
  }
  nlohmann::json j = {{"benchmark", "matmul"}, {"adapter", ctx->info().name}, {"type", b.type}, {"q6k_packed", b.q6k_packed},
                      {"timing", ts ? "timestamps" : "wall_clock_submit_wait"}, {"reps", b.reps},
                      {"peak_tflops", b.peak_tflops}, {"results", results}};
  print_or_write_json(b.json_path, j.dump(1));
  return 0;
}

}  // namespace

std::function<int()> add_bench_matmul(CLI::App& app) {
  CLI::App* bench = bench_subcommand(app);
  auto b = std::make_shared<MatmulBenchOpts>();
  auto* cmd = bench->add_subcommand("matmul", "time the matmul op alone for prefill shapes: per-row vs tiled kernel, GFLOP/s");
  add_device_options(cmd, b->dev);
  cmd->add_option("--shapes", b->shapes, "N:K weight shapes (default: SmolLM2-135M's 960:576,576:576,3072:576,576:1536)")
      ->delimiter(',');
  cmd->add_option("--tokens", b->tokens, "token counts T, 1..65536 (default 512,4096)")->delimiter(',')->transform(integer(1, 65536));
  cmd->add_option("--tiles", b->tiles, "tiled-kernel tiles BNxBT/RNxRT to try (default: 8 tiles from 32x32/4x4 to 128x64/8x4)")
      ->delimiter(',');
  cmd->add_option("--type", b->type, "weight type: f32 f16 bf16 q4_0 q4_1 q8_0 q4_K q6_K (default q4_1)");
  cmd->add_flag("--per-row,!--no-per-row", b->per_row, "also time the per-row kernel (default on)");
  cmd->add_flag("--coop", b->coop,
                "also time the cooperative-matrix kernel (--matmul-coop; the device is asked for cooperative matrices)");
  cmd->add_option("--coop-tiles", b->coop_tiles, "with --coop: BNxBT tiles (default 64x64,128x64,64x128,128x128,32x64)")
      ->delimiter(',');
  cmd->add_flag("--q6k-packed,!--no-q6k-packed", b->q6k_packed,
                 kQ6kPackedHelp);
  cmd->add_flag("--f16", b->f16, "also time each tile's f16 variant (needs shader-f16)");
  cmd->add_flag("--int8", b->int8, "also time the int8 variant (--matmul-int8: quantize_q8 + dot4I8Packed) of the auto tile and each tile");
  cmd->add_option("--reps", b->reps, "measured repetitions after one warm-up, 1..100000 (default 5)")->transform(integer(1, 100000));
  cmd->add_option("--min-wgs", b->min_wgs, "KernelOptions::matmul_tiled_min_workgroups of the auto variants (default 264)")
      ->transform(integer(0, 1 << 20));
  cmd->add_option("--peak-tflops", b->peak_tflops, "FLOP rate the shares are of, in (0, 1e6] (default 67: H200 fp32 FMA)")
      ->transform(real(0, 1e6, true));
  add_json_option(cmd, b->json_path);
  return [=]() -> int { return *cmd ? run_matmul_bench(*b) : -1; };
}

namespace {

struct MatvecBenchOpts {
  DeviceArgs dev;  // --adapter, --shader-checks, --shader-loop-bounding
  // Default shapes: an LFM2-1.2B layer (gate+up 16384:2048, down 2048:8192, conv in_proj 6144:2048,
  // out_proj 2048:2048) and its 65536-row output head.
  std::vector<std::string> shapes = {"16384:2048", "2048:8192", "6144:2048", "2048:2048", "65536:2048"};
  std::vector<std::string> types = {"q4_K"};
  std::vector<std::string> variants = {"0/0/0"};
  std::vector<std::string> prologues = {"none"};
  std::vector<uint32_t> tokens = {1};
  uint32_t reps = 5;
  uint32_t burst = 32;
  bool q6k_packed = false;  // as MatmulBenchOpts
  std::string json_path;
};

struct MatvecVariant {
  uint32_t rows = 0, rpt = 0, lanes = 0;
  std::string flags;  // "+nomagic" ... as given
  bool nomagic = false, int8 = false, tree = false;
  std::string str() const { return fmt::format("{}/{}/{}{}", rows, rpt, lanes, flags); }
};

MatvecVariant parse_matvec_variant(const std::string& s) {
  MatvecVariant v;
  int used = 0;
  if (std::sscanf(s.c_str(), "%u/%u/%u%n", &v.rows, &v.rpt, &v.lanes, &used) != 3 || v.rows > 64 || v.rpt > 4 ||
      v.lanes > 256)
    throw Error("bench matvec: variant '" + s + "' is not ROWS/RPT/LANES[+nomagic][+int8][+tree] (0 = default; rows <= 64, rpt <= 4, "
                "lanes <= 256)");
  v.flags = s.substr(size_t(used));
  for (size_t i = 0; i < v.flags.size();) {
    const size_t j = v.flags.find('+', i + 1);
    const std::string f = v.flags.substr(i, j == std::string::npos ? std::string::npos : j - i);
    if (f == "+nomagic") v.nomagic = true;
    else if (f == "+int8") v.int8 = true;
    else if (f == "+tree") v.tree = true;
    else throw Error("bench matvec: variant '" + s + "': unknown option '" + f + "' (known: +nomagic, +int8, +tree)");
    i = j == std::string::npos ? v.flags.size() : j;
  }
  return v;
}

int run_matvec_bench(const MatvecBenchOpts& b) {
  struct Shape { uint32_t N, K; };
  std::vector<Shape> shapes;
  for (const auto& s : b.shapes) {
    Shape sh{};
    char extra = 0;
    if (std::sscanf(s.c_str(), "%u:%u%c", &sh.N, &sh.K, &extra) != 2 || !sh.N || !sh.K || sh.N > 262144 || sh.K > 65536)
      throw Error("bench matvec: shape '" + s + "' is not N:K with N in 1..262144 and K in 1..65536");
    shapes.push_back(sh);
  }
  std::vector<DType> types;
  for (const auto& t : b.types) types.push_back(parse_type(t));
  std::vector<MatvecVariant> vars;
  for (const auto& v : b.variants) vars.push_back(parse_matvec_variant(v));
  for (const auto& p : b.prologues)
    if (p != "none" && p != "norm" && p != "silu") throw Error("bench matvec: prologue '" + p + "' is not none, norm or silu");
  auto ctx = bench_context(b.dev);
  gpu::PipelineCache pipes(*ctx);
  gpu::Recorder rec(*ctx);
  // The meter: each submission is a burst of `burst` dispatches of ONE variant, timed by
  // timestamps at the start and end of the submission's commands (Recorder::set_step_gpu_time);
  // one dispatch = the span / burst. The dispatches all write y, so they run one after the other
  // with a barrier between them, as the matrix-vector products of a decode step do (each waits for
  // its input). Per-dispatch timestamps inside one pass were not trustworthy for this: on the H200
  // they gave the same shape 24 and 110 us in two calls. Variants take turns submission by
  // submission, in a rotated order each round, so that all see the same clocks and load.
  rec.set_step_gpu_time(true);
  rec.set_traffic_log(true);
  fmt::print(stderr, "bench matvec on {}: measuring copy bandwidth...\n", ctx->info().name);
  const double copy = kernels::measure_bandwidth(*ctx).copy_GBps();
  fmt::print(stderr, "copy bandwidth {:.0f} GB/s; one dispatch = submission span / {} (encoder timestamps where the "
             "adapter has them, else wall clock of submit + wait)\n", copy, b.burst);
  fmt::print(stderr, "  {:<5} {:<2} {:>6} {:>6} {:<6} {:<18} {:<9} {:>9} {:>9} {:>7}\n", "type", "T", "N", "K", "pro",
             "rows/rpt/ln+opts", "(chosen)", "us", "GB/s", "% copy");
  nlohmann::json results = nlohmann::json::array();
  for (DType type : types) {
    for (const Shape& sh : shapes) {
      const uint32_t K = sh.K, N = sh.N;
      if (K % dtype_block_elems(type)) {
        fmt::print(stderr, "  skipping {} {}:{}: K is not a multiple of {}\n", dtype_name(type), N, K, dtype_block_elems(type));
        continue;
      }
      // Several copies of the weight, used in turn, so that a dispatch never finds its matrix in
      // the L2 cache (50 MB on the H200) as a decode step never does: >= 256 MB in all.
      auto blocks = random_blocks(type, K, N);
      const auto packed = kernels::pack_weight(type, blocks.data(), K, N, b.q6k_packed);
      const uint64_t wbytes = uint64_t(packed.words.size()) * 4;
      const uint32_t copies = uint32_t(std::clamp<uint64_t>((256ull << 20) / wbytes + 1, 1, 64));
      std::vector<kernels::GpuWeight> Ws;
      for (uint32_t c = 0; c < copies; ++c) Ws.push_back(kernels::upload_weight(*ctx, packed, "w"));
      const uint32_t Tmax = *std::max_element(b.tokens.begin(), b.tokens.end());
      std::vector<float> xv(size_t(Tmax) * 2 * K);
      std::mt19937 g(3);
      std::normal_distribution<float> nd(0.0f, 1.0f);
      for (auto& v : xv) v = nd(g);
      gpu::Buffer x(*ctx, xv.size() * 4, gpu::BufferKind::Storage, "x");
      x.write(*ctx, 0, xv.data(), xv.size() * 4);
      std::vector<float> nwv(K, 1.0f);
      gpu::Buffer nw(*ctx, size_t(K) * 4, gpu::BufferKind::Storage, "norm_w");
      nw.write(*ctx, 0, nwv.data(), nwv.size() * 4);
      gpu::Buffer y(*ctx, size_t(Tmax) * N * 4, gpu::BufferKind::Storage, "y");
      for (uint32_t T : b.tokens) {
        for (const auto& pro : b.prologues) {
          // The variants that apply, interleaved: every submission records a burst of dispatches of
          // each variant in turn, so that all of them see the same clocks and the same load.
          struct Live { MatvecVariant v; kernels::KernelOptions ko; std::string chosen; std::vector<double> us; };
          std::vector<Live> live;
          for (const MatvecVariant& v : vars) {
            kernels::KernelOptions ko;
            ko.matvec_subgroup = 1;
            ko.matvec_rows_per_workgroup = v.rows, ko.matvec_rows_per_thread = v.rpt, ko.matvec_lanes = v.lanes;
            ko.dequant_magic = !v.nomagic;
            ko.matvec_int8 = v.int8;
            ko.matvec_subgroup_ops = !v.tree;
            kernels::OpContext o{*ctx, pipes, rec, ko};
            try {
              const kernels::MatvecShape c = kernels::matvec_shape(o, Ws.front());
              live.push_back({v, ko, fmt::format("{}/{}/{}", c.rows, c.rows_per_thread, c.lanes), {}});
            } catch (const Error& e) {
              fmt::print(stderr, "  skipping {}: {}\n", v.str(), e.what());
            }
          }
          uint64_t bytes = 0;
          float sink = 0;
          uint32_t wi = 0;
          bool timestamps = true;
          for (uint32_t r = 0; r <= b.reps; ++r) {  // r = 0: warm-up (pipeline creation, clock ramp)
            for (size_t li = 0; li < live.size(); ++li) {
              auto& l = live[(li + r) % live.size()];
              kernels::OpContext o{*ctx, pipes, rec, l.ko};
              rec.begin();
              for (uint32_t i = 0; i < b.burst; ++i) {
                const kernels::GpuWeight& W = Ws[wi++ % copies];
                if (pro == "norm") kernels::matmul_norm(o, W, {x, 0}, K, nw, 1e-5f, {y, 0}, N, T, false);
                else if (pro == "silu") kernels::matmul_silu(o, W, x, 0, K, 2 * K, {y, 0}, N, T, false);
                else kernels::matmul(o, W, {x, 0}, K, {y, 0}, N, T, false);
              }
              rec.read_after(y, 0, 4);
              const auto t0 = std::chrono::steady_clock::now();
              rec.submit(&sink);
              const double wall = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
              if (!bytes && !rec.last_dispatches().empty()) bytes = rec.last_dispatches().front().traffic.total();
              if (r == 0) continue;
              const double gpu = rec.last_step_timing().gpu_us;
              if (gpu < 0) timestamps = false;
              l.us.push_back((gpu >= 0 ? gpu : wall) / b.burst);
            }
          }
          if (!std::isfinite(sink)) throw Error("bench matvec: non-finite output");
          for (auto& l : live) {
            auto& us = l.us;
            std::sort(us.begin(), us.end());
            const double med = us[us.size() / 2], gbs = double(bytes) / med / 1e3;
            fmt::print(stderr, "  {:<5} {:<2} {:>6} {:>6} {:<6} {:<18} {:<9} {:>9.2f} {:>9.1f} {:>6.1f}%{}\n",
                       dtype_name(type), T, N, K, pro, l.v.str(), l.chosen, med, gbs, 100.0 * gbs / copy,
                       timestamps ? "" : " (wall clock)");
            results.push_back({{"type", dtype_name(type)}, {"q6k_packed", b.q6k_packed}, {"T", T}, {"N", N}, {"K", K}, {"prologue", pro},
                               {"variant", l.v.str()}, {"chosen", l.chosen}, {"bytes", bytes}, {"median_us", med},
                               {"min_us", us.front()}, {"max_us", us.back()}, {"GBps", gbs},
                               {"copy_fraction", gbs / copy}, {"weight_copies", copies},
                               {"timing", timestamps ? "encoder_timestamps" : "wall_clock_submit_wait"}});
          }
        }
      }
    }
  }
  nlohmann::json j = {{"benchmark", "matvec"}, {"adapter", ctx->info().name}, {"copy_GBps", copy},
                      {"burst", b.burst}, {"reps", b.reps}, {"results", results}};
  print_or_write_json(b.json_path, j.dump(1));
  return 0;
}

}  // namespace

std::function<int()> add_bench_matvec(CLI::App& app) {
  CLI::App* bench = bench_subcommand(app);
  auto b = std::make_shared<MatvecBenchOpts>();
  auto* cmd = bench->add_subcommand("matvec", "time the decode matrix-vector kernel alone per launch shape: GB/s and share of copy bandwidth");
  add_device_options(cmd, b->dev);
  cmd->add_option("--shapes", b->shapes, "N:K weight shapes (default: an LFM2-1.2B layer and its output head)")->delimiter(',');
  cmd->add_option("--types", b->types, "weight types: f32 f16 bf16 q4_0 q4_1 q8_0 q4_K q6_K (default q4_K)")->delimiter(',');
  cmd->add_option("--variants", b->variants, "launch shapes ROWS/RPT/LANES, 0 = the by-shape default, optionally +nomagic "
                  "(--no-dequant-magic), +int8 (--matvec-int8) and +tree (--no-matvec-subgroup-ops: the workgroup-memory "
                  "reduction, so LANES may be below the subgroup size) (default 0/0/0)")
      ->delimiter(',');
  cmd->add_option("--prologues", b->prologues, "none, norm (fused RMSNorm), silu (fused SiLU gate) (default none)")
      ->delimiter(',');
  cmd->add_flag("--q6k-packed,!--no-q6k-packed", b->q6k_packed,
                 kQ6kPackedHelp);
  cmd->add_option("--tokens", b->tokens, "token counts T, 1..8 (default 1)")->delimiter(',')->transform(integer(1, 8));
  cmd->add_option("--reps", b->reps, "measured rounds (each: one submission of --burst dispatches per variant, variants in "
                  "a rotated order, weight copies used round-robin) after one warm-up round, 1..100000 (default 5)")
      ->transform(integer(1, 100000));
  cmd->add_option("--burst", b->burst, "dispatches per submission (one dispatch = the submission's GPU span / burst), "
                  "1..4096 (default 32)")->transform(integer(1, 4096));
  add_json_option(cmd, b->json_path);
  return [=]() -> int { return *cmd ? run_matvec_bench(*b) : -1; };
}

}  // namespace wgllm::cli
