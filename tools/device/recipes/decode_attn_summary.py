#!/usr/bin/env python3
"""Usage: python3 tools/device/recipes/decode_attn_summary.py DIR (a results folder with commit.txt and raw/, raw/ =
the unpacked results.tgz of one call of tools/device/recipes/decode_attn.sh). Writes DIR/summary.json (the shape of
../shared/RESULTS.md) from raw/:
  null_qwen25, cand_*, t256_kl2_*, pf_*, mv_rows*_*   `bench ab` A = product, B = the candidate (wgllm = B, peer
                                                      "default" = A); null_*: B = A
  old_<model>                                         `bench ab` A = product, B = the former decode attention
                                                      defaults (wgllm = A, peer "former defaults" = B)
  vs_cuda_<model>                                     `bench ab` A = wgllm product, B = llama.cpp CUDA's llama-bench
  marginal_<config>_<kernel>_r<N>.json                `bench` plain and with --repeat-kernel attention: the
                                                      difference of the p50 step is the kernel's marginal cost
  diverge_<name>.json                                 `bench diverge`: prompts whose greedy text departs from
                                                      the former defaults'
Every file but the trained fixtures' is a synthetic-weights model (tools/synth)."""
import glob
import json
import os
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from summarize import ab_rows, diverge_row, median, write_summary  # noqa: E402 (tools/device/summarize.py)

here = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
raw = here / "raw"
MODELS = {"qwen25": "Qwen2.5-Coder-1.5B shape (synthetic)", "qwen25-1.5b": "Qwen2.5-Coder-1.5B shape (synthetic)",
          "smollm2": "SmolLM2-135M shape (synthetic)", "lfm2-1.2b": "LFM2-1.2B shape (synthetic)",
          "qwen35-0.8b": "Qwen3.5-0.8B shape (synthetic)",
          "lfm2_trained": "tests/fixtures/lfm2_trained (trained)", "qwen35_trained": "tests/fixtures/qwen35_trained (trained)"}
CONFIG = {"cand": "--attn-decode-prefetch --attn-decode-threads 256 --attn-decode-key-lanes 2",
          "t256_kl2": "--attn-decode-threads 256 --attn-decode-key-lanes 2",
          "pf": "--attn-decode-prefetch (128 threads, 1 key lane)",
          "pf_t512_kl4": "--attn-decode-prefetch --attn-decode-threads 512 --attn-decode-key-lanes 4",
          "pf_kl2": "--attn-decode-prefetch --attn-decode-key-lanes 2 (128 threads)",
          "mv_rows8": "--matvec-rows 8", "mv_rows16": "--matvec-rows 16", "mv_rows64": "--matvec-rows 64", "null": "product (null control)"}
OLD = "--attn-decode-threads 128 --attn-decode-key-lanes 1 --no-attn-decode-prefetch"


def context(path):
    a = json.load(open(path)).get("cmd_a", "")
    p, g, r = (re.search(k + r" (\d+)", a) for k in ("--prompt-lengths", "--gen", "--reps"))
    return (f"decode after a {p.group(1) if p else '?'}-token prompt" + (f", {g.group(1)} steps" if g else "")
            + (f" x {r.group(1)} repetitions per run" if r else "") + ", 2 interleaved rounds")


rows = []
for f in sorted(glob.glob(str(raw / "*.json"))):
    stem = os.path.basename(f)[:-5]
    m = re.fullmatch(r"vs_cuda_(.+)", stem)
    if m:
        rows += ab_rows(f, MODELS.get(m.group(1), m.group(1)), "prompt 512, 128 decode steps (llama-bench -d 512)",
                        "llama.cpp-cuda", wgllm_is_b=False)
        continue
    m = re.fullmatch(r"old_(.+)", stem)
    if m:
        rows += ab_rows(f, MODELS.get(m.group(1), m.group(1)), context(f), "former defaults: " + OLD, wgllm_is_b=False)
        continue
    m = re.fullmatch(r"(pf_t512_kl4|t256_kl2|mv_rows16|mv_rows64|mv_rows8|pf_kl2|null|cand|pf)_(p2048_)?(.+)", stem)
    if m:
        kind, _, model = m.groups()
        rows += ab_rows(f, MODELS.get(model, model), context(f), "default" + (" (null control)" if kind == "null" else ""),
                        wgllm_is_b=True, config=CONFIG[kind])
        continue
    m = re.fullmatch(r"diverge_(.+)", stem)
    if m:
        rows.append(diverge_row(f, MODELS.get(m.group(1), m.group(1)),
                                "real" if "trained" in m.group(1) else "synthetic", "former defaults"))
# Marginal cost of the attention kernel: p50 step with every attention dispatch twice minus without.
for cfg in ("product", "cand"):
    diffs = []
    for r in (1, 2):
        try:
            a, n = (json.load(open(raw / f"marginal_{cfg}_{k}_r{r}.json"))["runs"][0]["decode_latency_ms_p50"]
                    for k in ("attention", "none"))
        except (OSError, KeyError, IndexError):
            continue
        diffs.append((a - n) * 1000.0)
    if diffs:
        rows.append({"model": MODELS["qwen25"], "weights": "synthetic", "metric": "attention_marginal_us_per_step",
                     "context": f"decode after a 512-token prompt, 28 attention dispatches per step; rounds: "
                                + ", ".join(f"{d:.1f}" for d in diffs),
                     "wgllm": median(diffs), "ratio_ci": None,
                     "config": "product" if cfg == "product" else CONFIG["cand"], "source": f"marginal_{cfg}_*.json"})
write_summary(here, rows, "gpu_before.txt")
