#!/usr/bin/env bash
# lavapipe (this repository's CI adapter; 2-core machine): `wgllm bench gdn` on the Qwen3.5-0.8B
# linear-attention shape (16 key / 16 value heads of 128; random operands), 512 tokens, chunks 16 / 32 / 64,
# scan tiles 0 (one column per invocation) and 4 / 8 / 16 columns in workgroup memory; 2 rounds run
# one after another (each round times every variant, 3 repetitions after a warm-up, GPU timestamps).
# Run from the repository root after `make build`; then python3 make_summary.py in this folder.
set -eu
D=bench/results/2026-12-04-lavapipe-gdn-scan
uptime > $D/load.txt
for r in 1 2; do
  env $(scripts/vulkan_env.sh) build/wgllm bench gdn --tokens 512 --chunks 16,32,64 --scan-cols 0,4,8,16 --reps 3 \
    --json $D/gdn_r$r.json 2> $D/gdn_r$r.txt
done
uptime >> $D/load.txt
git rev-parse --short HEAD > $D/commit.txt
