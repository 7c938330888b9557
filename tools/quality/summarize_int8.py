#!/usr/bin/env python3
"""summary.json (../shared/RESULTS.md shape) of tools/quality/int8_quality.sh's runs: per model and
path, the perplexity with the int8 switch on (wgllm) against the default (peer "default"), with
llama.cpp's standard errors and the ratio. Where both runs list each chunk's mean NLL
(`wgllm perplexity --json` chunk_nll, since 2026-12-02), ratio_ci is the paired 95% interval of the
ratio over chunks: exp(mean(d) +- 1.96 sd(d) / sqrt(n)), d = chunk NLL with the switch minus without
(the same tokens in both runs; chunks taken as independent samples)."""
import datetime
import json
import math
import os
import sys


def paired_ci(a, b):
    """95% interval of exp(mean NLL difference) over paired chunks, or None."""
    na, nb = a.get("chunk_nll") or [], b.get("chunk_nll") or []
    if len(na) != len(nb) or len(na) < 2:
        return None
    d = [y - x for x, y in zip(na, nb)]
    m = sum(d) / len(d)
    sd = math.sqrt(sum((x - m) ** 2 for x in d) / (len(d) - 1))
    h = 1.96 * sd / math.sqrt(len(d))
    return [math.exp(m - h), math.exp(m + h)]

MODELS = {"smollm2": "SmolLM2-135M-Instruct-Q4_1", "qwen25": "Qwen2.5-Coder-1.5B-Instruct-Q4_K_M",
          "gemma3": "gemma-3-270m-Q4_K_M"}
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
                         "peer_stderr": a["stderr"], "ratio": b["ppl"] / a["ppl"], "ratio_ci": paired_ci(a, b), "noise_band": None,
                         "config": switch, "source": f"{os.path.basename(fb)} vs {os.path.basename(fa)}"})
    commit = open(os.path.join(d, "commit.txt")).read().strip()
    dev = open(os.path.join(d, "devices.txt")).read()
    device = next((l.strip() for l in dev.splitlines() if l.strip().startswith("[0]") or "llvmpipe" in l), "unknown")
    out = {"commit": commit, "date": datetime.date.today().isoformat(), "device": device, "rows": rows}
    json.dump(out, open(os.path.join(d, "summary.json"), "w"), indent=1)
    for r in rows:
        ci = r["ratio_ci"]
        cis = f" [{ci[0]:.4f}, {ci[1]:.4f}]" if ci else ""
        print(f"{r['model']:36} {r['config']:14} ppl {r['peer_value']:.4f} -> {r['wgllm']:.4f} (x{r['ratio']:.4f}{cis})  {r['context']}")


if __name__ == "__main__":
    main(sys.argv[1])
