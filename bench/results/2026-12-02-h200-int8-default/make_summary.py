#!/usr/bin/env python3
"""Writes summary.json (../shared/RESULTS.md shape) of this folder from raw/: the new product
configuration (int8 activations on by default for GPUs) against both int8 switches off
(`bench ab`, peer "default" = the f32 arm, the previous default), the multi-turn ratio, and the
per-kernel share of copy bandwidth of the two FFN matrices in the product configuration.
Usage: python3 make_summary.py   (from anywhere; writes summary.json beside itself)"""
import json, os, re, statistics

D = os.path.dirname(os.path.abspath(__file__))
COMMIT = "17f07af"
SYN = {"qwen25-1.5b": "Qwen2.5-1.5B-shaped (from its config)", "lfm2-1.2b": "LFM2-1.2B-shaped"}
rows = []
for m, model in SYN.items():
    j = json.load(open(os.path.join(D, "raw", f"ab_default_vs_f32_{m}.json")))
    for metric, x in j["metrics"].items():
        r = x["ratio_b_over_a"]
        rows.append({"model": model, "weights": "synthetic", "metric": metric,
                     "context": "decode after 512 (128 steps) / TTFT 512, 2 rounds", "wgllm": statistics.median(x["b"]),
                     "peer": "default", "peer_value": statistics.median(x["a1"] + x["a2"]), "ratio_ci": [r["lo"], r["hi"]],
                     "noise_band": x["noise_band"],
                     "config": "product (int8 on for GPUs) vs --no-matvec-int8 --no-matmul-int8 (the previous default)",
                     "commit": COMMIT, "source": f"raw/ab_default_vs_f32_{m}.json"})
    t = open(os.path.join(D, "raw", f"traffic_{m}.md")).read()
    for k in ("ffn_gate_up", "ffn_down"):
        frac = float(re.search(r"^\| " + k + r" \|(?:[^|]*\|){7}\s*([0-9.]+)", t, re.M).group(1)) / 100
        rows.append({"model": model, "weights": "synthetic", "metric": "copy_bandwidth_fraction",
                     "context": f"{k} in a decode step after 512 (bench --traffic)", "wgllm": frac, "ratio_ci": None,
                     "noise_band": None, "config": "product", "commit": COMMIT, "source": f"raw/traffic_{m}.md"})
ratios = []
for r in (1, 2):
    t = {x["turn"]: x["ttft_session_ms"] for x in json.load(open(os.path.join(D, "raw", f"multiturn30_r{r}.json")))["turns"]}
    ratios.append(t[30] / t[2])
rows.append({"model": "SmolLM2-135M-shaped", "weights": "synthetic", "metric": "turn30_over_turn2_ratio",
             "context": "bench multi-turn --turns 30 --session-only, session TTFT, mean of 2 runs", "wgllm": statistics.mean(ratios),
             "ratio_ci": None, "noise_band": None, "config": "product", "commit": COMMIT, "source": "raw/multiturn30_r*.json"})
out = {"commit": COMMIT, "date": "2026-12-02", "device": "NVIDIA H200 (Vulkan, driver 580.159.04)", "rows": rows}
json.dump(out, open(os.path.join(D, "summary.json"), "w"), indent=1)
for r in rows:
    print(f"{r['model'][:24]:24} {r['metric']:26} {r['wgllm']:9.3f} vs {r.get('peer_value', float('nan')):9.3f}  {r['context'][:40]}")
