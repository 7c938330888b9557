#!/usr/bin/env python3
"""Usage: python3 tools/device/recipes/shared_device_summary.py DIR (a results folder with commit.txt and raw/,
raw/ = the unpacked results.tgz of tools/device/recipes/shared_device.sh). Writes DIR/summary.json
(../shared/RESULTS.md shape):
  tests.txt                                      one line per test binary run in one process: "<binary> [flags]: exit
                                                 <rc>, <n> ok, <m> failed" (rows: metric tests_passed_count, peer
                                                 "hybrid_dispatch_test_old" = the binary before the shared device)
  null_product_<model>_p<P>.json                 `bench ab`, A = B = product (null controls)
  chunklong_off_vs_product_qwen35-0.8b_p4096     A = product, B = --gdn-chunk-long 0
  conv_in_on_vs_product_lfm2-1.2b_p512           A = product, B = --fuse-conv-in
Rows of the A/Bs: B as `wgllm`, A as `peer_value`, B/A's 95% interval and the noise band."""
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from summarize import ab_rows_by_stem, write_summary  # noqa: E402 (tools/device/summarize.py)

here = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
raw = here / "raw"
rows = []
for model, label in (("qwen35-0.8b", "Qwen3.5-0.8B shape (synthetic)"), ("lfm2-1.2b", "LFM2-1.2B shape (synthetic)")):
    rows += ab_rows_by_stem(raw, label, {
        f"null_product_{model}": ("product (null control)", "product"),
        f"chunklong_off_vs_product_{model}": ("product", "switch --gdn-chunk-long 0 (the long chunk off)"),
        f"conv_in_on_vs_product_{model}": ("product", "switch --fuse-conv-in"),
    })
tests = {}
for line in (raw / "tests.txt").read_text().splitlines():
    m = re.match(r"(\S+)\s*(.*?): exit (\d+), (\d+) ok, (\d+) failed", line)
    if m:
        tests[m[1]] = {"flags": m[2], "exit": int(m[3]), "ok": int(m[4]), "failed": int(m[5])}
old = tests.get("hybrid_dispatch_test_old")
for name, t in tests.items():
    if name == "hybrid_dispatch_test_old":
        continue
    row = {"model": "test fixtures", "weights": "trained", "metric": "tests_passed_count",
           "context": f"{name} {t['flags']}".strip() + f", one process; exit {t['exit']}, {t['failed']} failed",
           "wgllm": t["ok"], "ratio_ci": None, "noise_band": None, "config": "product", "source": "tests.txt"}
    if name == "hybrid_dispatch_test" and old:
        row.update(peer="hybrid_dispatch_test_old (one device per model)", peer_value=old["ok"])
        row["context"] += f"; the old binary: exit {old['exit']}, {old['failed']} failed"
    rows.append(row)
write_summary(here, rows, "gpu.txt")
