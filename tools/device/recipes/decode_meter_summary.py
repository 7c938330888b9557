#!/usr/bin/env python3
"""Usage: python3 tools/device/recipes/decode_meter_summary.py DIR (a results folder with commit.txt and raw/, raw/ = the
unpacked results.tgz of tools/device/recipes/decode_meter.sh). Writes DIR/summary.json (../shared/RESULTS.md shape) from raw/ (the results of
tools/device/recipes/decode_meter.sh on the H200; synthetic weights of SmolLM2-135M's and
Qwen2.5-1.5B's shapes): the null A/Bs with the old meter (decode_tok_s, 128 steps x 1) and the new
(decode_ms_p50, 256 steps x 3), and a small effect (--no-fuse-attn-combine) under the new meter.
Rows: B as `wgllm`, A as `peer_value`, B/A's 95% interval, the noise band (bench ab's)."""
import glob
import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from summarize import ab_rows, write_summary  # noqa: E402 (tools/device/summarize.py)

here = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
raw = here / "raw"


MODELS = {"smollm2": "SmolLM2-135M shape (synthetic)", "qwen25-1.5b": "Qwen2.5-1.5B shape (synthetic)"}
rows = []
for f in sorted(glob.glob(str(raw / "*.json"))):
    stem = os.path.basename(f)[:-5]
    m = next((k for k in MODELS if stem.endswith("_" + k)), None)
    if m is None:
        continue
    kind = stem[: -len(m) - 1]
    old = kind == "null_old"
    ctx = "prompt 512, " + ("128 steps x 1 repetition per run" if old else "256 steps x 3 repetitions per run")
    peer, config = ("product (null control)", "product") if kind.startswith("null") else ("product", "switch --no-fuse-attn-combine")
    rows += ab_rows(f, MODELS[m], ctx, peer, wgllm_is_b=True, config=config)
write_summary(here, rows, "gpu_before.txt")
