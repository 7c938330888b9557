#!/usr/bin/env python3
"""Usage: python3 tools/device/recipes/gdn_scan_summary.py DIR (a results folder with commit.txt and raw/, raw/ = the
unpacked results.tgz of tools/device/recipes/gdn_scan.sh). Writes DIR/summary.json (../shared/RESULTS.md shape) from raw/ (the results of
tools/device/recipes/gdn_scan.sh on the H200; synthetic Qwen3.5-0.8B-shaped weights):
  bench_gdn_t<T>.json   `wgllm bench gdn`: the scan kernel's GPU time per (chunk, scan tile) against the
                        one-column scan (--gdn-scan-cols 0) at the same chunk; every tile's bits checked
  <name>.json           `wgllm bench ab`: scan_cols0_vs_product_p<P> (A = --gdn-scan-cols 0, B = product),
                        null_product_p512 (A = B = product), chunk<C>_vs_product_p<P> (A = product,
                        B = --gdn-chunk C), decode_control_cols0_vs_product (A = cols 0, B = product)
Rows: the candidate (B) as `wgllm`, the control (A) as `peer_value`, B/A's 95% interval, the noise band."""
import glob
import json
import os
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from summarize import ab_rows_by_stem, write_summary  # noqa: E402 (tools/device/summarize.py)

here = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
raw = here / "raw"
MODEL = "Qwen3.5-0.8B shape (synthetic)"


rows = []
for f in sorted(glob.glob(str(raw / "bench_gdn_t*.json"))):
    j = json.load(open(f))
    T = j.get("tokens", os.path.basename(f)[11:-5])
    by = {(v["gdn_chunk"], v["gdn_scan_cols"]): v for v in j["variants"]}
    for (c, n), v in sorted(by.items()):
        if n == 0 or (c, 0) not in by:
            continue
        base = by[(c, 0)]
        rows.append({"model": "Qwen3.5-0.8B linear-attention layer (16/16 heads of 128), random operands",
                     "weights": "synthetic", "metric": "gdn_chunk_scan_ms",
                     "context": f"prompt {T}, chunk {c}, scan tile {n} columns",
                     "wgllm": round(v["kernels_median_us"]["gdn_chunk_scan"] / 1000.0, 3),
                     "peer": "--gdn-scan-cols 0 (one-column scan)",
                     "peer_value": round(base["kernels_median_us"]["gdn_chunk_scan"] / 1000.0, 3),
                     "ratio_ci": None, "noise_band": None, "config": f"--gdn-chunk {c} --gdn-scan-cols {n}",
                     "same_bits": v.get("same_bits_as_first_of_chunk"), "source": os.path.basename(f)})

AB = {  # file stem prefix: (peer label, config of B, context)
    "scan_cols0_vs_product": ("--gdn-scan-cols 0", "product"),
    "null_product": ("product (null control)", "product"),
    "chunk32_vs_product": ("product", "switch --gdn-chunk 32"),
    "chunk64_vs_product": ("product", "switch --gdn-chunk 64"),
    "decode_control_cols0_vs_product": ("--gdn-scan-cols 0", "product"),
}
rows += ab_rows_by_stem(raw, MODEL, AB)

write_summary(here, rows, "gpu.txt")
