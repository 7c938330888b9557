#!/usr/bin/env python3
"""Usage: python3 tools/device/recipes/coop_summary.py DIR (a results folder with commit.txt and raw/callNN/, each
the unpacked results.tgz of one call of tools/device/recipes/coop.sh). Writes DIR/summary.json (the shape of
../shared/RESULTS.md) from every call folder:
  matmul_<shapes>.json     `bench matmul --coop --int8` (q4_K): per variant and shape its median time (op alone)
  coop_<model>_<n>.json    `bench ab` TTFT of an n-token prompt, A = product, B = --matmul-coop (wgllm = B)
  coopx_<model>_<n>.json   `bench ab` TTFT, A = --matmul-coop, B = --matmul-coop with the tile of coop_best_tile.txt
  decode_ctl.json          `bench ab` decode after 512, A = product, B = --matmul-coop (a control: no kernel of a
                           decode step uses the cooperative matrices)
The GPU from the first call's gpu_before.txt. Every model file is a synthetic-weights file (tools/synth)."""
import glob
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from summarize import ab_rows, op_rows, write_summary  # noqa: E402 (tools/device/summarize.py)

here = pathlib.Path(sys.argv[1])
rows = []
calls = sorted(p for p in (here / "raw").iterdir() if p.is_dir() and p.name.startswith("call"))
for call in calls:
    for f in sorted(glob.glob(str(call / "matmul_*.json"))):
        for r in op_rows(f, "Qwen2.5-1.5B / Qwen3.5-2B prefill shapes (q4_K, random blocks)"):
            r["source"] = f"{call.name}/{r['source']}"
            rows.append(r)
    for f in sorted(glob.glob(str(call / "*.json"))):
        stem = pathlib.Path(f).stem
        parts = stem.split("_")
        if parts[0] in ("coop", "coopx") and len(parts) == 3:
            model, n = parts[1], parts[2]
            peer = "product (int8 tiles)" if parts[0] == "coop" else "--matmul-coop (64x64 tile)"
            cfg = "switch --matmul-coop" if parts[0] == "coop" else "switch --matmul-coop + tile (coop_best_tile.txt)"
            new = ab_rows(f, f"{model}.synthetic.gguf", f"prompt {n}", peer, True, cfg)
        elif stem == "decode_ctl":
            new = ab_rows(f, "qwen25-1.5b.synthetic.gguf", "prompt 512, decode (control)", "product", True,
                          "switch --matmul-coop")
        else:
            continue
        for r in new:
            r["source"] = f"{call.name}/{r['source']}"
        rows += new
gpu = next((c / "gpu_before.txt" for c in calls if (c / "gpu_before.txt").exists()), None)
if gpu is None:
    sys.exit("no call folder has gpu_before.txt")
write_summary(here, rows, gpu_file=str(gpu.relative_to(here / "raw")))
