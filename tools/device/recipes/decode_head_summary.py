#!/usr/bin/env python3
"""Usage: python3 tools/device/recipes/decode_head_summary.py DIR (a results folder with commit.txt and raw/, raw/ =
the unpacked results.tgz of one call of tools/device/recipes/decode_head.sh). Writes DIR/summary.json (the shape of
../shared/RESULTS.md) from raw/:
  null_<model>           `bench ab` B = A = product (null control)
  argmax1_<model>        `bench ab` A = --argmax-workgroups 1 (one workgroup), B = product (wgllm = B)
  q6kwide_<model>        `bench ab` A = --no-q6k-packed (Q6_K widened), B = packed (explicit since 2026-12-06,
                         the product before; wgllm = B)
  cand<N>_<model>        `bench ab` A = product, B = candidate N of raw/cands.txt (wgllm = B)
  vs_cuda_<model>        `bench ab` A = wgllm product, B = llama.cpp CUDA's llama-bench
  vs_vulkan_<model>      the same against llama.cpp Vulkan's
  ttft4096_vs_{cuda,vulkan}_<model> the same, TTFT of a 4096-token prompt
  matvec<J>_<type>_<N>x<K> `bench matvec` launch-shape sweep: per variant its time per dispatch and fraction of copy
                         bandwidth
  multiturn_<model>      `bench multi-turn --turns 30` (session TTFT turn 30 / turn 2)
  multiturn_profile_<model>  the same with --profile --session-only: GPU time of turn 30's prefill forward and its
                         attention's, minus turn 2's (the growth the session TTFT gains)
  multiturn_c<I>_<model> the same (session-only) with the flags in multiturn_c<I>_<model>.flags (TURNS_CANDS)
  checks_{on,off}_<model>_<n>_r<k>  `bench` after an n-token prompt with / without --shader-checks (naga's
                         Restrict bounds checks; the browser's robustness measured natively): decode tok/s
  traffic_checks_{on,off}_<model>_<n>  one `bench --traffic` of each
  checkc<I>_{on,off}_<model>_<n>  part checks_cand: `bench` with the flags of checkc<I>.flags, with / without the checks
  traffic_<model>.json   `bench --traffic`: TTFT, decode tok/s, dispatches per step, fraction of copy bandwidth
  traffic_{base,this}_<model>_r<k>  the same for a baseline build (named in the call folder's BASE.txt) and this one
  diverge_q6k_<model>    `bench diverge` product against the other Q6_K layout: prompts whose greedy text departs
  ttft_q6kwide_<model>   `bench ab` A = --no-q6k-packed, B = packed, TTFT of a 512-token prompt (wgllm = B)
  repeat_<model>_<label> `bench` with --repeat-kernel <label> (product: without, before and after): the label's
                         marginal cost per decode step = its p50 step minus the mean of the two product runs'
  sweep<J>_<label>_<model>_c<I>[_rep]  the same for setting I of raw/sweeps.txt (c0 = product), each with its own
                         run without --repeat-kernel; also that run's p50 step (single runs, no interval)
  prefill_{off,on}_<model>  `bench --prefill-profile` without / with --shader-checks: per prompt length the TTFT and
                         each kernel label's GPU time over the whole prefill (timestamps around every dispatch)
  tcand<I>_<model>_<n>   `bench ab` TTFT of an n-token prompt, A = product, B = candidate I of raw/cands.txt
                         ("BASE|MORE": A = product + BASE, peer named so; B = A + MORE)
  flash_sweep_<cache>    `bench attention` (prefill op alone) of a turn's new tokens over <cache> keys: per variant
                         (kernel, split, --attn-flash-split-tiles) its median time and share of the FMA peak
  flash_long_<i>_<T>_<cache>  the same at T tokens over cache keys for the shape in flash_long_<i>_<T>_<cache>.flags
  attn_checks_<arm>_<n>  `bench attention --tokens 1` after n keys with naga's checks of arm (none, bounds, loops, both)
  turnsab<I>_<model>     `bench ab` of session-only multi-turn runs, A = product, B = the flags in turnsab<I>_<model>.flags
  gdn_stage_t<n>[_checks]  `bench gdn` (the DeltaNet chunked prefill of one layer alone) of n tokens: per variant (chunk,
                         scan columns, --gdn-scan-stage, --gdn-prep-stage) each kernel's median GPU time and whether its
                         bits equal the chunk's first variant (_checks: with --shader-checks)
  node_sw<i>.json        node_bench.sh STAGE=switches: the browser build under Dawn in Node with the kernel switches of
                         sw<i>.switches, against native_sw<i>.json (native_checks_sw<i>.json: native with --shader-checks)
  greedy_<name>.json     web/node/bench.mjs --greedy-only: the browser build's greedy ids against the native CLI's
  node_result_r<k>.json  rounds of the browser build (Dawn in Node) against native_bench_r<k>.json, the model named in
                         MODEL.txt
  node_v<i>.json         node_bench.sh STAGE=robust: the browser build under Dawn in Node with the Dawn toggles in
                         node_v<i>.options, against native_{before,after}.json
Every file is a synthetic-weights model (tools/synth)."""
import glob
import os
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from summarize import ab_rows, bench_rows, diverge_row, multiturn_rows, web_vs_native_rows, write_summary  # noqa: E402 (tools/device/summarize.py)
import json  # noqa: E402

here = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
raw = here / "raw"
MODELS = {"qwen25-1.5b": "Qwen2.5-Coder-1.5B shape (synthetic)", "smollm2": "SmolLM2-135M shape (synthetic)",
          "lfm2-1.2b": "LFM2-1.2B shape (synthetic)", "qwen35-0.8b": "Qwen3.5-0.8B shape (synthetic)",
          "qwen35-2b": "Qwen3.5-2B shape (synthetic)", "gemma3-270m": "Gemma 3 270M shape (synthetic)"}


# B of the Q6_K layout A/Bs: the packed layout (the product until 2026-12-06, explicit since).
PACKED = "--q6k-packed (Q6_K at 6.56 bits per weight; the product until 2026-12-06)"


def table(raw, name):
    """raw/<name> as {key: value} from its "key: value" lines (cands.txt, sweeps.txt), {} when absent."""
    f = raw / name
    return dict(line.partition(": ")[::2] for line in f.read_text().splitlines()) if f.exists() else {}


def load(raw, stem):
    """The `bench` JSON raw/<stem>.json, None when missing."""
    f = raw / (stem + ".json")
    return json.load(open(f)) if f.exists() else None


def sidecar(raw, name):
    """The stripped text of raw/<name> (a run's flags or toggles written beside it), "?" when absent."""
    f = raw / name
    return f.read_text().strip() if f.exists() else "?"


def decode_row(path, model, context, config):
    """The median decode tok/s of the `bench` JSON at path as a row of its own (one run, no interval)."""
    return {"model": model, "weights": "synthetic", "metric": "decode_tok_s", "context": context,
            "wgllm": json.load(open(path))["runs"][0].get("decode_tok_s_median"), "ratio_ci": None, "config": config,
            "source": os.path.basename(path)}


def p50(raw, stem):
    """The p50 decode step (ms) of a plain `bench` JSON, None when missing."""
    j = load(raw, stem)
    return j["runs"][0]["decode_latency_ms_p50"] if j else None


def marginal_row(raw, model, label, rep_stem, base_ms, config, base_what):
    """The marginal cost of `label` (the --repeat-kernel run rep_stem minus base_ms), [] when either is missing."""
    rep = load(raw, rep_stem)
    if rep is None or base_ms is None:
        return []
    n = rep.get("decode_dispatches", {}).get("by_kernel", {}).get(label)
    return [{"model": MODELS[model], "weights": "synthetic", "metric": "kernel_marginal_us_per_step",
             "context": f"`bench --repeat-kernel {label}` ({n} dispatches per step recorded twice): p50 decode step "
                        f"after a 512-token prompt (256 steps x 3 repetitions) minus {base_what}",
             "wgllm": round((rep["runs"][0]["decode_latency_ms_p50"] - base_ms) * 1000.0, 1), "ratio_ci": None,
             "config": config, "label": label, "source": rep_stem + ".json"}]


def matvec_rows(path):
    """`bench matvec` (one launch shape's kernel alone): one row per variant, its median time per dispatch
    and its fraction of the measured copy bandwidth."""
    j = json.load(open(path))
    rows = []
    for r in j["results"]:
        what = f"{r['type']} {r['N']} x {r['K']} matrix-vector kernel (random weights), T {r['T']}"
        ctx = (f"`bench matvec` --variants {r['variant']} (chosen ROWS/RPT/LANES {r['chosen']}), bursts of {j['burst']} "
               f"dispatches, {j['reps']} interleaved rounds, {r['timing']}")
        for metric, v in (("matvec_us", r["median_us"]), ("matvec_copy_bw_fraction", r["copy_fraction"])):
            rows.append({"model": what, "weights": "synthetic", "metric": metric, "context": ctx,
                         "wgllm": round(v, 4), "ratio_ci": None, "config": r["variant"],
                         "source": os.path.basename(path)})
    return rows


def profile_rows(path, model):
    """`bench multi-turn --profile`: GPU time of the last turn's prefill forward and of its attention, and the
    growth of each from turn 2 (what the session TTFT ratio is made of)."""
    turns = json.load(open(path))["turns"]
    t2 = next((t for t in turns if t["turn"] == 2), None)
    tl = turns[-1]
    rows = []
    if t2 is None or "profile_gpu_us" not in tl:
        return rows
    for k in ("profile_gpu_us", "profile_attention_us"):
        rows.append({"model": model, "weights": "synthetic", "metric": k.replace("profile_", "turn_prefill_") + "_growth",
                     "context": f"`bench multi-turn --profile`: turn {tl['turn']} minus turn 2 ({tl[k]:.1f} - {t2[k]:.1f} us; "
                                f"{tl['new_tokens']} new tokens at position {tl['prompt_tokens'] - tl['new_tokens']})",
                     "wgllm": round(tl[k] - t2[k], 1), "ratio_ci": None, "config": "product",
                     "source": os.path.basename(path)})
    return rows


def node_model(raw):
    """(model, weights) of a node_bench.sh call folder: SYNTH=1 runs write LABEL.txt (synthetic SmolLM2-shaped
    weights); without it the real SmolLM2 Q4_1 file."""
    if (raw / "LABEL.txt").exists():
        return MODELS["smollm2"], "synthetic"
    return "SmolLM2-135M-Instruct-Q4_1", "real"


def node_robust_rows(raw):
    """node_bench.sh STAGE=robust: the browser build under Dawn in Node (not a browser) with Dawn device toggles
    (node_v<i>.json, its toggles in node_v<i>.options; "" = Dawn's defaults), against native `wgllm bench` before
    and after (peer_value: the mean of the two native medians)."""
    nat = {}
    for n in ("native_before", "native_after"):
        j = load(raw, n)
        for r in (j or {}).get("runs", []):
            nat.setdefault(r["n_prompt"], []).append(r)
    rows = []
    model, weights = node_model(raw)
    for f in sorted(glob.glob(str(raw / "node_v*.json")), key=lambda x: int(re.search(r"node_v(\d+)", x).group(1))):
        stem = os.path.basename(f)[:-5]
        opts = sidecar(raw, stem + ".options")
        j = json.load(open(f))
        for r in (j.get("bench") or {}).get("rows", []):  # (a failed run has only its error)
            n = r["n_prompt"]
            for metric, key in (("decode_tok_s", "decode_tok_s_median"), ("ttft_ms", "ttft_ms_median")):
                peer = [x[key] for x in nat.get(n, [])]
                rows.append({"model": model, "weights": weights, "metric": metric,
                             "context": f"Dawn in Node, not a browser: the browser build, prompt {n}, {r['n_gen']} steps x "
                                        f"{j.get('reps', '?')} repetitions, one run; Dawn toggles: "
                                        f"{opts or 'none (Dawn defaults)'}",
                             "wgllm": r[key], "peer": "native", "peer_value": sum(peer) / len(peer) if peer else None,
                             "ratio_ci": None, "config": "product" if not opts else f"Dawn {opts} (diagnostic)",
                             "label": "Dawn in Node, not a browser", "source": stem + ".json"})
    return rows


# attn_checks arms: the naga checks each was compiled with.
ARMS = {"none": "product (no naga checks)", "bounds": "--shader-checks", "loops": "--shader-loop-bounding",
        "both": "--shader-checks --shader-loop-bounding"}


def attn_checks_rows(path, arm, n):
    """decode_head.sh part attn_checks: `bench attention --tokens 1` (the decode attention op alone, SmolLM2's layer
    shape) after n keys compiled with the naga checks of `arm`: one row per kernel variant, its median GPU time."""
    j = json.load(open(path))
    rows = []
    for v in j["variants"]:
        name = (("tiled kernel" if v["attn_tiled"] else "per-row kernel") if not v["attn_decode_gqa"] else "GQA decode kernel" +
                (", late V" if v["attn_decode_late_v"] else "") +
                (f", {v['attn_decode_key_lanes']} key lanes" if v["attn_decode_key_lanes"] else ""))
        split = (f"{v['decode_split_len']}-key splits (+ combine when more than one)" if v["decode_split_len"] else
                 f"key split on (target {v['split_target']} workgroups)" if v["attn_split"] and v["split_target"] else
                 "key split on" if v["attn_split"] else "unsplit")
        rows.append({"model": f"attention op, {j['heads']} query / {j['kv_heads']} KV heads, head dim {j['head_dim']} "
                              "(SmolLM2's layer; random Q and cache)", "weights": "synthetic", "metric": "attention_op_us",
                     "context": f"`bench attention --tokens 1 --cache {j['cache']}` ({n} keys): {name}, {split}; median "
                                f"of {j['reps']} ({j['timing']})",
                     "wgllm": round(v["median_us"], 2), "ratio_ci": None, "config": ARMS[arm],
                     "source": os.path.basename(path)})
    return rows


def gdn_stage_rows(path, n, checks):
    """decode_head.sh part gdn_stage: `bench gdn` of n tokens, one row per (variant, kernel): its median GPU time."""
    j = json.load(open(path))
    rows = []
    for v in j["variants"]:
        cfg = " ".join(x for x in (f"--gdn-chunk {v['gdn_chunk']} --gdn-scan-cols {v['gdn_scan_cols']}",
                                   "--gdn-scan-stage" if v.get("gdn_scan_stage") else "--no-gdn-scan-stage",
                                   ("--gdn-scan-prefetch" if v.get("gdn_scan_prefetch") else "--no-gdn-scan-prefetch")
                                   if v.get("gdn_scan_stage") else "",
                                   "--gdn-prep-stage" if v.get("gdn_prep_stage") else "--no-gdn-prep-stage",
                                   "--shader-checks" if checks else "") if x)
        for k, us in v["kernels_median_us"].items():
            rows.append({"model": f"Gated DeltaNet layer alone, {j['nk']} key / {j['nv']} value heads, DK {j['dk']} DV "
                                  f"{j['dv']} (Qwen3.5-0.8B's linear-attention layer; random operands)",
                         "weights": "synthetic", "metric": f"{k}_gpu_us",
                         "context": f"`bench gdn --tokens {n}`: median of {j['reps']} ({j['timing']}); bits "
                                    f"{'equal' if v['same_bits_as_first_of_chunk'] else 'DIFFER from'} the chunk's first "
                                    "variant",
                         "wgllm": round(us, 1), "ratio_ci": None, "config": cfg, "source": os.path.basename(path)})
    return rows


def prefill_rows(path, model, on):
    """decode_head.sh part prefill: per prompt length the median TTFT and each kernel label's GPU time in one profiled
    prefill of the same prompt (every chunk forward; timestamps around every dispatch inflate the sum)."""
    j = json.load(open(path))
    cfg = "--shader-checks (naga Restrict bounds checks)" if on == "on" else "product"
    rows = []
    for r in j["runs"]:
        n = r["n_prompt"]
        rows.append({"model": model, "weights": "synthetic", "metric": "ttft_ms", "context": f"TTFT of a {n}-token prompt, "
                     f"median of {len(r['ttft_ms'])} runs (one process)", "wgllm": round(r["ttft_ms_median"], 3),
                     "ratio_ci": None, "config": cfg, "source": os.path.basename(path)})
        pp = r.get("prefill_profile")
        if not pp:
            continue
        for k in pp["kernels"]:
            rows.append({"model": model, "weights": "synthetic", "metric": "prefill_kernel_gpu_us",
                         "context": f"GPU time of kernel label {k['kernel']} ({k['dispatches']} dispatches) in one profiled "
                                    f"prefill of {n} tokens ({pp['forwards']} forwards of <= {pp['chunk']}; "
                                    f"{100 * k['gpu_us'] / pp['gpu_us']:.1f}% of its {pp['gpu_us'] / 1e3:.1f} ms)",
                         "wgllm": round(k["gpu_us"], 1), "ratio_ci": None, "config": cfg, "source": os.path.basename(path)})
    return rows


def attention_op_rows(path, what):
    """decode_head.sh part flash_sweep: `bench attention` (the prefill attention op alone, random Q and cache), one
    row per variant: its median time, context naming the kernel, split and tile setting and the FMA-peak share."""
    j = json.load(open(path))
    rows = []
    for v in j["variants"]:
        kern = "+".join(v["kernels"])
        flash = v.get("attn_flash")
        split = (f"key split on (target {v['split_target']} workgroups" +
                 ((f", >= {v['attn_flash_split_tiles']} tiles per split" if v.get("attn_flash_split_tiles") else ", adaptive tiles")
                  if flash else "") + ")" if v["attn_split"] else "unsplit")
        form = ((f", query rows in registers over {v['attn_flash_lanes']} lanes x {v['attn_flash_lanes_threads']} threads"
                 + (f", {v['attn_flash_lanes_rows']} rows per thread" if v.get("attn_flash_lanes_rows") else "")
                 + (f", {v['attn_flash_lanes_keys']}-key softmax groups" if v.get("attn_flash_lanes_keys") else "")
                 + " (attention_flash_sg)" if v.get("attn_flash_lanes") else
                 ", generated tile" if v.get("attn_flash_unroll") else ", loop form") +
                (", prefetch" if v.get("attn_flash_prefetch") else "") if flash else "")
        wide = flash and v.get("attn_flash_wide_heads", j["head_dim"] > 128)
        rows.append({"model": f"attention op, {j['heads']} query / {j['kv_heads']} KV heads, head dim {j['head_dim']} ({what}; "
                              "random Q and cache)", "weights": "synthetic", "metric": "attention_op_us",
                     "context": f"`bench attention --tokens {j['tokens']} --cache {j['cache']}`: {kern}, {split}{form}; median of "
                                f"{j['reps']} ({j['timing']}); {100 * v['peak_fraction']:.1f}% of {j['peak_tflops']:g} TFLOP/s",
                     "wgllm": round(v["median_us"], 2), "ratio_ci": None,
                     "config": "--attn-flash-wide-heads (op-level settings)" if wide else "op-level settings",
                     "source": os.path.basename(path)})
    return rows


def node_switch_rows(raw):
    """node_bench.sh STAGE=switches: per kernel switch set i (sw<i>.switches), the browser build under Dawn in Node
    (node_sw<i>.json; not a browser) against native `wgllm bench` with the same set (native_sw<i>.json, one run),
    and native with it plus --shader-checks (native_checks_sw<i>.json)."""
    model, weights = node_model(raw)
    rows = []
    for f in sorted(glob.glob(str(raw / "node_sw*.json")), key=lambda x: int(re.search(r"node_sw(\d+)", x).group(1))):
        i = re.search(r"node_sw(\d+)", f).group(1)
        sw = sidecar(raw, f"sw{i}.switches")
        nat, chk = load(raw, f"native_sw{i}"), load(raw, f"native_checks_sw{i}")
        by_n = {r["n_prompt"]: r for r in (nat or {}).get("runs", [])}
        chk_n = {r["n_prompt"]: r for r in (chk or {}).get("runs", [])}
        j = json.load(open(f))
        if "bench" not in j:  # a failed run: web/node/bench.mjs wrote its error instead (no figure)
            print(f"{f}: no bench rows (switches '{sw}'): {j.get('error', '?')}", file=sys.stderr)
            continue
        for r in j["bench"]["rows"]:
            n = r["n_prompt"]
            for metric, key in (("decode_tok_s", "decode_tok_s_median"), ("ttft_ms", "ttft_ms_median")):
                rows.append({"model": model, "weights": weights, "metric": metric,
                             "context": f"Dawn in Node, not a browser: the browser build with CreateEngine switches "
                                        f"'{sw}' (set {i}), prompt {n}, {r['n_gen']} steps x {j.get('reps', '?')} repetitions, one "
                                        "run, Dawn's default toggles; peer: native `wgllm bench` with the same switches",
                             "wgllm": r[key], "peer": "native", "peer_value": by_n.get(n, {}).get(key),
                             "ratio_ci": None, "config": sw or "product", "label": "Dawn in Node, not a browser",
                             "source": f"node_sw{i}.json"})
            if n in chk_n:
                rows.append({"model": model, "weights": weights, "metric": "decode_tok_s",
                             "context": f"native `wgllm bench` with '{sw}' (set {i}) and --shader-checks (naga's bounds "
                                        f"checks), prompt {n}, one run; peer: the same without the checks",
                             "wgllm": chk_n[n]["decode_tok_s_median"], "peer": "default",
                             "peer_value": by_n.get(n, {}).get("decode_tok_s_median"), "ratio_ci": None,
                             "config": " ".join(x for x in (sw, "--shader-checks") if x),
                             "source": f"native_checks_sw{i}.json"})
    return rows


# Synthetic files by their name in the recipes (greedy_<name>.json), and the trained fixtures.
GREEDY_MODELS = {**MODELS, "qwen35": "trained Qwen3.5 hybrid (tests/fixtures/qwen35_trained, bf16)",
                 "lfm2": "trained LFM2 hybrid (tests/fixtures/lfm2_trained, bf16)"}


def greedy_rows(raw):
    """web/node/bench.mjs --greedy-only runs (greedy_<name>.json): the browser build's greedy ids under Dawn in Node
    against the native CLI's (`wgllm run`, its ids in the same JSON): the equal prefix as a fraction; config: the
    CreateEngine switches (the native run had the same)."""
    rows = []
    for f in sorted(glob.glob(str(raw / "greedy_*.json"))):
        stem = os.path.basename(f)[:-5]
        j = json.load(open(f))
        g = j.get("greedy") or {}
        ids, nat = g.get("token_ids"), g.get("native_token_ids")
        if ids is None or nat is None:
            continue
        n = min(len(ids), len(nat))
        same = next((i for i in range(n) if ids[i] != nat[i]), n)
        name = stem[len("greedy_"):]
        name = max((k for k in GREEDY_MODELS if name == k or name.startswith(k + "_")), key=len, default=name)
        model = GREEDY_MODELS.get(name, name)
        switches = " ".join((j.get("load") or {}).get("switches") or [])
        dep = g.get("departure")  # bench.mjs with a native run printing margins (wgllm run --print-margins)
        where = (f"; there the native top-1 leads its top-2 by {dep['native_margin']:.3g} logits and the browser build "
                 f"took {'that second choice' if dep.get('browser_took_native_second') else 'another token'}" +
                 ("" if dep.get("native_replay_argmax_equal") else " (the native logits replay did not reproduce its own ids: "
                  "margin unreliable)") if dep and dep.get("native_margin") is not None else "")
        rows.append({"model": model, "weights": "real" if name in ("qwen35", "lfm2") else "synthetic",
                     "metric": "greedy_prefix_equal_fraction",
                     "context": f"Dawn in Node, not a browser: {len(nat)} greedy tokens of the bench prompt, browser build vs "
                                f"native CLI on the same GPU (first difference at token {same}{where})" if same < len(nat) else
                                f"Dawn in Node, not a browser: {len(nat)} greedy tokens of the bench prompt, browser build vs "
                                "native CLI on the same GPU (all equal)",
                     "wgllm": same / max(1, len(nat)), "peer": "native", "peer_value": 1.0, "ratio_ci": None,
                     "config": switches or "product", "label": "Dawn in Node, not a browser", "source": stem + ".json"})
    return rows


def rows_of(raw, tag):
    """The summary rows of one call's raw files (tag: appended to each row's context and source)."""
    cands = table(raw, "cands.txt")
    CTX = "decode after a 512-token prompt, 256 steps x 3 repetitions per run, 2 interleaved rounds"
    rows = []
    for f in sorted(glob.glob(str(raw / "*.json"))):
        stem = os.path.basename(f)[:-5]
        m = re.fullmatch(r"vs_(cuda|vulkan)_(.+)", stem)
        if m:
            rows += ab_rows(f, MODELS[m.group(2)], "prompt 512, 128 decode steps (llama-bench -d 512)",
                            "llama.cpp-" + m.group(1), wgllm_is_b=False)
            continue
        m = re.fullmatch(r"ttft4096_vs_(cuda|vulkan)_(.+)", stem)
        if m:
            rows += ab_rows(f, MODELS[m.group(2)], "TTFT of a 4096-token prompt (llama-bench -p 4096), 2 interleaved "
                            "rounds", "llama.cpp-" + m.group(1), wgllm_is_b=False)
            continue
        if re.fullmatch(r"matvec\d+_.+", stem):
            rows += matvec_rows(f)
            continue
        m = re.fullmatch(r"multiturn_profile_(.+)", stem)
        if m:
            rows += profile_rows(f, MODELS[m.group(1)])
            continue
        m = re.fullmatch(r"multiturn_c(\d+)_(.+)", stem)
        if m:
            flags = sidecar(raw, stem + ".flags")
            rows += [dict(r, model=MODELS[m.group(2)], weights="synthetic", config=flags or "product",
                          context=r["context"] + " (session-only run)") for r in multiturn_rows(f)
                     if r["metric"] == "ttft_last_over_turn2_fraction"]
            continue
        m = re.fullmatch(r"multiturn_(.+)", stem)
        if m:
            rows += [dict(r, model=MODELS[m.group(1)], weights="synthetic") for r in multiturn_rows(f)]
            continue
        m = re.fullmatch(r"prefill_(on|off)_(.+)", stem)
        if m:
            rows += prefill_rows(f, MODELS[m.group(2)], m.group(1))
            continue
        m = re.fullmatch(r"tcand(\d+)_(.+)_(\d+)", stem)
        if m:
            i, model, n = m.groups()
            flags = cands.get(f"tcand{i}", f"tcand{i}")
            base, sep, more = flags.partition("|")  # "BASE|MORE": A = product + BASE, B = A + MORE (first |, as the recipe)
            if not sep:
                base, more = "", flags
            rows += ab_rows(f, MODELS[model], f"TTFT of a {n}-token prompt, 8 steps x 2 repetitions per run, 2 interleaved "
                            "rounds", "product" + (" " + base if base else ""), wgllm_is_b=True,
                            config=(base + " " + more) if base else more)
            continue
        m = re.fullmatch(r"flash_sweep_(\d+)", stem)
        if m:
            rows += attention_op_rows(f, "SmolLM2's layer unless FLASH_SHAPE said otherwise")
            continue
        m = re.fullmatch(r"flash_long_(\d+)_(\d+)_(\d+)", stem)
        if m:
            rows += attention_op_rows(f, "flags " + sidecar(raw, stem + ".flags"))
            continue
        m = re.fullmatch(r"turnsab(\d+)_(.+)", stem)
        if m:
            rows += ab_rows(f, MODELS[m.group(2)], "`bench multi-turn --turns 30 --session-only` (64 user + 16 reply tokens "
                            "a turn), 2 interleaved rounds", "product", wgllm_is_b=True,
                            config=sidecar(raw, stem + ".flags"))
            continue
        m = re.fullmatch(r"gdn_stage_t(\d+)(_checks)?", stem)
        if m:
            rows += gdn_stage_rows(f, m.group(1), bool(m.group(2)))
            continue
        m = re.fullmatch(r"attn_checks_(none|bounds|loops|both)_(\d+)", stem)
        if m:
            rows += attn_checks_rows(f, *m.groups())
            continue
        m = re.fullmatch(r"checkc(\d+)_(on|off)_(.+)_(\d+)", stem)
        if m:
            i, on, model, n = m.groups()
            flags = sidecar(raw, f"checkc{i}.flags")
            rows.append(decode_row(f, MODELS[model], f"`bench` decode after a {n}-token prompt, 128 steps x 2 repetitions, "
                                   f"one run, {'with --shader-checks (naga Restrict bounds checks)' if on == 'on' else 'no checks'}",
                                   " ".join(x for x in (flags or "product", "--shader-checks" if on == "on" else "") if x)))
            continue
        m = re.fullmatch(r"checks_(on|off)_(.+)_(\d+)_r(\d+)", stem)
        if m:
            on, model, n, r = m.groups()
            rows.append(decode_row(f, MODELS[model], f"`bench` decode after a {n}-token prompt, 128 steps x 2 repetitions, "
                                   f"round {r} of 2",
                                   "--shader-checks (naga Restrict bounds checks)" if on == "on" else "product (no checks)"))
            continue
        m = re.fullmatch(r"(null|argmax1|q6kwide|cand\d+)_(.+)", stem)
        if m:
            kind, model = m.groups()
            peer, config = {"null": ("product (null control)", "product"),
                            "argmax1": ("--argmax-workgroups 1 (one workgroup)", "product"),
                            "q6kwide": ("--no-q6k-packed (Q6_K widened to 10 bits per weight)", PACKED)}.get(
                                kind, ("product", cands.get(kind, kind)))
            rows += ab_rows(f, MODELS[model], CTX + ("; TTFT of the same runs" if kind == "q6kwide" else ""), peer,
                            wgllm_is_b=True, config=config)
            continue
        m = re.fullmatch(r"traffic_(base|this)_(.+)_r(\d+)", stem)
        if m:  # traffic_base: the baseline build (raw/.../BASE.txt names it) against this one
            who, model, r = m.groups()
            base = (raw / "BASE.txt").read_text().strip() if (raw / "BASE.txt").exists() else "the baseline build"
            rows += [dict(x, config=(base if who == "base" else "product"), context=x.get("context", "") +
                          f" (round {r}; {'baseline ' + base if who == 'base' else 'this build'})")
                     for x in bench_rows(f, MODELS[model])]
            continue
        m = re.fullmatch(r"traffic_checks_(on|off)_(.+)_(\d+)", stem)
        if m:
            rows += [dict(x, config="--shader-checks" if m.group(1) == "on" else "product")
                     for x in bench_rows(f, MODELS[m.group(2)])]
            continue
        m = re.fullmatch(r"traffic_(.+)", stem)
        if m:
            rows += bench_rows(f, MODELS[m.group(1)])
            continue
        m = re.fullmatch(r"diverge_q6k_(.+)", stem)
        if m:
            rows.append(diverge_row(f, MODELS[m.group(1)], "synthetic", "the other Q6_K layout"))
    for f in sorted(glob.glob(str(raw / "repeat_*.json"))):
        stem = os.path.basename(f)[:-5]
        model = next((k for k in MODELS if stem.startswith(f"repeat_{k}_")), None)
        label = stem[len(f"repeat_{model}_"):] if model else "product"
        if label.startswith("product"):
            continue
        bases = [x for x in (p50(raw, f"repeat_{model}_product"), p50(raw, f"repeat_{model}_product_2")) if x is not None]
        rows += marginal_row(raw, model, label, stem, sum(bases) / len(bases) if bases else None, "product",
                             "the mean of the product runs before and after the labels")
    sweeps = table(raw, "sweeps.txt")  # stem: its flags (the runs without --repeat-kernel, looked up below)
    for f in sorted(glob.glob(str(raw / "sweep*_c*.json"))):
        stem = os.path.basename(f)[:-5]
        m = re.fullmatch(r"sweep\d+_(.+)_c(\d+)", stem)
        model = next((k for k in MODELS if m and m.group(1).endswith("_" + k)), None)
        if model is None:
            continue
        label = m.group(1)[:-len(model) - 1]
        cfg = sweeps.get(stem, "").strip() or "product"
        rows.append({"model": MODELS[model], "weights": "synthetic", "metric": "decode_ms_p50",
                     "context": "decode after a 512-token prompt, 256 steps x 3 repetitions, one run (the base of "
                                f"the {label} marginal cost)", "wgllm": p50(raw, stem), "ratio_ci": None, "config": cfg,
                     "source": stem + ".json"})
        rows += marginal_row(raw, model, label, stem + "_rep", p50(raw, stem), cfg, "the same setting's run without it")
    for f in sorted(glob.glob(str(raw / "ttft_q6kwide_*.json"))):
        stem = os.path.basename(f)[:-5]
        rows += ab_rows(f, MODELS[stem[len("ttft_q6kwide_"):]], "TTFT of a 512-token prompt, 8 steps x 3 repetitions per "
                        "run, 2 interleaved rounds", "--no-q6k-packed (Q6_K widened to 10 bits per weight)",
                        wgllm_is_b=True, config=PACKED)
    rows += node_robust_rows(raw)
    rows += node_switch_rows(raw)
    rows += greedy_rows(raw)
    if glob.glob(str(raw / "node_result_r*.json")):  # interleaved rounds of one model (MODEL.txt: its name in MODELS)
        rows += web_vs_native_rows(str(raw), MODELS.get(sidecar(raw, "MODEL.txt"), sidecar(raw, "MODEL.txt")))
    for r in rows:
        if tag:
            r["context"] += f" ({tag})"
            r["source"] = tag.split(",")[0] + "/" + r["source"]
    return rows


if any(d.is_dir() for d in raw.iterdir()):
    # One subfolder per call (raw/callNN, its binary's commit in raw/callNN/COMMIT.txt).
    rows = []
    for d in sorted(x for x in raw.iterdir() if x.is_dir()):
        c = (d / "COMMIT.txt").read_text().strip() if (d / "COMMIT.txt").exists() else "?"
        rows += rows_of(d, f"{d.name}, binary {c}")
    gpus = sorted(raw.glob("*/gpu_before.txt"))
    if not gpus:
        sys.exit(f"{raw}: no call folder has gpu_before.txt")
    gpu_file = str(gpus[0].relative_to(raw))  # the first call's card (each call's is in its folder)
else:
    rows = rows_of(raw, "")
    gpu_file = "gpu_before.txt"
write_summary(here, rows, gpu_file)
