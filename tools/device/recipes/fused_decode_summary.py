#!/usr/bin/env python3
"""Usage: python3 tools/device/recipes/fused_decode_summary.py DIR (a results folder with commit.txt and raw/, raw/ = the
unpacked results.tgz of tools/device/recipes/fused_decode.sh). Writes DIR/summary.json (../shared/RESULTS.md shape):
  fused_vs_product_<model>_p<P>.json   `bench ab` A = product, B = --fused-decode, decode after a P-token prompt
  null_product_<model>_p512.json       `bench ab` A = B = product (the null control)
  conv_in_off_vs_product_<model>_p512  `bench ab` A = product, B = --no-fuse-conv-in
  diverge_<name>.json                  `bench diverge --b fused_decode=1` (diverge_null_*: --b fuse_qk_norm=0, a
                                       bit-exact switch): prompts whose greedy text departs, and where
(raw/device.txt, when present, names the adapter of a run elsewhere, e.g. lavapipe; conv_in_off_vs_matvec_*: the
--no-fuse-conv-in A/B with --matvec-subgroup in both arms.)
Rows: B as `wgllm`, A as `peer_value` (`peer` "default"), B/A's 95% interval and the noise band; the divergence
rows carry the count of diverged prompts as `wgllm` and the earliest departing token in `context`."""
import glob
import json
import os
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from summarize import ab_rows, write_summary  # noqa: E402 (tools/device/summarize.py)

here = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
raw = here / "raw"
SYNTH = {"lfm2-1.2b": "LFM2-1.2B shape (synthetic)", "qwen35-0.8b": "Qwen3.5-0.8B shape (synthetic)"}
TRAINED = {"lfm2_trained": "tests/fixtures/lfm2_trained (trained, real)",
           "qwen35_trained": "tests/fixtures/qwen35_trained (trained, real)"}
rows = []
for f in sorted(glob.glob(str(raw / "*.json"))):
    stem = os.path.basename(f)[:-5]
    m = re.fullmatch(r"(fused_vs_product|null_product|conv_in_off_vs_product|conv_in_off_vs_matvec)_(.+)_p(\d+)", stem)
    if m:
        kind, model, p = m.groups()
        ab = json.load(open(f))
        a_cmd = ab.get("cmd_a", "")
        gen = re.search(r"--gen (\d+)", a_cmd)
        reps = re.search(r"--reps (\d+)", a_cmd)
        ctx = (f"decode after a {p}-token prompt" + (f", {gen.group(1)} steps" if gen else "")
               + (f" x {reps.group(1)} repetitions per run" if reps else "") + f", {ab.get('rounds', '?')} rounds")
        null = kind == "null_product"
        config = {"null_product": "product", "fused_vs_product": "--fused-decode",
                  "conv_in_off_vs_product": "--no-fuse-conv-in",
                  "conv_in_off_vs_matvec": "--no-fuse-conv-in (both arms --matvec-subgroup, which software adapters default off)"}[kind]
        rows += ab_rows(f, TRAINED.get(model) or SYNTH.get(model, model), ctx, "default" + (" (null control)" if null else ""),
                        wgllm_is_b=True, config=config)
        if model in TRAINED:
            for r in rows[-2:]:
                r["weights"] = "real"
        continue
    m = re.fullmatch(r"diverge_(null_)?(.+)", stem)
    if m:
        null, name = m.groups()
        j = json.load(open(f))
        s = j["summary"]
        first = s.get("first_divergence_min")
        model = TRAINED.get(name) or SYNTH.get(name, name)
        rows.append({"model": model, "weights": "real" if name in TRAINED else "synthetic",
                     "metric": "prompts_diverged_count",
                     "context": f"{s['prompts']} prompts x {j['gen']} greedy tokens; earliest departing token: "
                                + ("none" if first is None else str(first))
                                + ("" if first is None else f", median {s['first_divergence_median']}"),
                     "wgllm": s["diverged"], "peer": "default", "peer_value": 0, "ratio_ci": None,
                     "config": " ".join("--b " + b for b in j.get("b_sets", [])) + (" (null control: bit-exact)" if null else ""),
                     "source": os.path.basename(f)})
write_summary(here, rows, "gpu_before.txt")
