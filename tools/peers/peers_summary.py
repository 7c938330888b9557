#!/usr/bin/env python3
"""Markdown summary of a bench/results/2026-11-29-h200/session2/peers_vulkan/recipe.sh result folder: every `wgllm bench ab` JSON named
vs_*.json (A = wgllm, B = the peer) as one row per metric with B/A, its 95% bootstrap interval and
the noise band of the control arms, plus the copy bandwidth of any `wgllm bench --traffic` JSON.
Usage: python3 tools/peers/peers_summary.py DIR"""
import glob
import json
import os
import sys


def main():
    d = sys.argv[1]
    print("| comparison | metric | wgllm (A, median) | peer (B, median) | B/A [95% CI] | noise band | verdict |")
    print("|---|---|---|---|---|---|---|")
    for f in sorted(glob.glob(os.path.join(d, "vs_*.json"))):
        j = json.load(open(f))
        for name, m in j["metrics"].items():
            a = sorted(m["a1"] + m["a2"])
            b = sorted(m["b"])
            r = m["ratio_b_over_a"]
            print(f"| {os.path.basename(f)[3:-5]} | {name} | {a[len(a) // 2]:.4g} | {b[len(b) // 2]:.4g} | "
                  f"{r['mid']:.3f} [{r['lo']:.3f}, {r['hi']:.3f}] | ±{100 * m['noise_band']:.1f}% | {m['verdict']} |")
    for f in sorted(glob.glob(os.path.join(d, "wgllm_*.json"))):
        j = json.load(open(f))
        t = j.get("traffic_decode_step", {})
        c = t.get("copy_bandwidth")
        if c:
            print(f"\n{os.path.basename(f)}: copy bandwidth {c['copy_GBps']:.0f} GB/s (copy engine "
                  f"{c['copy_engine']['best_GBps']:.0f}, copy_vec4 {c['copy_kernel_vec4']['best_GBps']:.0f}, "
                  f"read_vec4 {c['read_kernel_vec4']['best_GBps']:.0f}; {c['bytes'] >> 20} MiB, timing "
                  f"{c['timing_copy']}/{c['timing_kernels']}); decode step {t.get('achieved_GBps', 0):.0f} GB/s "
                  f"= {100 * t.get('fraction_of_copy_bw', 0):.1f}% of it")


if __name__ == "__main__":
    main()
