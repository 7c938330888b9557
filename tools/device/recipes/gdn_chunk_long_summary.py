#!/usr/bin/env python3
"""Usage: python3 tools/device/recipes/gdn_chunk_long_summary.py DIR (a results folder with commit.txt and raw/,
raw/ = the unpacked results.tgz of tools/device/recipes/gdn_chunk_long.sh). Writes DIR/summary.json
(../shared/RESULTS.md shape) from raw/ (H200; synthetic Qwen3.5-0.8B-shaped weights):
  null_product_p4096.json                      `wgllm bench ab`, A = B = product (the null control)
  chunklong32_vs_product_p<P>.json             A = product, B = --gdn-chunk-long 32 (from 2048)
  chunklong32_from1024_vs_product_p1024.json   A = product, B = --gdn-chunk-long 32 --gdn-chunk-long-from 1024
  chunklong32_from256_vs_product_p<P>.json     A = product, B = --gdn-chunk-long 32 --gdn-chunk-long-from 256
                                               (PARTS=threshold: where the long chunk stops paying)
  chunklong16_vs_product_p4096.json            A = product, B = --gdn-chunk-long 16 (PARTS=threshold)
Rows: the candidate (B) as `wgllm`, the control (A) as `peer_value`, B/A's 95% interval, the noise band."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from summarize import ab_rows_by_stem, write_summary  # noqa: E402 (tools/device/summarize.py)

here = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
raw = here / "raw"
MODEL = "Qwen3.5-0.8B shape (synthetic)"
AB = {  # file stem prefix: (peer label, config of B)
    "null_product": ("product (null control)", "product"),
    "chunklong32_from1024_vs_product": ("product", "switch --gdn-chunk-long 32 --gdn-chunk-long-from 1024"),
    "chunklong32_from256_vs_product": ("product", "switch --gdn-chunk-long 32 --gdn-chunk-long-from 256"),
    "chunklong16_vs_product": ("product", "switch --gdn-chunk-long 16"),
    "chunklong32_vs_product": ("product", "switch --gdn-chunk-long 32"),
}
write_summary(here, ab_rows_by_stem(raw, MODEL, AB), "gpu.txt")
