#!/usr/bin/env python3
"""Writes summary.json (../shared/RESULTS.md shape) of this folder from its raw outputs (raw/).
raw/baseline (binary 50414b8, the product of the 2026-12-03 morning): wgllm against llama.cpp CUDA
(ratio_ci = wgllm / llama.cpp) and `bench multi-turn --turns 30` (session TTFT of turn 30 / turn 2,
with and without --attn-chunk). raw/prefetch (binary 3f828b1): --matvec-prefetch, --argmax-loads and
--attn-decode-k-batch 32 A/Bs (ratio_ci = candidate / other arm). raw/chunk and raw/chunk_peers
(binary fcdf041: --argmax-loads 16 and the pipeline memo): the --submit-chunk A/Bs and the product
against llama.cpp CUDA; raw/final (binary 518a86f, where present): --decode-submit-chunk and the
product against llama.cpp CUDA with every change of this folder.
Usage: python3 make_summary.py   (from anywhere; writes summary.json beside itself)"""
import json, os, re, statistics, sys

D = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(D, "..", "..", "..", "tools", "device"))
import summarize  # noqa: E402  (ab_rows)

rows = []
Q, L, S = "Qwen2.5-1.5B-shaped (its header)", "LFM2-1.2B-shaped (its config)", "SmolLM2-135M-shaped (its header)"
MODEL = {"qwen25-1.5b": Q, "qwen25": Q, "lfm2-1.2b": L, "smollm2": S}
P512 = "decode after 512, 128 steps"


def ab(path, model, context, config, on_arm, metrics, peer, commit):
    """The rows of one `bench ab` result (tools/device/summarize.py ab_rows: medians of the arms,
    the interval inverted when the candidate is arm A), for `metrics` only, labelled for this folder."""
    p = os.path.join(D, "raw", path + ".json")
    if not os.path.exists(p):
        return
    for r in summarize.ab_rows(p, model, context, peer, on_arm == "b", config):
        if r["metric"] in metrics:
            r.pop("broken_meter")
            r.update(weights="synthetic", commit=commit, source="raw/" + path + ".json")
            rows.append(r)


for part, commit in (("baseline", "50414b8"), ("chunk_peers", "fcdf041"), ("final", "518a86f")):
    for m in ("smollm2", "qwen25-1.5b"):
        ab(f"{part}/vs_cuda_{m}", MODEL[m], P512 + " / TTFT 512", "product", "a", ["decode_tok_s", "ttft_ms"],
           "llama.cpp-cuda", commit)
# Multi-turn: session TTFT of turn 30 over turn 2 per run (A = --no-attn-chunk, B = default).
MT = os.path.join(D, "raw", "baseline")
for arm, config in (("A", "--no-attn-chunk"), ("B", "product")):
    ratios, t2, t30 = [], [], []
    for r in (1, 2):
        t = {x["turn"]: x["ttft_session_ms"] for x in json.load(open(os.path.join(MT, f"multiturn30_{arm}_r{r}.json")))["turns"]}
        ratios.append(t[30] / t[2]), t2.append(t[2]), t30.append(t[30])
    rows.append({"model": S, "weights": "synthetic", "metric": "session_ttft_turn30_over_turn2_fraction",
                 "context": "bench multi-turn --turns 30 (64 user + 16 reply tokens a turn, 2.7k at turn 30), 2 runs",
                 "wgllm": statistics.mean(ratios), "ratio_ci": None, "noise_band": abs(ratios[0] - ratios[1]),
                 "config": config, "commit": "50414b8", "runs": ratios, "turn2_ms": t2, "turn30_ms": t30,
                 "source": f"raw/baseline/multiturn30_{arm}_r*.json"})
ab("baseline/attn_chunk_control", S, "TTFT 512 and 4096 (cold)", "--attn-chunk control: default (B) vs --no-attn-chunk (A)",
   "b", ["ttft_ms"], "--no-attn-chunk", "50414b8")
C = "3f828b1"
for m in ("qwen25-1.5b", "smollm2", "lfm2-1.2b"):
    ab(f"prefetch/prefetch_{m}", MODEL[m], P512, "--matvec-prefetch (B) vs product (A)", "b", ["decode_tok_s"], "product", C)
for m in ("qwen25-1.5b", "smollm2"):
    ab(f"prefetch/argmax_loads_{m}", MODEL[m], P512, "--argmax-loads 16 (B, the GPU default) vs 1 (A, the earlier kernel)", "b",
       ["decode_tok_s"], "--argmax-loads 1", C)
ab("prefetch/k_batch_32_qwen25", Q, P512, "--attn-decode-k-batch 32 (B) vs the default 8 (A)", "b", ["decode_tok_s"], "product", C)
CH = os.path.join(D, "raw", "chunk")
if os.path.isdir(CH):
    for f in sorted(os.listdir(CH)):
        g = re.match(r"submit_chunk_(\d+)_(smollm2|qwen25-1\.5b)\.json$", f)
        if g:
            ab(f"chunk/{f[:-5]}", MODEL[g.group(2)], P512 + " / TTFT 512", f"--submit-chunk {g.group(1)} (B) vs the default 32 (A)",
               "b", ["decode_tok_s", "ttft_ms"], "--submit-chunk 32", "fcdf041")
for m in ("smollm2", "qwen25-1.5b"):
    ab(f"final/decode_submit_chunk_{m}", MODEL[m], P512 + " / TTFT 512", "--decode-submit-chunk 0 (B, the default) vs 32 (A, the earlier behaviour)",
       "b", ["decode_tok_s", "ttft_ms"], "--decode-submit-chunk 32", "518a86f")
gpu = open(os.path.join(D, "raw", "baseline", "gpu.txt")).read()
drv = re.search(r"NVIDIA H200, ([0-9.]+)", gpu).group(1)
json.dump({"commit": "50414b8..", "date": "2026-12-03", "device": f"NVIDIA H200 (Vulkan, driver {drv})", "rows": rows},
          open(os.path.join(D, "summary.json"), "w"), indent=1)
print(f"{len(rows)} rows")
