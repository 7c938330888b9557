// `wgllm bench`: measures the product configuration (the same loader, defaults and flags as
// `wgllm run`), with a pre-flight of who else uses the GPU, raw samples in JSON, and a Markdown
// table.
//   wgllm bench [-m M] [--prompt-lengths 512,4096] [--gen 256] [--reps 3] [--json F] [--md F]
//   wgllm bench --traffic          per-kernel declared bytes of one decode step (+ GPU times), and
//                                  the measured copy bandwidth each kernel's GB/s is a fraction of
//   wgllm bench --prefill-profile  per-kernel GPU time of each prompt's prefill (every chunk forward,
//                                  timestamps around every dispatch), after the timed runs
//   wgllm bench ab --a "ARGS" --b "ARGS" [--b-bin PATH] --metric decode_tok_s
//                                  A/B in separate processes: two control arms + candidate,
//                                  interleaved; B/A with bootstrap CI vs the measured noise band
//   wgllm bench synthetic --work N  a fixed CPU workload (noise-meter self-tests)
#include "bench.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <algorithm>
#include <fstream>
#include <map>
#include <iostream>
#include <thread>

#include <nlohmann/json.hpp>

#include "bench/ab.h"
#include "bench/preflight.h"
#include "bench/stats.h"
#include "core/error.h"
#include "gpu/context.h"
#include "kernels/bandwidth_probe.h"
#include "options.h"
#include "runtime/decode_pipeline.h"
#include "validate.h"

namespace wgllm::cli {
namespace {

using clk = std::chrono::steady_clock;
double ms_since(clk::time_point t) { return std::chrono::duration<double, std::milli>(clk::now() - t).count(); }

struct BenchOpts {
  CommonOptions common;
  std::vector<uint32_t> prompt_lengths = {512};
  uint32_t gen = 128, reps = 3;
  std::string json_path, md_path;
  bool allow_busy = false, traffic = false;
  bool prefill_profile = false;  // after the timed runs of a prompt: one profiled prefill (prefill_profile_report)
  uint32_t bw_mib = 0;  // copy-bandwidth probe buffer (MiB); 0: 256 on hardware, 16 on software adapters
  double planted_slowdown = 0;  // non-product: busy-wait this fraction of each step (harness self-test)
  bool step_gpu_times = false;  // non-product: GPU execution time of every decode step (gpu::StepTiming)
  std::string repeat_kernel;    // non-product: dispatches of this label recorded twice (marginal cost)
};

/// Flags that differ from the product defaults (what `wgllm run` uses); empty = product config.
/// Every switch of the table (kernels/switches.def) at a non-default value counts, unless the table
/// declares it product-neutral.
std::vector<std::string> non_product(const BenchOpts& b) {
  const CommonOptions d;
  const CommonOptions& o = b.common;
  std::vector<std::string> r;
  if (o.backend != d.backend) r.push_back("--backend " + o.backend);
  for (std::string& f : non_default_switches(o)) r.push_back(std::move(f));
  if (b.planted_slowdown > 0) r.push_back("--planted-slowdown");
  if (b.step_gpu_times) r.push_back("--step-gpu-times");
  if (!b.repeat_kernel.empty()) r.push_back("--repeat-kernel");
  return r;
}

std::vector<int32_t> prompt_tokens(const Tokenizer& tok, uint32_t n) {
  // Public-domain text from the setup cache (Moby-Dick), repeated if needed, cut to n tokens.
  std::string path = default_model_path();
  path = path.substr(0, path.rfind("/models/")) + "/text/package/moby-dick/data/data.txt";
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  if (text.empty()) text = "The quick brown fox jumps over the lazy dog. ";
  std::vector<int32_t> ids = tok.encode(text.substr(0, std::min<size_t>(text.size(), size_t(n) * 8 + 64)));
  while (ids.size() < n) ids.insert(ids.end(), ids.begin(), ids.end());
  ids.resize(n);
  return ids;
}

void spin_for(double ms) {
  const auto t = clk::now();
  while (ms_since(t) < ms) {
  }
}

/// The copy-bandwidth probe on its own Context (same adapter as the model; the process shares one device, another with --matmul-coop), as JSON.
nlohmann::json copy_bandwidth(const BenchOpts& b) {
  gpu::ContextOptions co;
  co.adapter_index = b.common.adapter;
  auto ctx = gpu::Context::create(co);
  kernels::BandwidthOptions o;
  o.bytes = uint64_t(b.bw_mib ? b.bw_mib : (ctx->info().is_software() ? 16 : 256)) << 20;
  const auto r = kernels::measure_bandwidth(*ctx, o);
  auto fig = [](const kernels::BandwidthFigure& f) { return nlohmann::json{{"best_GBps", f.best_GBps}, {"median_GBps", f.median_GBps}}; };
  return {{"copy_GBps", r.copy_GBps()}, {"bytes", r.bytes}, {"repeats", r.repeats},
          {"timing_copy", r.copy_timestamps ? "timestamps" : "wall_clock"},
          {"timing_kernels", r.kernel_timestamps ? "timestamps" : "wall_clock"},
          {"copy_engine", fig(r.copy_engine)}, {"copy_kernel_vec4", fig(r.copy_kernel)}, {"read_kernel_vec4", fig(r.read_kernel)}};
}

// Per decode step: where the wall time went (gpu::StepTiming), kept for the last repetition so that
// slow steps can be told apart: a slow GPU execution (gpu_us, with --step-gpu-times) or a slow host
// side (record, submit, or the wait beyond the GPU time). Pipelined (--decode-pipeline), a step's
// record and submit are those of the NEXT step, made while this one runs on the GPU, and wait is
// the time blocked on this step's token; with GPU times, overlap_us = record + submit + gpu - wall
// is the host work hidden behind GPU execution (about 0 when the host and the GPU take turns).
struct StepSplit {
  bool pipelined = false;
  std::vector<double> record, submit, wait, gpu;
  void add(const gpu::StepTiming& t) {
    record.push_back(t.record_us);
    submit.push_back(t.submit_us);
    wait.push_back(t.wait_us);
    gpu.push_back(t.gpu_us);
  }
  nlohmann::json json(const std::vector<double>& lat_ms) const {
    nlohmann::json j = {{"pipelined", pipelined}, {"record_us", record}, {"submit_us", submit}, {"wait_us", wait}};
    if (!gpu.empty() && gpu.front() >= 0) {
      j["gpu_us"] = gpu;
      std::vector<double> ov;
      for (size_t i = 0; i < gpu.size() && i < lat_ms.size(); ++i) ov.push_back(record[i] + submit[i] + gpu[i] - 1e3 * lat_ms[i]);
      if (!ov.empty()) j["overlap_us_p50"] = bench::quantile(ov, 0.5);
    }
    // Steps slower than 1.5x the median step, and how many of them have a slow GPU execution.
    if (!lat_ms.empty()) {
      const double m = bench::median(lat_ms);
      const double mg = j.contains("gpu_us") ? bench::median(gpu) : 0;
      uint32_t slow = 0, slow_gpu = 0;
      for (size_t i = 0; i < lat_ms.size(); ++i)
        if (lat_ms[i] > 1.5 * m) {
          ++slow;
          if (mg > 0 && i < gpu.size() && gpu[i] > 1.5 * mg) ++slow_gpu;
        }
      j["slow_steps"] = slow;
      if (mg > 0) j["slow_steps_with_slow_gpu"] = slow_gpu;
      j["record_us_p50"] = bench::quantile(record, 0.5);
      j["submit_us_p50"] = bench::quantile(submit, 0.5);
      j["wait_us_p50"] = bench::quantile(wait, 0.5);
      if (mg > 0) j["gpu_us_p50"] = mg;
    }
    return j;
  }
};

nlohmann::json traffic_report(Loaded& l) {
  // One decode step at position 256, with timestamps when the device has them.
  auto seq = l.model->new_sequence();
  auto ids = prompt_tokens(*l.tok, 256);
  l.model->set_profiling(true);
  int32_t t = l.model->forward_argmax(*seq, ids);
  l.model->forward_argmax(*seq, std::span<const int32_t>(&t, 1));
  auto ds = l.model->last_dispatches();
  l.model->set_profiling(false);
  nlohmann::json j;
  std::map<std::string, std::pair<gpu::TrafficBytes, double>> by_kernel;
  gpu::TrafficBytes total;
  double total_us = 0;
  for (auto& d : ds) {
    auto& e = by_kernel[d.label];
    e.first += d.traffic;
    total += d.traffic;
    e.second += d.us;
    total_us += d.us;
    if (!d.declared) j["undeclared"].push_back(d.label);
  }
  for (auto& [k, v] : by_kernel) {
    nlohmann::json row = {{"kernel", k}, {"bytes", v.first.total()}, {"gpu_us", v.second}};
    for (size_t c = 0; c < size_t(gpu::Traffic::kCount); ++c)
      row[gpu::traffic_name(gpu::Traffic(c))] = v.first.read[c] + v.first.written[c];
    if (v.second > 0) row["achieved_GBps"] = double(v.first.total()) / (v.second * 1e3);
    j["kernels"].push_back(row);
  }
  for (size_t c = 0; c < size_t(gpu::Traffic::kCount); ++c)
    j["total"][gpu::traffic_name(gpu::Traffic(c))] = total.read[c] + total.written[c];
  j["total"]["all"] = total.total();
  j["dispatches"] = ds.size();
  j["gpu_us"] = total_us;
  return j;
}

// Dispatches of one decode step (T = 1) at position 256, by kernel label: the metric of the decode
// fusions (issue 11: each dispatch costs ~5-10 us on the H200 whatever its bytes). "per_layer" is
// (step - embedding and output-head dispatches) / n_layers; hybrids mix layer kinds, so their
// per-label counts ("by_kernel") tell the per-kind figures (a label counted n_layers-of-that-kind times).
nlohmann::json dispatch_report(Loaded& l) {
  auto seq = l.model->new_sequence();
  auto ids = prompt_tokens(*l.tok, 256);
  int32_t t = l.model->forward_argmax(*seq, ids);
  l.model->set_profiling(true);  // keeps the step's dispatch labels (and GPU times where available)
  l.model->forward_argmax(*seq, std::span<const int32_t>(&t, 1));
  auto ds = l.model->last_dispatches();
  l.model->set_profiling(false);
  std::map<std::string, uint32_t> by;
  for (auto& d : ds) by[d.label]++;
  uint32_t outside = 0;
  for (const char* k : {"embed", "output_norm", "output", "argmax"})
    if (auto it = by.find(k); it != by.end()) outside += it->second;
  const uint32_t L = std::max<uint32_t>(1, l.model->config().n_layers);
  return {{"per_step", ds.size()}, {"outside_layers", outside},
          {"per_layer", double(ds.size() - outside) / L}, {"n_layers", L}, {"by_kernel", by}};
}

}  // namespace

double add_kernel_times(KernelTotals& by, const std::vector<gpu::KernelTime>& profile) {
  double total = 0;
  for (const auto& k : profile) {
    auto& e = by[k.label];
    e.first += k.us;
    e.second += 1;
    total += k.us;
  }
  return total;
}

namespace {
// Per-kernel GPU time of one prefill of `ids` (issue 11/13: which kernels the TTFT is made of). The
// prompt goes in as the product's does (forwards of at most prefill_chunk tokens, the output head and
// argmax on the last one only), each forward profiled (timestamps around every dispatch, so the sum
// exceeds an unprofiled TTFT by the timestamp cost); per label: summed us and dispatches over all
// chunks. Not part of the timed runs.
nlohmann::json prefill_profile_report(Loaded& l, const std::vector<int32_t>& ids) {
  auto seq = l.model->new_sequence(uint32_t(ids.size()) + 8);
  const size_t chunk = std::max<uint32_t>(1, l.model->prefill_chunk());
  KernelTotals by;
  double total = 0;
  uint32_t forwards = 0, untimed = 0;
  l.model->set_profiling(true);
  struct ProfilingOff {  // also when a forward throws
    Model& m;
    ~ProfilingOff() { m.set_profiling(false); }
  } off{*l.model};
  for (size_t i = 0; i < ids.size(); i += chunk, ++forwards) {
    const std::span<const int32_t> part(ids.data() + i, std::min(chunk, ids.size() - i));
    if (i + chunk < ids.size()) l.model->forward(*seq, part, nullptr);  // no head, as the product's earlier chunks
    else l.model->forward_argmax(*seq, part);
    // The recorder times a bounded number of dispatches per submission: say so if some went untimed.
    untimed += uint32_t(l.model->last_dispatches().size() - std::min(l.model->last_dispatches().size(), l.model->last_profile().size()));
    total += add_kernel_times(by, l.model->last_profile());
  }
  nlohmann::json kernels = nlohmann::json::array();
  for (auto& [k, v] : by) kernels.push_back({{"kernel", k}, {"gpu_us", v.first}, {"dispatches", v.second}});
  std::sort(kernels.begin(), kernels.end(), [](const nlohmann::json& x, const nlohmann::json& y) { return x["gpu_us"].get<double>() > y["gpu_us"].get<double>(); });
  fmt::print(stderr, "prefill profile: {} tokens in {} forward(s) of <= {}: GPU {:.1f} us{}\n", ids.size(), forwards, chunk, total,
             untimed ? fmt::format(" ({} dispatches untimed: the figures are partial)", untimed) : "");
  for (const auto& k : kernels)
    fmt::print(stderr, "  {:<28} x{:<5} {:>11.1f} us {:>5.1f}%\n", k["kernel"].get<std::string>(), k["dispatches"].get<uint32_t>(),
               k["gpu_us"].get<double>(), total > 0 ? 100 * k["gpu_us"].get<double>() / total : 0.0);
  return {{"tokens", ids.size()}, {"forwards", forwards}, {"chunk", chunk}, {"gpu_us", total}, {"untimed_dispatches", untimed},
          {"kernels", kernels}};
}

int run_bench(BenchOpts& b) {
  bench::Preflight pf = bench::preflight();
  if (pf.gpu_busy && !b.allow_busy) {
    fmt::print(stderr, "wgllm bench: refusing to measure: {} (use --allow-busy to measure anyway)\n", pf.busy_reason);
    return 3;
  }
  const auto np = non_product(b);
  const std::string label = np.empty() ? "product" : "NON-PRODUCT";
  uint32_t need_ctx = b.gen + 8;
  for (auto p : b.prompt_lengths) need_ctx = std::max(need_ctx, p + b.gen + 8);
  if (b.traffic) need_ctx = std::max(need_ctx, 256u + 2);  // traffic_report(): 256 prompt tokens + one step
  b.common.context = std::max(b.common.context, need_ctx);
  Loaded l = load(b.common);
  // The model caps the context at its trained length: refuse a run that would not fit, before
  // measuring anything.
  if (const uint32_t have = l.model->new_sequence(need_ctx)->context_length(); have < need_ctx)
    throw Error(fmt::format("bench: a prompt of {} tokens plus {} generated needs {} positions; the model holds {} "
                            "(lower --prompt-lengths or --gen)", *std::max_element(b.prompt_lengths.begin(), b.prompt_lengths.end()),
                            b.gen, need_ctx, have));
  nlohmann::json out;
  out["preflight"] = pf.info;
  out["configuration"] = label;
  out["non_product_flags"] = np;
  out["model"] = l.src->path;
  out["backend"] = l.model->backend_name();
  out["load_ms"] = l.load_ms;
  auto mem = l.model->memory();
  if (l.model->backend_name().rfind("webgpu", 0) == 0) out["decode_dispatches"] = dispatch_report(l);
  if (b.traffic) {
    out["traffic_decode_step"] = traffic_report(l);
    if (l.model->backend_name().rfind("webgpu", 0) == 0) {
      auto& t = out["traffic_decode_step"];
      t["copy_bandwidth"] = copy_bandwidth(b);
      const double bw = t["copy_bandwidth"]["copy_GBps"].get<double>();
      for (auto& k : t["kernels"])
        if (k.contains("achieved_GBps")) k["fraction_of_copy_bw"] = k["achieved_GBps"].get<double>() / bw;
      if (const double us = t["gpu_us"].get<double>(); us > 0) {
        t["achieved_GBps"] = double(t["total"]["all"].get<uint64_t>()) / (us * 1e3);
        t["fraction_of_copy_bw"] = t["achieved_GBps"].get<double>() / bw;
      }
    }
  }
  l.model->set_step_gpu_time(b.step_gpu_times);
  l.model->set_repeat_kernel(b.repeat_kernel);
  nlohmann::json rows = nlohmann::json::array();
  for (uint32_t P : b.prompt_lengths) {
    auto ids = prompt_tokens(*l.tok, P);
    std::vector<double> ttft, decode_tps, lat_all;
    for (uint32_t rep = 0; rep <= b.reps; ++rep) {  // rep 0 is warm-up (pipeline creation), not recorded
      auto seq = l.model->new_sequence(P + b.gen + 8);
      GreedyDecoder dec(*l.model, *seq);  // --decode-pipeline: step i+1 submitted before step i's token is read
      auto t0 = clk::now();
      int32_t t = dec.next(ids, false);
      const double tt = ms_since(t0);
      if (b.planted_slowdown > 0) spin_for(tt * b.planted_slowdown);
      std::vector<double> lat;
      StepSplit split;
      split.pipelined = dec.pipelined();
      const auto d0 = clk::now();
      for (uint32_t i = 1; i < b.gen; ++i) {
        auto s0 = clk::now();
        t = dec.next(std::span<const int32_t>(&t, 1), i + 1 < b.gen);
        double dt = ms_since(s0);
        split.add(l.model->last_step_timing());
        if (b.planted_slowdown > 0) {
          spin_for(dt * b.planted_slowdown);
          dt = ms_since(s0);
        }
        lat.push_back(dt);
      }
      const double dms = ms_since(d0);
      if (rep == 0) continue;
      ttft.push_back(tt * (1 + b.planted_slowdown));
      decode_tps.push_back((b.gen - 1) / (dms / 1000.0));
      lat_all.insert(lat_all.end(), lat.begin(), lat.end());
      if (rep == b.reps) {
        auto sm = seq->memory();
        mem.kv_cache = sm.kv_cache;
        mem.recurrent = sm.recurrent;
        rows.push_back({{"n_prompt", P}, {"n_gen", b.gen}, {"ttft_ms", ttft}, {"decode_tok_s", decode_tps},
                        {"decode_latency_ms_last_rep", lat}, {"decode_step_split_us_last_rep", split.json(lat)}});
      }
    }
    auto& r = rows.back();
    r["ttft_ms_median"] = bench::median(ttft);
    r["prefill_tok_s_median"] = P / (bench::median(ttft) / 1000.0);
    r["decode_tok_s_median"] = bench::median(decode_tps);
    r["decode_latency_ms_p50"] = bench::quantile(lat_all, 0.5);
    r["decode_latency_ms_p90"] = bench::quantile(lat_all, 0.9);
    r["decode_latency_ms_p99"] = bench::quantile(lat_all, 0.99);
    if (b.prefill_profile && l.model->backend_name().rfind("webgpu", 0) == 0) r["prefill_profile"] = prefill_profile_report(l, ids);
  }
  out["runs"] = rows;
  out["memory_bytes"] = {{"weights", mem.weights}, {"kv_cache", mem.kv_cache}, {"recurrent", mem.recurrent}, {"scratch", mem.scratch}};
  // Markdown table
  std::string md = fmt::format("| config | backend | prompt | TTFT ms (median) | prefill tok/s | decode tok/s | p50 ms | p90 ms | p99 ms |\n|---|---|---|---|---|---|---|---|---|\n");
  for (auto& r : rows)
    md += fmt::format("| {} | {} | {} | {:.1f} | {:.0f} | {:.1f} | {:.2f} | {:.2f} | {:.2f} |\n", label, l.model->backend_name(),
                      r["n_prompt"].get<uint32_t>(), r["ttft_ms_median"].get<double>(), r["prefill_tok_s_median"].get<double>(),
                      r["decode_tok_s_median"].get<double>(), r["decode_latency_ms_p50"].get<double>(),
                      r["decode_latency_ms_p90"].get<double>(), r["decode_latency_ms_p99"].get<double>());
  for (auto& r : rows) {
    const auto& sp = r["decode_step_split_us_last_rep"];
    if (!sp.contains("wait_us_p50")) continue;
    md += fmt::format("\nprompt {}: decode step p50 record {:.0f} us, submit {:.0f} us, wait {:.0f} us{}{}; {} of {} steps slower than "
                      "1.5x the median{}\n",
                      r["n_prompt"].get<uint32_t>(), sp["record_us_p50"].get<double>(), sp["submit_us_p50"].get<double>(),
                      sp["wait_us_p50"].get<double>(),
                      sp.contains("gpu_us_p50") ? fmt::format(" (GPU {:.0f} us)", sp["gpu_us_p50"].get<double>()) : "",
                      sp.value("pipelined", false)
                          ? fmt::format(" [pipelined: record/submit of the next step while this one runs{}]",
                                        sp.contains("overlap_us_p50") ? fmt::format("; {:.0f} us of host work hidden behind the GPU",
                                                                                    sp["overlap_us_p50"].get<double>())
                                                                      : "")
                      : sp.contains("overlap_us_p50") ? fmt::format(" [{:.0f} us of host work overlapped]", sp["overlap_us_p50"].get<double>())
                                                      : "",
                      sp["slow_steps"].get<uint32_t>(), sp["record_us"].size(),
                      sp.contains("slow_steps_with_slow_gpu")
                          ? fmt::format(", {} of them with a slow GPU execution", sp["slow_steps_with_slow_gpu"].get<uint32_t>())
                          : "");
  }
  if (out.contains("decode_dispatches")) {
    auto& d = out["decode_dispatches"];
    md += fmt::format("\ndispatches per decode step: {} ({:.2f} per layer over {} layers + {} outside layers)\n",
                      d["per_step"].get<uint32_t>(), d["per_layer"].get<double>(), d["n_layers"].get<uint32_t>(),
                      d["outside_layers"].get<uint32_t>());
  }
  if (b.traffic) {
    auto& t = out["traffic_decode_step"];
    if (t.contains("copy_bandwidth")) {
      auto& c = t["copy_bandwidth"];
      md += fmt::format("\ncopy bandwidth {:.0f} GB/s (best of {}, {} MiB: copy engine {:.0f}, copy_vec4 {:.0f}, read_vec4 {:.0f} GB/s; "
                        "timing {}/{}); whole decode step {:.0f} GB/s = {:.0f}% of it\n",
                        c["copy_GBps"].get<double>(), c["repeats"].get<uint32_t>(), c["bytes"].get<uint64_t>() >> 20,
                        c["copy_engine"]["best_GBps"].get<double>(), c["copy_kernel_vec4"]["best_GBps"].get<double>(),
                        c["read_kernel_vec4"]["best_GBps"].get<double>(), c["timing_copy"].get<std::string>(),
                        c["timing_kernels"].get<std::string>(), t.value("achieved_GBps", 0.0), 100 * t.value("fraction_of_copy_bw", 0.0));
    }
    md += "\n| kernel | bytes/step | weights | activations | kv_cache | logits | GPU us | GB/s | % of copy BW |\n|---|---|---|---|---|---|---|---|---|\n";
    for (auto& k : t["kernels"])
      md += fmt::format("| {} | {} | {} | {} | {} | {} | {:.1f} | {:.1f} | {:.1f} |\n", k["kernel"].get<std::string>(), k["bytes"].get<uint64_t>(),
                        k["weights"].get<uint64_t>(), k["activations"].get<uint64_t>(), k["kv_cache"].get<uint64_t>(),
                        k["logits"].get<uint64_t>(), k["gpu_us"].get<double>(), k.value("achieved_GBps", 0.0),
                        100 * k.value("fraction_of_copy_bw", 0.0));
  }
  std::cerr << md;
  if (!b.md_path.empty()) write_file(b.md_path, md);
  if (!b.json_path.empty()) write_file(b.json_path, out.dump(1) + "\n");
  // Last stdout line: a compact summary object (what `bench ab` reads): ttft_ms / decode_tok_s /
  // decode_ms_p50 of the first prompt length, and ttft_ms_p<P> / decode_tok_s_p<P> / decode_ms_p50_p<P>
  // of every length P (so that `bench ab --metric ttft_ms_p4096` compares the 4096-token prompts of a
  // multi-length run). decode_ms_p50 is the median decode step over every step of every repetition:
  // a finer meter than decode_tok_s (a rate over whole runs, moved by a few slow steps).
  nlohmann::json summary = {{"configuration", label}};
  if (!rows.empty()) {
    summary["ttft_ms"] = rows[0]["ttft_ms_median"];
    summary["decode_tok_s"] = rows[0]["decode_tok_s_median"];
    if (rows[0].contains("decode_latency_ms_p50")) summary["decode_ms_p50"] = rows[0]["decode_latency_ms_p50"];
  }
  for (const auto& r : rows) {
    const std::string p = std::to_string(r["n_prompt"].get<uint32_t>());
    summary["ttft_ms_p" + p] = r["ttft_ms_median"];
    summary["decode_tok_s_p" + p] = r["decode_tok_s_median"];
    if (r.contains("decode_latency_ms_p50")) summary["decode_ms_p50_p" + p] = r["decode_latency_ms_p50"];
  }
  if (out.contains("decode_dispatches")) summary["decode_dispatches_per_layer"] = out["decode_dispatches"]["per_layer"];
  std::cout << summary.dump() << std::endl;
  return 0;
}

int run_synthetic(double work, bool constant) {
  // A fixed amount of integer work, timed by process CPU time: a load with known relative cost.
  timespec a{}, c{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
  uint64_t x = 88172645463325252ull;
  const uint64_t n = uint64_t(work * 1e6);
  for (uint64_t i = 0; i < n; ++i) x ^= x << 13, x ^= x >> 7, x ^= x << 17;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c);
  const double ms = (c.tv_sec - a.tv_sec) * 1e3 + (c.tv_nsec - a.tv_nsec) / 1e6;
  std::cout << nlohmann::json{{"time_ms", constant ? 100.0 : ms}, {"checksum", x & 0xffff}}.dump() << std::endl;
  return 0;
}

}  // namespace

void add_device_options(CLI::App* cmd, DeviceArgs& d) {
  cmd->add_option("--adapter", d.adapter, "adapter index (wgllm devices); default: first hardware adapter")
      ->transform(integer(-1, 1023));
  cmd->add_flag("--shader-checks,!--no-shader-checks", d.shader_checks,
                "naga's bounds checks on every array access in the kernels (default off)");
  cmd->add_flag("--shader-loop-bounding,!--no-shader-loop-bounding", d.loop_bounding,
                "naga's loop bounding (a counter that ends any loop after 2^64 iterations) in the kernels (default off)");
}

std::unique_ptr<gpu::Context> bench_context(const DeviceArgs& d, bool coop_matrix) {
  gpu::ContextOptions co;
  co.want_coop_matrix = coop_matrix;
  co.adapter_index = d.adapter;
  co.shader_runtime_checks = d.shader_checks;
  co.shader_loop_bounding = d.loop_bounding;
  return gpu::Context::create(co);
}

void add_json_option(CLI::App* cmd, std::string& path, const char* what) {
  cmd->add_option("--json", path, std::string("write ") + what + " as JSON here (default: stdout)")->check(OutputFile);
}

CLI::App* bench_subcommand(CLI::App& app) {
  try {
    return app.get_subcommand("bench");
  } catch (const CLI::OptionNotFound&) {
    return app.add_subcommand("bench", "benchmarks");
  }
}

std::function<int()> add_bench(CLI::App& app, const std::string& argv0) {
  auto b = std::make_shared<BenchOpts>();
  auto* cmd = app.add_subcommand("bench", "benchmark the product configuration (TTFT, decode, latency trace, traffic)");
  add_common(*cmd, b->common);
  cmd->add_option("--prompt-lengths", b->prompt_lengths, "prompt lengths in tokens, comma-separated")
      ->delimiter(',')->transform(integer(1, kMaxTokens));
  // gen >= 2: the first token comes from the prefill (TTFT); decode speed and latency are timed
  // over the other gen - 1 tokens, so a run of 0 or 1 tokens has no decode to measure.
  cmd->add_option("--gen", b->gen, "tokens generated per run, >= 2 (the first from the prefill, then gen - 1 timed decode steps)")
      ->transform(integer(2, kMaxTokens));
  cmd->add_option("--reps", b->reps, "measured repetitions (after one warm-up), 1..100000")->transform(integer(1, 100000));
  cmd->add_option("--json", b->json_path, "write results (raw samples) as JSON")->check(OutputFile);
  cmd->add_option("--md", b->md_path, "write the Markdown table")->check(OutputFile);
  cmd->add_flag("--allow-busy", b->allow_busy, "measure even if another process uses the GPU");
  cmd->add_flag("--traffic", b->traffic, "per-kernel bytes of one decode step by category (+ GPU times), vs the measured copy bandwidth");
  cmd->add_flag("--prefill-profile", b->prefill_profile,
                "after each prompt length's timed runs, one prefill with a timestamp around every dispatch: GPU time per kernel "
                "label over all its chunk forwards (JSON prefill_profile; not part of the timed figures)");
  cmd->add_option("--bw-mib", b->bw_mib, "copy-bandwidth probe buffer in MiB, 0..16384 (0: 256; 16 on software adapters)")
      ->transform(integer(0, 16384));
  cmd->add_option("--planted-slowdown", b->planted_slowdown, "NON-PRODUCT: add this fraction of busy time to each step (harness self-test)")
      ->check(real(0, 100));
  cmd->add_flag("--step-gpu-times", b->step_gpu_times,
                "NON-PRODUCT: also the GPU execution time of every decode step (two encoder timestamps per step, read with the token)");
  cmd->add_option("--repeat-kernel", b->repeat_kernel,
                  "NON-PRODUCT: record every dispatch of this kernel label (as in --traffic) twice; the change in step time "
                  "against a normal run is that kernel's marginal cost in place (outputs of accumulating kernels change)");

  auto ab = std::make_shared<bench::AbSpec>();
  auto a_args = std::make_shared<std::string>(), b_args = std::make_shared<std::string>(), b_bin = std::make_shared<std::string>();
  auto ab_json = std::make_shared<std::string>();
  auto* abc = cmd->add_subcommand("ab", "A/B comparison in separate processes with a measured noise band");
  auto a_cmd = std::make_shared<std::string>(), b_cmd = std::make_shared<std::string>();
  auto* oa = abc->add_option("--a", *a_args, "arguments of `wgllm` for arm A (control, run as two independent arms)");
  auto* ob = abc->add_option("--b", *b_args, "arguments of `wgllm` for arm B (candidate)");
  abc->add_option("--a-cmd", *a_cmd, "a whole shell command for arm A instead of --a (e.g. a peer engine wrapper)")->excludes(oa);
  abc->add_option("--b-cmd", *b_cmd, "a whole shell command for arm B instead of --b")->excludes(ob);
  abc->add_option("--b-bin", *b_bin, "binary for arm B (default: this binary)")->check(CLI::ExistingFile);
  abc->add_option("--metric", ab->metrics,
                  "JSON key(s) of the metric(s), comma-separated (wgllm bench: ttft_ms and decode_tok_s of the first "
                  "--prompt-lengths value, ttft_ms_p<P> and decode_tok_s_p<P> of each; decode_ms_p50(_p<P>): the median "
                  "decode step)")
      ->required()->delimiter(',')->check(NonEmpty);
  // >= 2: the noise band comes from the spread within and between the control arms.
  abc->add_option("--rounds", ab->rounds, "runs per control arm, 2..10000 (B runs twice as often)")->transform(integer(2, 10000));
  abc->add_option("--json", *ab_json, "write the A/B result as JSON")->check(OutputFile);

  auto work = std::make_shared<double>(50.0);
  auto constant = std::make_shared<bool>(false);
  auto* syn = cmd->add_subcommand("synthetic", "a fixed CPU workload printing {\"time_ms\": ...} (noise-meter self-tests)");
  syn->add_option("--work", *work, "millions of iterations, 0..10000")->check(real(0, 10000));
  syn->add_flag("--constant", *constant, "print a constant time (a broken meter, for self-tests)");

  return [=, &app]() -> int {
    if (!*cmd) return -1;
    if (*syn) return run_synthetic(*work, *constant);
    if (*abc) {
      if ((a_args->empty() && a_cmd->empty()) || (b_args->empty() && b_cmd->empty()))
        throw Error("bench ab: give --a or --a-cmd, and --b or --b-cmd");
      ab->cmd_a = a_cmd->empty() ? argv0 + " " + *a_args : *a_cmd;
      ab->cmd_b = !b_cmd->empty() ? *b_cmd : (b_bin->empty() ? argv0 : *b_bin) + " " + *b_args;
      auto r = bench::run_ab(*ab);
      auto j = r.to_json(*ab);
      if (!ab_json->empty()) write_file(*ab_json, j.dump(1) + "\n");
      nlohmann::json summary;
      for (auto& m : r.metrics) {
        std::cerr << m.name << ": " << m.verdict.text << "\n";
        summary[m.name] = {{"broken", m.verdict.broken}, {"detected", m.verdict.detected},
                           {"noise", m.verdict.noise}, {"ratio", m.verdict.ratio.mid}};
      }
      if (r.metrics.size() == 1) summary = summary[r.metrics[0].name];
      std::cout << summary.dump() << std::endl;
      return 0;
    }
    return run_bench(*b);
  };
}

}  // namespace wgllm::cli
