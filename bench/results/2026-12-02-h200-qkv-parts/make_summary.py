#!/usr/bin/env python3
"""Writes summary.json (../shared/RESULTS.md shape) of this folder from its raw outputs (raw/).
Rows: the switch A/Bs of `wgllm bench ab` (wgllm = the default arm, peer "default" = the arm with
the switch off, ratio_ci = on / off), wgllm against llama.cpp CUDA (ratio_ci = wgllm / llama.cpp),
and the decode dispatch count of `bench --traffic`.
Usage: python3 make_summary.py   (from anywhere; writes summary.json beside itself)"""
import json, os, re, statistics

D = os.path.dirname(os.path.abspath(__file__))
COMMIT = "5bee60b"
rows = []


def load(p):
    return json.load(open(os.path.join(D, "raw", p)))


def ab(name, model, context, config, on_arm, metrics, peer="default"):
    j = load(name + ".json")
    for m in metrics:
        x = j["metrics"][m]
        a = statistics.median(x["a1"] + x["a2"])
        b = statistics.median(x["b"])
        r = x["ratio_b_over_a"]
        on, off, ci = (b, a, [r["lo"], r["hi"]]) if on_arm == "b" else (a, b, [1 / r["hi"], 1 / r["lo"]])
        rows.append({"model": model, "weights": "synthetic", "metric": m, "context": context, "wgllm": on,
                     "peer": peer, "peer_value": off, "ratio_ci": ci, "noise_band": x["noise_band"],
                     "config": config, "commit": COMMIT, "source": "raw/" + name + ".json"})


Q, L, S = "Qwen2.5-1.5B-shaped (from its config)", "LFM2-1.2B-shaped", "SmolLM2-135M-shaped"
ab("fuse_qkv_rope_kv_qwen25", Q, "decode after 512, 128 steps (during the llama.cpp CUDA build: 16 compile jobs)",
   "product (B) vs --no-fuse-qkv-rope-kv (A)", "b", ["decode_tok_s"])
ab("fuse_qkv_lfm2", L, "decode after 512, 128 steps (during the llama.cpp CUDA build)",
   "product (B) vs --no-fuse-qkv (A)", "b", ["decode_tok_s"])
ab("vs_cuda_qwen25-1.5b", Q, "decode after 512 (128 steps) / TTFT 512", "product", "a", ["decode_tok_s", "ttft_ms"],
   "llama.cpp-cuda")
ab("vs_cuda_int8_qwen25-1.5b", Q, "decode after 512 (128 steps) / TTFT 512", "--matvec-int8 --matmul-int8", "a",
   ["decode_tok_s", "ttft_ms"], "llama.cpp-cuda")
for m, name in ((S, "attn_flash_smollm2"), (Q, "attn_flash_qwen25-1.5b")):
    ab(name, m, "TTFT, prompts 512 and 4096", "--attn-flash (B) vs product (A)", "b", ["ttft_ms"])
t = open(os.path.join(D, "raw", "traffic_qwen25.md")).read()
n = int(re.search(r"dispatches per decode step: (\d+)", t).group(1))
rows.append({"model": Q, "weights": "synthetic", "metric": "decode_dispatches_per_step", "context": "decode after 512",
             "wgllm": n, "peer": "default", "peer_value": 284, "ratio_ci": None, "noise_band": None,
             "config": "product (peer_value: the header-derived file of the same shape at 84a2f1b, "
                       "../2026-12-02-h200-int8/kernels_and_traffic/qwen25-1.5b/traffic_default.md)",
             "commit": COMMIT, "source": "raw/traffic_qwen25.md"})
out = {"commit": COMMIT, "date": "2026-12-02", "device": "NVIDIA H200 (Vulkan, driver 580.159.04)", "rows": rows}
json.dump(out, open(os.path.join(D, "summary.json"), "w"), indent=1)
for r in rows:
    print(f"{r['model'][:28]:28} {r['metric']:28} {r['wgllm']:9.2f} vs {r['peer']} {r['peer_value']:9.2f}  {r['config']}")
