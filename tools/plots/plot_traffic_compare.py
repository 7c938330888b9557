#!/usr/bin/env python3
"""Before/after plot of one decode step's traffic table (issue 11): two `wgllm bench --traffic --json`
results of the same model, each a column of kernels. Left: bytes per step by category (weights,
activations, KV cache, recurrent state, logits) per kernel, stacked; right: each kernel's GPU time per
step (timestamp queries around every dispatch, which stretch a step: compare the two runs' shapes, not
the absolute times with the step's wall time), with the dispatch count per step and the step's p50
wall time in the titles. Kernels fused away in the later run appear in the earlier run only.
Usage: python3 tools/plots/plot_traffic_compare.py BEFORE.json AFTER.json OUT.png [--labels "A" "B"]
Needs matplotlib (scripts/setup_plots.sh installs the pinned version)."""
import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

CATS = ["weights", "activations", "kv_cache", "recurrent_state", "logits"]
COLORS = ["#4c72b0", "#dd8452", "#55a868", "#8172b3", "#c44e52"]


def load(path):
    r = json.load(open(path))
    t = r.get("traffic_decode_step")
    if not t:
        raise SystemExit(f"{path}: no traffic_decode_step (run `wgllm bench --traffic --json ...`)")
    run = r["runs"][0]
    return {"backend": r.get("backend", "?"), "dispatches": t.get("dispatches"), "gpu_us": t.get("gpu_us"),
            "kernels": {k["kernel"]: k for k in t["kernels"]}, "p50_ms": run.get("decode_latency_ms_p50"),
            "prompt": run.get("n_prompt"), "total": t["total"]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("out")
    ap.add_argument("--labels", nargs=2, default=None)
    a = ap.parse_args()
    runs = [load(a.before), load(a.after)]
    labels = a.labels or [a.before, a.after]
    names = sorted(set(runs[0]["kernels"]) | set(runs[1]["kernels"]),
                   key=lambda k: -max(r["kernels"].get(k, {}).get("bytes", 0) for r in runs))
    fig, (ax_b, ax_t) = plt.subplots(1, 2, figsize=(13, 0.42 * len(names) + 2.2))
    h = 0.38
    for ri, r in enumerate(runs):
        ys = [i + (ri - 0.5) * h for i in range(len(names))]
        left = [0.0] * len(names)
        for ci, c in enumerate(CATS):
            v = [r["kernels"].get(n, {}).get(c, 0) / 1e6 for n in names]
            ax_b.barh(ys, v, h, left=left, color=COLORS[ci], alpha=1.0 if ri else 0.45,
                      label=c if ri == 1 else None, edgecolor="black" if ri else "none", linewidth=0.4)
            left = [x + y for x, y in zip(left, v)]
        us = [r["kernels"].get(n, {}).get("gpu_us", 0) for n in names]
        ax_t.barh(ys, us, h, color="#333333" if ri else "#aaaaaa",
                  label=f"{labels[ri]}: {r['dispatches']} dispatches, p50 step {r['p50_ms']:.2f} ms")
    for ax in (ax_b, ax_t):
        ax.set_yticks(range(len(names)))
        ax.set_yticklabels(names)
        ax.invert_yaxis()
    ax_b.set_xlabel("MB per decode step (faint: before, outlined: after)")
    ax_b.set_title(f"bytes by category: {runs[0]['total']['all'] / 1e6:.1f} MB -> {runs[1]['total']['all'] / 1e6:.1f} MB",
                   fontsize=9)
    ax_b.legend(fontsize=8, loc="lower right")
    ax_t.set_xlabel("GPU us per decode step (light: before, dark: after)")
    ax_t.set_title("time per kernel (timestamp-inflated; p50 wall time in the legend)", fontsize=9)
    ax_t.legend(fontsize=8, loc="lower right")
    fig.suptitle(f"decode step after a {runs[1]['prompt']}-token prompt: {labels[0]} ({runs[0]['backend']}) vs "
                 f"{labels[1]} ({runs[1]['backend']})", fontsize=10)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print(a.out)


if __name__ == "__main__":
    main()
