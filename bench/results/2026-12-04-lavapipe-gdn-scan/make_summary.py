#!/usr/bin/env python3
"""Writes summary.json (../shared/RESULTS.md shape) from gdn_r1.json and gdn_r2.json of `wgllm bench gdn`.
One row per (chunk, scan tile != 0): the scan kernel's GPU time (mean of the two rounds' medians) against
the one-column scan (--gdn-scan-cols 0, the default on software adapters) at the same chunk; noise_band:
the relative difference between the two rounds of the control arm (cols 0), the largest over chunks."""
import json
import pathlib

here = pathlib.Path(__file__).resolve().parent
rounds = [json.load(open(here / f"gdn_r{r}.json")) for r in (1, 2)]


def scan_ms(run, chunk, cols):
    for v in run["variants"]:
        if v["gdn_chunk"] == chunk and v["gdn_scan_cols"] == cols:
            assert v["same_bits_as_first_of_chunk"], (chunk, cols)
            return v["kernels_median_us"]["gdn_chunk_scan"] / 1000.0
    raise KeyError((chunk, cols))


chunks = sorted({v["gdn_chunk"] for v in rounds[0]["variants"]})
cols = sorted({v["gdn_scan_cols"] for v in rounds[0]["variants"]} - {0})
noise = max(abs(scan_ms(rounds[0], c, 0) - scan_ms(rounds[1], c, 0)) / scan_ms(rounds[0], c, 0) for c in chunks)
rows = []
for c in chunks:
    base = sum(scan_ms(r, c, 0) for r in rounds) / 2
    for n in cols:
        val = sum(scan_ms(r, c, n) for r in rounds) / 2
        rows.append({"model": "Qwen3.5-0.8B linear-attention layer (16/16 heads of 128), random operands",
                     "weights": "synthetic", "metric": "gdn_chunk_scan_ms",
                     "context": f"prompt 512, chunk {c}, scan tile {n} columns", "wgllm": round(val, 2),
                     "peer": "default", "peer_value": round(base, 2), "ratio_ci": None,
                     "noise_band": round(noise, 4), "config": f"--gdn-chunk {c} --gdn-scan-cols {n}"})
commit = (here / "commit.txt").read_text().strip()
json.dump({"commit": commit, "date": "2026-12-04", "device": rounds[0]["adapter"] + " (lavapipe, 2-core CI machine)",
           "rows": rows}, open(here / "summary.json", "w"), indent=1)
print(f"{len(rows)} rows, noise band {noise:.4f}")
