#!/usr/bin/env python3
"""summary.json (../shared/RESULTS.md shape) of tools/quality/int8_quality.sh's runs: per model and
path, the perplexity with the int8 switch on (wgllm) against the default (peer "default"), with
llama.cpp's standard errors and the ratio."""
import datetime
import json
import os
import sys

MODELS = {"smollm2": "SmolLM2-135M-Instruct-Q4_1", "qwen25": "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M"}
PATHS = {"prefill": ("--matmul-int8", "whole chunks (prefill matmuls), both arms --matmul-tiled"),
         "decode": ("--matvec-int8", "--ubatch-size 8 (decode matrix-vector kernels), both arms --matvec-subgroup")}


def main(d):
    rows = []
    for key, model in MODELS.items():
        for path, (switch, how) in PATHS.items():
            fa, fb = (os.path.join(d, f"{key}_{path}_{x}.json") for x in "AB")
            if not (os.path.exists(fa) and os.path.exists(fb)):
                continue
            a, b = json.load(open(fa)), json.load(open(fb))
            if a["tokens_scored"] != b["tokens_scored"]:
                raise SystemExit(f"{key} {path}: different tokens scored ({a['tokens_scored']} vs {b['tokens_scored']})")
            rows.append({"model": model, "weights": "real", "metric": "perplexity_ppl",
                         "context": f"Moby-Dick, n_ctx {a['n_ctx']}, {a['chunks']} chunks, {a['tokens_scored']} tokens scored, {how}",
                         "wgllm": b["ppl"], "wgllm_stderr": b["stderr"], "peer": "default", "peer_value": a["ppl"],
                         "peer_stderr": a["stderr"], "ratio": b["ppl"] / a["ppl"], "ratio_ci": None, "noise_band": None,
                         "config": switch, "source": f"{os.path.basename(fb)} vs {os.path.basename(fa)}"})
    commit = open(os.path.join(d, "commit.txt")).read().strip()
    dev = open(os.path.join(d, "devices.txt")).read()
    device = next((l.strip() for l in dev.splitlines() if l.strip().startswith("[0]") or "llvmpipe" in l), "unknown")
    out = {"commit": commit, "date": datetime.date.today().isoformat(), "device": device, "rows": rows}
    json.dump(out, open(os.path.join(d, "summary.json"), "w"), indent=1)
    for r in rows:
        print(f"{r['model']:36} {r['config']:14} ppl {r['peer_value']:.4f} -> {r['wgllm']:.4f} (x{r['ratio']:.4f})  {r['context']}")


if __name__ == "__main__":
    main(sys.argv[1])
