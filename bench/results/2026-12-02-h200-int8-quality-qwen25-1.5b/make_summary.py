#!/usr/bin/env python3
"""Writes summary.json (../shared/RESULTS.md shape) of this folder from its raw outputs: the int8
perplexity rows of int8/summary.json (tools/quality/summarize_int8.py, paired intervals over
chunks), the `bench diverge` counts, and the two `bench ab` speed comparisons on the real file
(int8 switches on vs the then default; the QKV epilogue vs --no-fuse-qkv-rope-kv).
Usage: python3 make_summary.py   (from anywhere; writes summary.json beside itself)"""
import json, os, statistics

D = os.path.dirname(os.path.abspath(__file__))
COMMIT = "5bee60b"
MODEL = "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M"
rows = [dict(r, commit=COMMIT, source="int8/" + r["source"].split(" vs ")[0])
        for r in json.load(open(os.path.join(D, "int8", "summary.json")))["rows"]]
for sw in ("matvec_int8", "matmul_int8", "fuse_qkv_rope_kv"):
    s = json.load(open(os.path.join(D, f"diverge_{sw}.json")))["summary"]
    val = "1" if sw.endswith("int8") else "0"
    rows.append({"model": MODEL, "weights": "real", "metric": "greedy_diverged_prompts_count",
                 "context": f"bench diverge, {s['prompts']} prompts, 64 generated tokens"
                            + (f", first divergence at token {s['first_divergence_min']}..(median {s['first_divergence_median']})"
                               if s["diverged"] else ""),
                 "wgllm": s["diverged"], "ratio_ci": None, "noise_band": None,
                 "config": f"{sw}={val} (B) vs the default of {COMMIT} (A)" + (" (null control: bit-exact)" if val == "0" else ""),
                 "commit": COMMIT, "source": f"diverge_{sw}.json"})


def ab(name, context, config, metrics):
    j = json.load(open(os.path.join(D, name + ".json")))
    for m in metrics:
        x = j["metrics"][m]
        r = x["ratio_b_over_a"]
        rows.append({"model": MODEL, "weights": "real", "metric": m, "context": context,
                     "wgllm": statistics.median(x["b"]), "peer": "default",
                     "peer_value": statistics.median(x["a1"] + x["a2"]), "ratio_ci": [r["lo"], r["hi"]],
                     "noise_band": x["noise_band"], "config": config, "commit": COMMIT, "source": name + ".json"})


ab("int8_ab_real", "decode after 512 (128 steps) / TTFT 512, 2 rounds",
   "--matvec-int8 --matmul-int8 (B) vs the then default, both off (A)", ["decode_tok_s", "ttft_ms"])
ab("qkv_ab_real", "decode after 512 (128 steps) / TTFT 512 (control), 3 rounds",
   "product (B) vs --no-fuse-qkv-rope-kv (A)", ["decode_tok_s", "ttft_ms"])
out = {"commit": COMMIT, "date": "2026-12-02", "device": "NVIDIA H200 (Vulkan, driver 580.159.04)", "rows": rows}
json.dump(out, open(os.path.join(D, "summary.json"), "w"), indent=1)
for r in rows:
    print(f"{r['metric']:32} {r['wgllm']:10.4f} vs {r.get('peer_value', '-')!s:>10.10}  {r['config']}")
