#!/usr/bin/env python3
"""Plots a `wgllm bench --json` result: per-token decode latency trace (step changes stay visible)
with the p50/p90/p99 of all measured steps as horizontal lines, and, when the run used --traffic, a
stacked bar of one decode step's bytes by category per kernel, annotated with each kernel's
achieved GB/s as a percentage of the measured copy bandwidth (when the JSON has it).
Usage: python3 tools/plots/plot_bench.py RESULT.json OUT_PREFIX   (writes OUT_PREFIX_latency.png, OUT_PREFIX_traffic.png)
or `make plots RESULT=r.json`. Needs matplotlib (scripts/setup_plots.sh installs the pinned version)."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def main():
    res = json.load(open(sys.argv[1]))
    prefix = sys.argv[2]
    title = f"{res.get('backend', '')} ({res.get('configuration', '')})"
    fig, ax = plt.subplots(figsize=(9, 4))
    for run in res["runs"]:
        lat = run["decode_latency_ms_last_rep"]
        line, = ax.plot(range(1, len(lat) + 1), lat, lw=1, label=f"prompt {run['n_prompt']} (last rep)")
        for q, style in (("p50", "--"), ("p90", "-."), ("p99", ":")):
            v = run.get(f"decode_latency_ms_{q}")
            if v is not None:
                ax.axhline(v, color=line.get_color(), ls=style, lw=0.9, label=f"{q} {v:.2f} ms (all reps)")
    ax.set_xlabel("decode step")
    ax.set_ylabel("latency (ms)")
    ax.set_title("per-token decode latency, " + title, fontsize=9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(prefix + "_latency.png", dpi=110)
    t = res.get("traffic_decode_step")
    if t:
        cats = ["weights", "activations", "kv_cache", "recurrent_state", "logits"]
        ks = sorted(t["kernels"], key=lambda k: -k["bytes"])
        fig, ax = plt.subplots(figsize=(9, 4.5))
        bottom = [0.0] * len(ks)
        for c in cats:
            vals = [k.get(c, 0) / 1e6 for k in ks]
            ax.bar([k["kernel"] for k in ks], vals, bottom=bottom, label=c)
            bottom = [b + v for b, v in zip(bottom, vals)]
        bw = t.get("copy_bandwidth", {}).get("copy_GBps")
        if bw:
            for i, k in enumerate(ks):
                if k.get("achieved_GBps"):
                    ax.annotate(f"{100 * k['achieved_GBps'] / bw:.0f}%", (i, bottom[i]), ha="center", va="bottom", fontsize=7)
        ax.set_ylabel("MB per decode step")
        note = f"\nbar labels: achieved GB/s as % of the measured copy bandwidth ({bw:.0f} GB/s)" if bw else ""
        ax.set_title(f"bytes moved per decode step by kernel and category ({t['total']['all'] / 1e6:.1f} MB), " + title + note, fontsize=9)
        ax.tick_params(axis="x", rotation=60, labelsize=8)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(prefix + "_traffic.png", dpi=110)


if __name__ == "__main__":
    main()
