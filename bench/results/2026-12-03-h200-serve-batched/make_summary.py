#!/usr/bin/env python3
"""Writes summary.json (../shared/RESULTS.md shape) of this folder from its raw outputs.

Every run is `wgllm bench serve` (64 slots of 1024 tokens, concurrency 1 / 16 / 64, 3 requests per
client, 128 tokens per request with the end of generation ignored, prompts of ~32 filler words)
against `wgllm serve` or llama.cpp's `llama-server` (CUDA, the llama-cpp-python 0.3.36 sdist) on
synthetic-weight files of the SmolLM2-135M and Qwen2.5-1.5B shapes (recipe_serve_peers.sh).
Files: raw/<call>/serve_<engine>[-<arm>]_<model>_r<round>.json.
  raw/serve   (call 2, binary 1ff67e9): wgllm with the batched launches (--batch-rope-kv,
              --batch-decode-attn, default on) and without them, and llama-server; one round.
  raw/matvec  (call 3, binary 38b487d, a fresh machine): --matvec-max-tokens 8 (then the default),
              32 and 64; two rounds, arms in reverse order in round 2.
  raw/peers   (call 4, binary 490c9c9 = --matvec-max-tokens 32 as the default, a fresh machine):
              wgllm product vs llama-server, two rounds, engines alternating (if present).
One row per model, level, metric and comparison: the mean over rounds (each in `rounds`) and, with two
rounds, the relative spread between them (the larger of the two arms') as the noise band. Comparisons:
call 2 batched vs llama-server and vs both switches off; call 3 32 and 64 vs 8; call 3's 32 (the new
default) vs call 2's llama-server (two machine draws, labelled so); call 4 product vs llama-server
(where raw/peers exists). Plus per wgllm run and round (not means): slot steps per forward
(mean_batch_items) and wall time per forward (wall_per_forward_ms) from its /metrics.
Usage: python3 make_summary.py   (from anywhere; writes summary.json beside itself)"""
import glob, json, os, re, statistics

D = os.path.dirname(os.path.abspath(__file__))
MODEL = {"qwen25-1.5b": "Qwen2.5-1.5B-shaped, synthetic (its header)",
         "smollm2": "SmolLM2-135M-shaped, synthetic (its header)"}
METRICS = {"tokens_per_s": "aggregate_decode_tok_s", "ttft_ms_p50": "ttft_p50_ms", "ttft_ms_p99": "ttft_p99_ms",
           "itl_ms_p50": "itl_p50_ms", "itl_ms_p99": "itl_p99_ms"}
CALLS = {"serve": ("1ff67e9", {"batched": "product of 1ff67e9", "unbatched": "--no-batch-rope-kv --no-batch-decode-attn"}),
         "matvec": ("38b487d", {"product": "product of 38b487d (--matvec-max-tokens 8)",
                                "mv32": "--matvec-max-tokens 32", "mv64": "--matvec-max-tokens 64"}),
         "peers": ("490c9c9", {"product": "product"})}
rows = []


def spread(xs):
    """Relative spread of repeated measurements (max - min) / mean; None for one measurement."""
    return (max(xs) - min(xs)) / statistics.mean(xs) if len(xs) > 1 and statistics.mean(xs) else None


def load(call):
    """{(arm, model): [levels of round 1, levels of round 2, ...]}; arm "llama" for llama-server."""
    runs = {}
    for p in sorted(glob.glob(os.path.join(D, "raw", call, "serve_*_r*.json"))):
        m = re.match(r"serve_(wgllm|llama)(?:-([a-z0-9]+))?_(.+)_r(\d+)\.json", os.path.basename(p))
        arm = "llama" if m.group(1) == "llama" else (m.group(2) or "product")
        runs.setdefault((arm, m.group(3)), []).append(json.load(open(p)))
    return runs


def arm(runs, name):
    """{model: rounds} of one arm of load()'s result."""
    return {model: r for (a, model), r in runs.items() if a == name}


def compare(a_runs, p_runs, peer_name, config, commit, source, note=""):
    """Rows of arm a_runs ({model: rounds}) against p_runs, per model both have."""
    for model in sorted(set(a_runs) & set(p_runs)):
        a_rounds, p_rounds = a_runs[model], p_runs[model]
        for level_i, lvl in enumerate(a_rounds[0]):
            for key, metric in METRICS.items():
                w = [r[level_i][key] for r in a_rounds]
                p = [r[level_i][key] for r in p_rounds]
                bands = [b for b in (spread(w), spread(p)) if b is not None]
                rows.append({"model": MODEL[model], "weights": "synthetic", "metric": metric,
                             "context": f"{lvl['concurrency']} concurrent streaming clients, {lvl['requests']} requests of "
                                        f"{lvl['max_tokens']} tokens; 64 slots x 1024 tokens" + note,
                             "wgllm": statistics.mean(w), "peer": peer_name, "peer_value": statistics.mean(p),
                             "ratio_ci": None, "noise_band": max(bands) if bands else None, "config": config,
                             "rounds": {"wgllm": w, "peer": p},
                             "errors": sum(r[level_i]["errors"] for r in a_rounds + p_rounds), "commit": commit,
                             "source": source.format(model=model)})


def scheduler_rows(call):
    """Slot steps per batched forward and wall time per forward of each wgllm run (its /metrics after
    the run, the run's bench serve rows)."""
    commit, arms = CALLS[call]
    for mp in sorted(glob.glob(os.path.join(D, "raw", call, "metrics_wgllm*_r*.txt"))):
        m = re.match(r"metrics_wgllm(?:-([a-z0-9]+))?_(.+)_r(\d+)\.txt", os.path.basename(mp))
        arm, model, rnd = m.group(1) or "product", m.group(2), m.group(3)
        sp = mp.replace("metrics_", "serve_").replace(".txt", ".json")
        if not os.path.exists(sp):
            continue
        met = dict(l.rsplit(" ", 1) for l in open(mp).read().splitlines() if l and not l.startswith("#"))
        fwd, items = float(met["wgllm_scheduler_forwards_total"]), float(met["wgllm_scheduler_batch_items_total"])
        wall = sum(lvl["wall_s"] for lvl in json.load(open(sp)))
        for metric, v in (("mean_batch_items", items / fwd), ("wall_per_forward_ms", 1e3 * wall / fwd)):
            rows.append({"model": MODEL[model], "weights": "synthetic", "metric": metric,
                         "context": f"wgllm serve scheduler over round {rnd} (levels 1/16/64; wall of bench serve / forwards)",
                         "wgllm": v, "ratio_ci": None, "config": arms.get(arm, arm), "commit": commit,
                         "source": os.path.relpath(mp, D)})


serve, matvec, peers = load("serve"), load("matvec"), load("peers")
compare(arm(serve, "batched"), arm(serve, "llama"), "llama-server", "product of 1ff67e9 (matvec up to 8 rows, then fixed)", "1ff67e9",
        "raw/serve/serve_{{wgllm-batched,llama}}_{model}_r1.json", "; one round")
compare(arm(serve, "batched"), arm(serve, "unbatched"), "--no-batch-rope-kv --no-batch-decode-attn",
        "switches --batch-rope-kv --batch-decode-attn on (default)",
        "1ff67e9", "raw/serve/serve_wgllm-{{batched,unbatched}}_{model}_r1.json", "; one round; peer = both switches off")
for a in ("mv32", "mv64"):
    compare(arm(matvec, a), arm(matvec, "product"), "default", CALLS["matvec"][1][a], "38b487d",
            "raw/matvec/serve_wgllm{{-" + a + ",}}_{model}_r*.json", "; peer = --matvec-max-tokens 8 (the default of that binary)")
# The new default (32) against llama-server: call 3's wgllm with call 2's llama-server (two machine
# draws), and, where call 4 ran, both in one run.
compare(arm(matvec, "mv32"), arm(serve, "llama"), "llama-server", "--matvec-max-tokens 32 (the default since 490c9c9)",
        "38b487d", "raw/matvec/serve_wgllm-mv32_{model}_r*.json; raw/serve/serve_llama_{model}_r1.json",
        "; wgllm from call 3 (raw/matvec), llama-server from call 2 (raw/serve): two machine draws")
compare(arm(peers, "product"), arm(peers, "llama"), "llama-server", "product", "490c9c9",
        "raw/peers/serve_{{wgllm,llama}}_{model}_r*.json", "; same run, engines alternating")
for c in CALLS:
    scheduler_rows(c)

gpu_file = next(p for p in (os.path.join(D, "raw", c, "gpu.txt") for c in ("peers", "matvec", "serve")) if os.path.exists(p))
gpu = open(gpu_file).read().splitlines()[1].split(", ")
out = {"commit": "490c9c9" if peers else "38b487d", "date": "2026-12-03", "device": f"{gpu[0]} (Vulkan, driver {gpu[1]})",
       "rows": rows}
with open(os.path.join(D, "summary.json"), "w") as f:
    json.dump(out, f, indent=1)
print(f"summary.json: {len(rows)} rows")
