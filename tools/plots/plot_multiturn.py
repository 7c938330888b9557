#!/usr/bin/env python3
"""Plots `wgllm bench multi-turn --json FILE`: per-turn TTFT with the session (snapshots, only new
tokens prefilled) vs full recompute (whole conversation prefilled), and the prompt length.

usage: python3 tools/plots/plot_multiturn.py RESULT.json OUT.png [BASELINE.json]   (needs matplotlib)
With BASELINE (the same bench with other flags, e.g. --no-attn-tiled), its session TTFT is drawn instead
of the recompute curve,
and the title gives turn-30 / turn-2 session TTFT of both.
"""
import json
import sys

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def flags(r: dict) -> str:
    return ", ".join(f"{k}={'on' if r[k] else 'off'}" for k in ("attn_tiled", "attn_split") if k in r)


def ratio(r: dict) -> float:
    s = {t["turn"]: t["ttft_session_ms"] for t in r["turns"]}
    return s[30] / s[2] if 2 in s and 30 in s else float("nan")


def main(src: str, out: str, base: str = "") -> None:
    with open(src) as f:
        r = json.load(f)
    turns = r["turns"]
    x = [t["turn"] for t in turns]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    if not base:  # with a baseline the session curves are the point; recompute would flatten them
        ax.plot(x, [t["ttft_recompute_ms"] for t in turns], "o-", label="full recompute (whole conversation prefilled)")
    ax.plot(x, [t["ttft_session_ms"] for t in turns], "s-", label=f"session (new tokens only) {flags(r)}")
    title_extra = f"; turn30/turn2 {ratio(r):.2f}"
    if base:
        with open(base) as f:
            b = json.load(f)
        ax.plot([t["turn"] for t in b["turns"]], [t["ttft_session_ms"] for t in b["turns"]], "^--",
                label=f"session (new tokens only) {flags(b)}")
        title_extra += f" (vs {ratio(b):.2f})"
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
    ax.set_title(f"{r['model']} on {r['backend']}: {r['turn_tokens']}-token turns, {r['reply_tokens']}-token replies{title_extra}",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    print(f"wrote {out}")


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    main(*sys.argv[1:])
