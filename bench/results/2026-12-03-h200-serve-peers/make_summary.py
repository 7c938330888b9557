#!/usr/bin/env python3
"""Writes summary.json (../shared/RESULTS.md shape) of this folder from its raw outputs.
raw/serve (binary a4f5dfe, product configuration): `wgllm bench serve` against `wgllm serve` and against
llama.cpp's `llama-server` (CUDA, the llama-cpp-python 0.3.36 sdist), 64 slots of 1024 tokens each,
concurrency 1 / 16 / 64 with 3 requests per client, 128 tokens per request (end of generation ignored),
two rounds with the engines alternating; one row per model, level and metric with the mean of the two
rounds (both in `rounds`) and the relative spread between the rounds as the noise band (the larger of
the two engines'). raw/prefill_chunk (same binary, call 5): `wgllm serve --serve-prefill-chunk`
256 / 1024 / 2048 alone, the arms alternating; 2048 became the default after it. raw/keylanes (same binary): `bench attention --tokens 1` with
--attn-decode-key-lanes rows (GPU timestamps) and the `bench ab` decode A/Bs of the switch.
Usage: python3 make_summary.py   (from anywhere; writes summary.json beside itself)"""
import glob, json, os, re, statistics, sys

D = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(D, "..", "..", "..", "tools", "device"))
import summarize  # noqa: E402  (ab_rows, op_rows)

COMMIT = "a4f5dfe"
CALL2 = "product of a4f5dfe (--serve-prefill-chunk 256, the default until call 5 of this folder)"
MODEL = {"qwen25-1.5b": "Qwen2.5-1.5B-shaped, synthetic (its header)", "qwen25": "Qwen2.5-1.5B-shaped, synthetic (its header)",
         "smollm2": "SmolLM2-135M-shaped, synthetic (its header)",
         "lfm2-1.2b": "LFM2-1.2B-shaped, synthetic (published config)"}
rows = []

def spread(xs):
    """Relative spread of repeated measurements (max - min) / mean; 0 for a zero mean."""
    return (max(xs) - min(xs)) / statistics.mean(xs) if statistics.mean(xs) else 0.0


def scheduler_rows(metrics_path, levels, r_i, model, config):
    """wgllm's scheduler over one round (its /metrics after the round, the round's bench serve rows):
    slot steps per batched forward and wall time per forward."""
    if not os.path.exists(metrics_path):
        return
    met = dict(l.rsplit(" ", 1) for l in open(metrics_path).read().splitlines() if l and not l.startswith("#"))
    fwd, items = float(met["wgllm_scheduler_forwards_total"]), float(met["wgllm_scheduler_batch_items_total"])
    wall = sum(lvl["wall_s"] for lvl in levels)
    for metric, v in (("mean_batch_items", items / fwd), ("wall_per_forward_ms", 1e3 * wall / fwd)):
        rows.append({"model": MODEL[model], "weights": "synthetic", "metric": metric,
                     "context": f"wgllm serve scheduler over the whole round {r_i} (levels 1/16/64; wall of bench serve / forwards)",
                     "wgllm": v, "ratio_ci": None, "config": config, "commit": COMMIT,
                     "source": os.path.relpath(metrics_path, D)})


# --- wgllm serve vs llama-server ---------------------------------------------------------------
METRICS = {"tokens_per_s": "aggregate_decode_tok_s", "ttft_ms_p50": "ttft_p50_ms", "ttft_ms_p99": "ttft_p99_ms",
           "itl_ms_p50": "itl_p50_ms", "itl_ms_p99": "itl_p99_ms"}
runs = {}  # (engine, model) -> [rows of each round]
for p in sorted(glob.glob(os.path.join(D, "raw", "serve", "serve_*_r*.json"))):
    m = re.match(r"serve_(wgllm|llama)_(.+)_r(\d+)\.json", os.path.basename(p))
    runs.setdefault((m.group(1), m.group(2)), []).append(json.load(open(p)))
for model in sorted({k[1] for k in runs}):
    w_rounds, l_rounds = runs.get(("wgllm", model), []), runs.get(("llama", model), [])
    if not w_rounds or not l_rounds:
        continue
    for level_i, lvl in enumerate(w_rounds[0]):
        c = lvl["concurrency"]
        for key, metric in METRICS.items():
            w = [r[level_i][key] for r in w_rounds]
            p = [r[level_i][key] for r in l_rounds]
            rows.append({"model": MODEL[model], "weights": "synthetic", "metric": metric,
                         "context": f"{c} concurrent streaming clients, {lvl['requests']} requests of "
                                    f"{lvl['max_tokens']} tokens, prompts of ~{lvl['prompt_words']} filler words; "
                                    "64 slots x 1024 tokens",
                         "wgllm": statistics.mean(w), "peer": "llama-server", "peer_value": statistics.mean(p),
                         "ratio_ci": None, "noise_band": max(spread(w), spread(p)), "config": CALL2,
                         "rounds": {"wgllm": w, "peer": p},
                         "errors": sum(r[level_i]["errors"] for r in w_rounds + l_rounds),
                         "commit": COMMIT, "source": f"raw/serve/serve_{{wgllm,llama}}_{model}_r*.json"})
    for r_i, r in enumerate(w_rounds, 1):
        scheduler_rows(os.path.join(D, "raw", "serve", f"metrics_wgllm_{model}_r{r_i}.txt"), r, r_i, model, CALL2)

# --- --serve-prefill-chunk (raw/prefill_chunk, call 5: wgllm alone, arms 256 / 1024 / 2048) ----------
# One row per model, level, metric and arm (1024, 2048) against 256 (the default until this folder):
# mean of two rounds, the arms' order reversed in round 2; then the new default (2048) against
# llama-server's figures of raw/serve (call 2: another machine draw, same recipe and files).
arms = {}  # (arm, model) -> [rows of each round]
for p in sorted(glob.glob(os.path.join(D, "raw", "prefill_chunk", "serve_wgllm-c*_r*.json"))):
    m = re.match(r"serve_wgllm-c(\d+)_(.+)_r(\d+)\.json", os.path.basename(p))
    arms.setdefault((int(m.group(1)), m.group(2)), []).append(json.load(open(p)))
for (arm, model), a_rounds in sorted(arms.items()):
    base = arms.get((256, model))
    peers = [("--serve-prefill-chunk 256", base, "prefill_chunk")] if arm != 256 and base else []
    if arm == 2048 and runs.get(("llama", model)):
        peers.append(("llama-server", runs[("llama", model)], "serve"))
    for peer, p_rounds, src in peers:
        for level_i, lvl in enumerate(a_rounds[0]):
            for key, metric in METRICS.items():
                w = [r[level_i][key] for r in a_rounds]
                pv = [r[level_i][key] for r in p_rounds]
                rows.append({"model": MODEL[model], "weights": "synthetic", "metric": metric,
                             "context": f"{lvl['concurrency']} concurrent streaming clients, {lvl['requests']} requests of "
                                        f"{lvl['max_tokens']} tokens; 64 slots x 1024 tokens"
                                        + ("; llama-server measured in call 2 (another machine draw)" if src == "serve" else ""),
                             "wgllm": statistics.mean(w), "peer": peer, "peer_value": statistics.mean(pv),
                             "ratio_ci": None, "noise_band": max(spread(w), spread(pv)),
                             "config": "product" if arm == 2048 else f"--serve-prefill-chunk {arm}",
                             "rounds": {"wgllm": w, "peer": pv}, "commit": COMMIT,
                             "source": f"raw/prefill_chunk/serve_wgllm-c{arm}_{model}_r*.json"})

for (arm, model), a_rounds in sorted(arms.items()):
    for r_i, r in enumerate(a_rounds, 1):
        scheduler_rows(os.path.join(D, "raw", "prefill_chunk", f"metrics_wgllm-c{arm}_{model}_r{r_i}.txt"), r, r_i, model,
                       "product" if arm == 2048 else f"--serve-prefill-chunk {arm}")

# --- --attn-decode-key-lanes ---------------------------------------------------------------------
for p in sorted(glob.glob(os.path.join(D, "raw", "keylanes", "keylanes*_c*.json"))):
    model = MODEL[os.path.basename(p).split("_")[1]]
    for r in summarize.op_rows(p, f"attention op of the {model}"):
        r["config"] = "kernel alone (GPU timestamps)"
        r["commit"] = COMMIT
        r["source"] = os.path.relpath(p, D)
        rows.append(r)
AB = {"keylanes4_qwen25-1.5b": ("qwen25-1.5b", "--attn-decode-key-lanes 4"),
      "keylanes4_s64_qwen25-1.5b": ("qwen25-1.5b", "--attn-decode-key-lanes 4 --attn-decode-split-len 64"),
      "keylanes8_s32_qwen25-1.5b": ("qwen25-1.5b", "--attn-decode-key-lanes 8 --attn-decode-split-len 32"),
      "keylanes4_smollm2": ("smollm2", "--attn-decode-key-lanes 4"),
      # call 4 (keylanes2): KL 8 + 32-key splits again and on more shapes / lengths, and a null control
      "keylanes8_s32_qwen25-1.5b_r2": ("qwen25-1.5b", "--attn-decode-key-lanes 8 --attn-decode-split-len 32"),
      "keylanes8_s32_p2048_qwen25-1.5b": ("qwen25-1.5b", "--attn-decode-key-lanes 8 --attn-decode-split-len 32"),
      "keylanes8_s32_smollm2": ("smollm2", "--attn-decode-key-lanes 8 --attn-decode-split-len 32"),
      "keylanes8_s32_lfm2-1.2b": ("lfm2-1.2b", "--attn-decode-key-lanes 8 --attn-decode-split-len 32"),
      "null_qwen25-1.5b": ("qwen25-1.5b", "null control: A = B = default")}
for name, (model, flags) in AB.items():
    p = os.path.join(D, "raw", "keylanes", name + ".json")
    if os.path.exists(p):
        prompt = 2048 if "p2048" in name else 512
        config = flags if flags.startswith("null") else f"switch {flags}"
        for r in summarize.ab_rows(p, MODEL[model], f"decode after a {prompt}-token prompt, 128 steps", "default", True,
                                   config):
            r["commit"] = COMMIT
            r["source"] = os.path.relpath(p, D)
            rows.append(r)

gpu = open(os.path.join(D, "raw", "serve", "gpu.txt")).read().splitlines()[1].split(", ")
out = {"commit": COMMIT, "date": "2026-12-03", "device": f"{gpu[0]} (Vulkan, driver {gpu[1]})", "rows": rows}
with open(os.path.join(D, "summary.json"), "w") as f:
    json.dump(out, f, indent=1)
print(f"summary.json: {len(rows)} rows")
