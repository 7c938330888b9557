#!/usr/bin/env python3
"""Writes summary.json (the shape in ../shared/RESULTS.md) for a results folder of device runs.

Reads, in DIR:
  vs_<peer>_p<P>[_g<G>].json   `wgllm bench ab` with A = wgllm (product), B = the peer (llama.cpp);
                               peer is the name after vs_ up to _p (e.g. llamacpp_cuda -> llama.cpp-cuda)
  new_vs_base_*.json           `wgllm bench ab` with A = the baseline build, B = this build
  ab_<what>.json               `wgllm bench ab` with A = a switch off, B = default (peer "default")
  wgllm_*.json, <model>.json   `wgllm bench --json` single results (figures without a counterpart)
  long_context*.json           `wgllm bench long-context --json` (sparse vs dense per context length;
                               a model file name containing "ctx<N>" is labelled synthetic context)
  multiturn_<model>.json       `wgllm bench multi-turn --json` (per-turn snapshot cost, TTFT turn 30/2)
  node_result_r<k>.json, browser_result_r<k>.json, native_bench_r<k>.json, native_run.txt,
  native_nodp_bench_r<k>.json  (native with --no-decode-pipeline, as the browser build runs: peer
                               "native --no-decode-pipeline")
                               the browser engine (web/bench_run.js: web/node/bench.mjs under Dawn in
                               Node, or bench.html) vs native `wgllm bench --json`, round k of
                               interleaved rounds (peer "native"; each row carries the result's label,
                               e.g. "Dawn in Node, not a browser"), and its greedy ids vs `wgllm run --print-ids`
  attention_*.json, matmul_*.json, dispatch_*.json
                               `wgllm bench attention|matmul|dispatch --json` (one row per kernel variant
                               and shape; a name ending in _<flag> was measured with --<flag>)
Rows: metric, wgllm, peer, peer_value, ratio_ci (wgllm/peer, 95%), noise_band, config.
Usage: python3 tools/device/summarize.py DIR --commit C --device "NVIDIA H200 (...)" [--date D]
"""
import argparse, datetime, glob, json, os, pathlib


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return (xs[n // 2] + xs[(n - 1) // 2]) / 2 if n else None


def weights_of(model):
    """RESULTS.md `weights`: files written by tools/synth (model names with "synthetic") are synthetic."""
    return "synthetic" if "synthetic" in model.lower() else "real" if "SmolLM2" in model else "trained"


def ab_rows(path, model, context, peer, wgllm_is_b, config="product"):
    j = json.load(open(path))
    rows = []
    for metric, m in j["metrics"].items():
        a, b = m["a1"] + m["a2"], m["b"]
        r = m["ratio_b_over_a"]
        if wgllm_is_b:
            w, p, ci = median(b), median(a), [r["lo"], r["hi"]]
        else:  # the interval of wgllm/peer is the inverse of B/A's
            w, p, ci = median(a), median(b), [1 / r["hi"], 1 / r["lo"]]
        rows.append({"model": model, "weights": weights_of(model), "metric": metric,
                     "context": context, "wgllm": w, "peer": peer, "peer_value": p,
                     "ratio_ci": ci, "noise_band": m["noise_band"], "config": config,
                     "broken_meter": m.get("broken", False), "source": os.path.basename(path)})
    return rows


def diverge_row(path, model, weights, peer):
    """The summary row of one `bench diverge` JSON: prompts whose greedy text departs (A = product, B =
    A with the --b switch sets), the earliest departing token in the context."""
    j = json.load(open(path))
    s = j["summary"]
    first = s.get("first_divergence_min")
    return {"model": model, "weights": weights, "metric": "prompts_diverged_count",
            "context": f"{s['prompts']} prompts x {j['gen']} greedy tokens, product (A) against B = "
                       + " ".join("--b " + b for b in j.get("b_sets", []))
                       + "; earliest departing token: " + ("none" if first is None else str(first)),
            "wgllm": s["diverged"], "peer": peer, "peer_value": 0, "ratio_ci": None,
            "config": "product", "source": os.path.basename(path)}


def ab_rows_by_stem(raw, model, table, wgllm_is_b=True):
    """ab_rows() of every `bench ab` JSON in raw whose file stem starts with a key of `table`
    ({stem prefix: (peer label, config)}; the first matching key); the context "prompt P" from a stem
    ending in _p<P>, else "prompt 512"."""
    rows = []
    for f in sorted(glob.glob(str(pathlib.Path(raw) / "*.json"))):
        stem = os.path.basename(f)[:-5]
        key = next((k for k in table if stem.startswith(k)), None)
        if key is None:
            continue
        peer, config = table[key]
        tail = stem.rpartition("_p")[2]
        rows += ab_rows(f, model, f"prompt {tail if '_p' in stem and tail.isdigit() else '512'}", peer,
                        wgllm_is_b=wgllm_is_b, config=config)
    return rows


def write_summary(here, rows, gpu_file="gpu.txt"):
    """Writes here/summary.json from rows, here/commit.txt and the folder's date (its name's first 10
    characters); the device from raw/device.txt when present (a run elsewhere, e.g. lavapipe, as `wgllm
    devices` printed it), else from raw/<gpu_file> (nvidia-smi's CSV: the driver in its second line)."""
    raw = here / "raw"
    if (raw / "device.txt").exists():
        device = (raw / "device.txt").read_text().strip()
    else:
        gpu = (raw / gpu_file).read_text().splitlines()
        # The GPU's name as nvidia-smi printed it (a call may be lent an H100 instead of the H200).
        device = (gpu[1].split(",")[0].strip() + " (" + gpu[1].split(",")[1].strip() +
                  " driver, Vulkan through wgpu-native)" if len(gpu) > 1 else "NVIDIA H200")
    json.dump({"commit": (here / "commit.txt").read_text().strip(), "date": here.name[:10], "device": device,
               "rows": rows}, open(here / "summary.json", "w"), indent=1)
    print(f"{len(rows)} rows")


def bench_rows(path, model):
    j = json.load(open(path))
    rows = []
    for r in j.get("runs", []):
        ctx = f"prompt {r.get('n_prompt', '?')}, {r.get('n_gen', '?')} steps"
        for k in ("ttft_ms_median", "decode_tok_s_median", "dispatches_per_decode_step"):
            if k in r:
                rows.append({"model": model, "weights": weights_of(model),
                             "metric": k.replace("_median", ""), "context": ctx, "wgllm": r[k],
                             "ratio_ci": None, "config": j.get("configuration", "product"),
                             "source": os.path.basename(path)})
    t = j.get("traffic_decode_step", {})
    if t.get("copy_bandwidth"):
        rows.append({"model": model, "weights": weights_of(model), "metric": "decode_step_copy_bw_fraction",
                     "context": "one decode step", "wgllm": t.get("fraction_of_copy_bw"), "ratio_ci": None,
                     "config": "product", "source": os.path.basename(path)})
    return rows


def op_config(path):
    """`product`, or `switch --FLAG` for a file named <bench>_<shape>_<flag>.json with a non-default flag."""
    tail = os.path.basename(path)[:-5].rsplit("_", 1)[-1]
    return "product" if tail.startswith("no-") or "-" not in tail else f"switch --{tail}"


def attention_label(v):
    """A `bench attention` variant: its kernel switches, then (files of 2026-12-03 on) the prefetch,
    late-V, decode key lanes, split target and flash split tiles where they are set (older files lack
    those fields)."""
    parts = [k[5:] for k in ("attn_decode_gqa", "attn_decode_late_v", "attn_flash", "attn_flash_prefetch", "attn_split",
                             "attn_tiled") if v.get(k)]
    if v.get("attn_decode_key_lanes"):
        parts.append(f"key_lanes {v['attn_decode_key_lanes']}")
    if v.get("decode_split_len"):
        parts.append(f"split_len {v['decode_split_len']}")
    if v.get("attn_flash") and v.get("attn_flash_unroll") is False:
        parts.append("loop form")
    if "attn_flash_prefetch" in v and v.get("attn_split") and v.get("split_target"):
        parts.append(f"target {v['split_target']}")
    if v.get("attn_flash") and v.get("attn_split") and v.get("attn_flash_split_tiles"):
        parts.append(f"split_tiles {v['attn_flash_split_tiles']}")
    return "+".join(parts) or "plain"


def op_rows(path, model):
    """Rows of a kernel micro-benchmark (`wgllm bench attention|matmul|dispatch --json`)."""
    j = json.load(open(path))
    src, cfg, rows = os.path.basename(path), op_config(path), []
    row = lambda metric, ctx, v: {"model": model, "weights": "synthetic", "metric": metric, "context": ctx,
                                  "wgllm": v, "ratio_ci": None, "config": cfg, "source": src}
    if j.get("benchmark") == "attention":
        for v in j["variants"]:
            rows.append(row("attention_op_us", f"T={j['tokens']}, {j['cache']} keys, {j['heads']}/{j['kv_heads']} heads "
                            f"x {j['head_dim']}, {attention_label(v)}", v["median_us"]))
    elif j.get("benchmark") == "matmul":
        for r in j["results"]:
            rows.append(row("matmul_op_us", f"{j.get('type', '')} T={r['T']} "
                            + (f"K={r['K']} N={r['N']}" if "K" in r else f"{r.get('shapes', '')} shapes (sum)")
                            + f", {r['variant']}",
                            r["median_us"]))
    elif j.get("benchmark") == "dispatch":
        for r in j["results"]:
            rows.append(row("dispatch_wall_us", f"{r['pattern']} of {j['count']}, {r['workgroups']} workgroups",
                            r["wall_us_per_dispatch"]))
    return rows


def long_context_rows(path):
    """Sparse vs dense cold prefill per context length (`wgllm bench long-context`)."""
    j = json.load(open(path))
    model = os.path.basename(j.get("model", "?"))
    synthetic = ".ctx" in model
    name = model.split(".gguf")[0]
    by = {}
    for r in j["runs"]:  # a length measured twice in one file: the later run counts (warm GPU)
        by[(r["mode"], r["context"])] = r
    rows = []
    for (mode, L), r in sorted(by.items()):
        if mode != "sparse" or ("dense", L) not in by:
            continue
        d = by[("dense", L)]
        for metric, key in (("prefill_ms", "total_ms"), ("last_chunk_ms", "last_chunk_ms")):
            rows.append({"model": name, "weights": "real" + (", synthetic context" if synthetic else ""),
                         "metric": metric, "context": f"cold prefill of {L} tokens in {r['chunk']}-token chunks",
                         "wgllm": r[key], "peer": "dense", "peer_value": d[key], "ratio_ci": None,
                         "config": f"switch --sparse-attn (block {j['sparse_block']}, top-k {j['sparse_top_k']}, "
                                   f"window {j['sparse_window']}, threshold {j['sparse_threshold']})",
                         "source": os.path.basename(path)})
        rows.append({"model": name, "weights": "real" + (", synthetic context" if synthetic else ""),
                     "metric": "peak_host_rss_bytes", "context": f"cold prefill of {L} tokens, sparse",
                     "wgllm": r["host_peak_rss_kb"] * 1024, "ratio_ci": None, "config": "switch --sparse-attn",
                     "source": os.path.basename(path)})
    return rows


def multiturn_rows(path):
    """Per-turn snapshot cost and session TTFT growth of `wgllm bench multi-turn`."""
    j = json.load(open(path))
    model = os.path.basename(os.path.dirname(j.get("model", "?").rstrip("/"))) or j.get("model", "?")
    turns = j["turns"]
    rows = []
    for k, metric in (("snapshot_us", "snapshot_record_us"), ("snapshot_done_us", "snapshot_done_us"),
                      ("snapshot_turn_bytes", "snapshot_turn_bytes")):
        v = [t[k] for t in turns if k in t]
        if v:
            rows.append({"model": model, "weights": "trained", "metric": metric,
                         "context": f"median over {len(v)} turns of {j['turn_tokens']} + {j['reply_tokens']} tokens",
                         "wgllm": median(v), "ratio_ci": None, "config": "product", "source": os.path.basename(path)})
    t2 = next((t for t in turns if t["turn"] == 2), None)
    tl = turns[-1]
    if t2 and t2.get("ttft_session_ms"):
        rows.append({"model": model, "weights": "trained", "metric": "ttft_last_over_turn2_fraction",
                     "context": f"session TTFT turn {tl['turn']} / turn 2", "wgllm": tl["ttft_session_ms"] / t2["ttft_session_ms"],
                     "ratio_ci": None, "config": "product", "source": os.path.basename(path)})
    return rows


def web_vs_native_rows(d, model):
    """The browser engine (each round's web/bench_run.js result) vs native `wgllm bench` on the same
    GPU, over interleaved rounds: per prompt length and metric, the median of all reps of all
    rounds on each side; round_ratios = per-round ratios of the medians (ratio_ci stays null: not a
    `wgllm bench ab` interval); noise_band = the spread of native's round medians (max-min)/median."""
    rows = []
    peers = {}  # peer name -> round -> n_prompt -> native bench row
    for prefix, peer in (("native_bench_r", "native"), ("native_nodp_bench_r", "native --no-decode-pipeline")):
        for f in sorted(glob.glob(os.path.join(d, prefix + "*.json"))):
            k = os.path.basename(f)[len(prefix):-5]
            peers.setdefault(peer, {})[k] = {r["n_prompt"]: r for r in json.load(open(f)).get("runs", [])}
    native_ids = None
    run = os.path.join(d, "native_run.txt")
    if os.path.exists(run):
        for line in open(run):
            if line.startswith("token_ids:"):
                native_ids = json.loads(line.split(":", 1)[1])
    for kind in ("node", "browser"):
        res = {}
        for f in sorted(glob.glob(os.path.join(d, f"{kind}_result_r*.json"))):
            j = json.load(open(f))
            if not j.get("error") and j.get("bench"):
                res[os.path.basename(f)[len(f"{kind}_result_r"):-5]] = j
        if not res:
            continue
        first = next(iter(res.values()))
        label, adapter = first.get("label", kind), first.get("adapter", {})
        base = {"model": model, "weights": weights_of(model), "label": label,
                "adapter": adapter.get("description") or adapter.get("device"), "config": "product"}
        lengths = sorted({r["n_prompt"] for j in res.values() for r in j["bench"]["rows"]})
        for (peer, nat), P, metric in ((x, P, m) for x in peers.items() for P in lengths for m in ("ttft_ms", "decode_tok_s")):
            w, p, ratios, nat_meds = [], [], [], []
            for k, j in sorted(res.items()):
                r = next((x for x in j["bench"]["rows"] if x["n_prompt"] == P), None)
                n = nat.get(k, {}).get(P)
                if r is None or n is None:
                    continue
                w += r[metric]; p += n[metric]
                ratios.append(median(r[metric]) / median(n[metric]))
                nat_meds.append(median(n[metric]))
            if not ratios:
                continue
            gen = first["bench"]["rows"][0]["n_gen"]
            rows.append({**base, "metric": metric, "context": f"prompt {P}, {gen} steps, {len(ratios)} interleaved rounds",
                         "wgllm": median(w), "peer": peer, "peer_value": median(p), "ratio_ci": None,
                         "round_ratios": ratios,
                         "noise_band": (max(nat_meds) - min(nat_meds)) / median(nat_meds),
                         "source": f"{kind}_result_r*.json, {'native_bench' if peer == 'native' else 'native_nodp_bench'}_r*.json"})
        for k, j in sorted(res.items()):
            ids = (j.get("greedy") or {}).get("token_ids")
            if ids is None or native_ids is None:
                continue
            n = min(len(ids), len(native_ids))
            same = next((i for i in range(n) if ids[i] != native_ids[i]), n)
            rows.append({**base, "metric": "greedy_prefix_equal_fraction",
                         "context": f"{len(native_ids)} greedy tokens of the bench prompt, round {k}",
                         "wgllm": same / max(1, len(native_ids)), "peer": "native", "peer_value": 1.0,
                         "ratio_ci": None, "source": f"{kind}_result_r{k}.json, native_run.txt"})
    return rows


def quality_rows(d, model):
    """wgllm perplexity --json (ppl_c<N>_<mode>.json, sparse vs dense) and bench planted-fact."""
    rows = []
    ppl = {}
    for f in sorted(glob.glob(os.path.join(d, "ppl_c*.json"))):
        j = json.load(open(f))
        ppl.setdefault(j["n_ctx"], {})["sparse" if j.get("sparse_attn") else "dense"] = j
    for n_ctx, m in sorted(ppl.items()):
        if "sparse" not in m:
            continue
        j, base = m["sparse"], m.get("dense")
        row = {"model": model, "weights": "real", "metric": "perplexity_ppl",
               "context": f"llama.cpp method, n_ctx {n_ctx}, {j['chunks']} chunks, {j['tokens_scored']} tokens scored",
               "wgllm": j["ppl"], "ratio_ci": None, "config": "switch --sparse-attn"}
        if base:
            row.update(peer="dense", peer_value=base["ppl"])
        rows.append(row)
        if base:
            rows.append({"model": model, "weights": "real", "metric": "perplexity_run_ms",
                         "context": f"n_ctx {n_ctx}, {j['chunks']} chunks", "wgllm": 1000 * j["seconds"], "peer": "dense",
                         "peer_value": 1000 * base["seconds"], "ratio_ci": None, "config": "switch --sparse-attn"})
    pf = os.path.join(d, "planted_fact.json")
    if os.path.exists(pf):
        j = json.load(open(pf))
        by = {}
        for r in j["rows"]:
            by.setdefault((r["length"], r["mode"]), []).append(r["found"])
        for (length, mode), found in sorted(by.items()):
            if mode != "sparse":
                continue
            dense = by.get((length, "dense"))
            row = {"model": model, "weights": "real", "metric": "planted_fact_found_fraction",
                   "context": f"~{length}-token prompt, {len(found)} depths", "wgllm": sum(found) / len(found),
                   "ratio_ci": None, "config": "switch --sparse-attn"}
            if dense:
                row.update(peer="dense", peer_value=sum(dense) / len(dense))
            rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--commit", required=True)
    ap.add_argument("--device", required=True)
    ap.add_argument("--date", default=datetime.date.today().isoformat())
    ap.add_argument("--model", default="SmolLM2-135M-Instruct-Q4_1")
    a = ap.parse_args()
    rows = []
    for f in sorted(glob.glob(os.path.join(a.dir, "vs_*.json"))):
        name = os.path.basename(f)[3:-5]
        peer, _, ctx = name.partition("_p")
        peer = peer.replace("llamacpp", "llama.cpp").replace("_", "-")
        p, _, g = ctx.partition("_g")
        rows += ab_rows(f, a.model, f"prompt {p}" + (f", {g} steps" if g else ""), peer, wgllm_is_b=False)
    for f in sorted(glob.glob(os.path.join(a.dir, "new_vs_base*.json"))):
        rows += ab_rows(f, a.model, os.path.basename(f)[12:-5], "wgllm-baseline", wgllm_is_b=True)
    for f in sorted(glob.glob(os.path.join(a.dir, "ab_*.json"))):
        what = os.path.basename(f)[3:-5]
        rows += ab_rows(f, what.split("__")[0], what, "default-off", wgllm_is_b=True, config=f"switch {what}")
    rows += quality_rows(a.dir, a.model)
    rows += web_vs_native_rows(a.dir, a.model)
    for f in sorted(glob.glob(os.path.join(a.dir, "*.json"))):
        b = os.path.basename(f)
        if b.startswith(("vs_", "new_vs_base", "ab_", "summary", "ppl_c", "planted_fact", "native_bench_r", "native_nodp_bench_r", "node_result_r",
                         "browser_result_r", "node_adapter")):
            continue
        if b.startswith("long_context"):
            rows += long_context_rows(f)
            continue
        if b.startswith("multiturn_"):
            rows += multiturn_rows(f)
            continue
        if b.startswith(("attention_", "matmul_", "dispatch_")):
            rows += op_rows(f, "kernel micro-benchmark")
            continue
        try:
            rows += bench_rows(f, a.model if b.startswith("wgllm") else b[:-5])
        except (KeyError, json.JSONDecodeError, TypeError, AttributeError):  # not a wgllm bench file (e.g. llama-bench's list)
            pass
    out = {"commit": a.commit, "date": a.date, "device": a.device, "rows": rows}
    with open(os.path.join(a.dir, "summary.json"), "w") as fh:
        json.dump(out, fh, indent=1)
    print(f"summary.json: {len(rows)} rows")


if __name__ == "__main__":
    main()
