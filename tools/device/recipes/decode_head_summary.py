#!/usr/bin/env python3
"""Usage: python3 tools/device/recipes/decode_head_summary.py DIR (a results folder with commit.txt and raw/, raw/ =
the unpacked results.tgz of one call of tools/device/recipes/decode_head.sh). Writes DIR/summary.json (the shape of
../shared/RESULTS.md) from raw/:
  null_<model>           `bench ab` B = A = product (null control)
  argmax1_<model>        `bench ab` A = --argmax-workgroups 1 (one workgroup), B = product (wgllm = B)
  q6kwide_<model>        `bench ab` A = --no-q6k-packed (Q6_K widened), B = product (wgllm = B)
  cand<N>_<model>        `bench ab` A = product, B = candidate N of raw/cands.txt (wgllm = B)
  vs_cuda_<model>        `bench ab` A = wgllm product, B = llama.cpp CUDA's llama-bench
  traffic_<model>.json   `bench --traffic`: TTFT, decode tok/s, dispatches per step, fraction of copy bandwidth
  diverge_q6k_<model>    `bench diverge` product against q6k_packed=0: prompts whose greedy text departs
Every file is a synthetic-weights model (tools/synth)."""
import glob
import os
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from summarize import ab_rows, bench_rows, diverge_row, write_summary  # noqa: E402 (tools/device/summarize.py)

here = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
raw = here / "raw"
MODELS = {"qwen25-1.5b": "Qwen2.5-Coder-1.5B shape (synthetic)", "smollm2": "SmolLM2-135M shape (synthetic)",
          "lfm2-1.2b": "LFM2-1.2B shape (synthetic)", "qwen35-0.8b": "Qwen3.5-0.8B shape (synthetic)"}
cands = {}
if (raw / "cands.txt").exists():
    for line in (raw / "cands.txt").read_text().splitlines():
        k, _, v = line.partition(": ")
        cands[k] = v
CTX = "decode after a 512-token prompt, 256 steps x 3 repetitions per run, 2 interleaved rounds"
rows = []
for f in sorted(glob.glob(str(raw / "*.json"))):
    stem = os.path.basename(f)[:-5]
    m = re.fullmatch(r"vs_cuda_(.+)", stem)
    if m:
        rows += ab_rows(f, MODELS[m.group(1)], "prompt 512, 128 decode steps (llama-bench -d 512)", "llama.cpp-cuda",
                        wgllm_is_b=False)
        continue
    m = re.fullmatch(r"(null|argmax1|q6kwide|cand\d+)_(.+)", stem)
    if m:
        kind, model = m.groups()
        peer, config = {"null": ("product (null control)", "product"),
                        "argmax1": ("--argmax-workgroups 1 (one workgroup)", "product"),
                        "q6kwide": ("--no-q6k-packed (Q6_K widened to 10 bits per weight)", "product")}.get(
                            kind, ("product", cands.get(kind, kind)))
        rows += ab_rows(f, MODELS[model], CTX + ("; TTFT of the same runs" if kind == "q6kwide" else ""), peer,
                        wgllm_is_b=True, config=config)
        continue
    m = re.fullmatch(r"traffic_(.+)", stem)
    if m:
        rows += bench_rows(f, MODELS[m.group(1)])
        continue
    m = re.fullmatch(r"diverge_q6k_(.+)", stem)
    if m:
        rows.append(diverge_row(f, MODELS[m.group(1)], "synthetic", "q6k_packed=0"))
write_summary(here, rows, "gpu_before.txt")
