#!/usr/bin/env python3
"""Writes DIR/summary.json (the shape of ../shared/RESULTS.md) from DIR/raw/llamacpp_agreement_test*.log, the
output of tests/e2e/llamacpp_agreement_test (issue 13 item 3: agreement with llama.cpp's CPU backend on the real
GGUFs). Rows per model file: the perplexity (wgllm vs llama-perplexity, same method, text slice and n_ctx) and
the greedy continuations identical to llama.cpp's. DIR needs commit.txt and raw/device.txt (the machine, as
`wgllm devices` printed it). Usage: python3 tools/quality/agreement_summary.py DIR"""
import glob
import pathlib
import re
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "device"))
from summarize import write_summary  # noqa: E402 (tools/device/summarize.py)

here = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()
PPL = re.compile(r"\[(?P<file>[^\]]+)\] n_ctx (?P<ctx>\d+), (?P<chunks>\d+) chunks, (?P<scored>\d+) tokens scored "
                 r"\((?P<tokens>\d+) tokens\): wgllm (?P<backend>.+?) PPL (?P<ppl>[\d.]+) \+/- (?P<err>[\d.]+) "
                 r"\((?P<s>[\d.]+) s\), llama-perplexity (?P<peer>[\d.]+) \+/- (?P<perr>[\d.]+)")
GREEDY = re.compile(r"\[(?P<file>[^\]]+)\] (?P<n>\d+) of (?P<of>\d+) greedy continuations identical")
rows = []
for log in sorted(glob.glob(str(here / "raw" / "llamacpp_agreement_test*.log"))):
    src = pathlib.Path(log).name
    for line in open(log, errors="replace"):
        m = PPL.search(line)
        if m:
            ppl, peer = float(m["ppl"]), float(m["peer"])
            # WGLLM_AGREE_SWITCHES, printed as "<backend> [<switches>]": the configuration is not the product's
            sw = re.search(r" \[(.+)\]$", m["backend"])
            rows.append({"model": m["file"], "weights": "real", "metric": "perplexity_ppl",
                         "context": f"llama-perplexity's method: n_ctx {m['ctx']}, {m['chunks']} chunks, "
                                    f"{m['scored']} tokens scored; wgllm on {m['backend']} (+/- {m['err']}), "
                                    f"llama.cpp +/- {m['perr']}; relative difference {abs(ppl - peer) / peer:.3%}",
                         "wgllm": ppl, "peer": "llama.cpp-cpu", "peer_value": peer, "ratio_ci": None,
                         "config": ("product + " + sw[1]) if sw else "product", "source": src})
        m = GREEDY.search(line)
        if m:
            rows.append({"model": m["file"], "weights": "real", "metric": "greedy_identical_fraction",
                         "context": f"{m['n']} of {m['of']} greedy continuations identical to llama.cpp's",
                         "wgllm": int(m["n"]) / int(m["of"]), "peer": "llama.cpp-cpu", "peer_value": 1.0,
                         "ratio_ci": None, "config": "product", "source": src})
if not rows:
    sys.exit(f"{here}/raw: no agreement lines found")
write_summary(here, rows)
