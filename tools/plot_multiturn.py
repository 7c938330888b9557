#!/usr/bin/env python3
"""Plots `wgllm bench multi-turn --json FILE`: per-turn TTFT with the session (snapshots, only new
tokens prefilled) vs full recompute (whole conversation prefilled), and the prompt length.

usage: python3 tools/plot_multiturn.py RESULT.json OUT.png   (needs matplotlib)
"""
import json
import sys

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src: str, out: str) -> None:
    with open(src) as f:
        r = json.load(f)
    turns = r["turns"]
    x = [t["turn"] for t in turns]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    ax.plot(x, [t["ttft_recompute_ms"] for t in turns], "o-", label="full recompute (whole conversation prefilled)")
    ax.plot(x, [t["ttft_session_ms"] for t in turns], "s-", label="session (new tokens only; snapshots)")
    ax.set_xlabel("turn")
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.set_ylabel("time to first token (ms)")
    ax.set_ylim(bottom=0)
    ax2 = ax.twinx()
    ax2.plot(x, [t["prompt_tokens"] for t in turns], ":", color="gray", label="conversation length (tokens)")
    ax2.set_ylabel("conversation length (tokens)", color="gray")
    ax2.set_ylim(bottom=0)
    lines = ax.get_legend_handles_labels()
    lines2 = ax2.get_legend_handles_labels()
    ax.legend(lines[0] + lines2[0], lines[1] + lines2[1], loc="upper left", fontsize=8)
    ax.set_title(f"{r['model']} on {r['backend']}: {r['turn_tokens']}-token turns, {r['reply_tokens']}-token replies",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"wrote {out}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
