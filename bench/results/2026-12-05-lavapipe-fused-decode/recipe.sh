#!/usr/bin/env bash
# lavapipe (this repository's CI adapter, a 2-core CPU machine; no GPU was lent on 2026-12-05 after
# these switches were written): --fused-decode and --fuse-conv-in on the trained LFM2 and Qwen3.5
# fixtures (tests/fixtures/*_trained: real trained weights, small shapes). Run from the repository
# root after `make build`, with nothing else running; then
#   python3 tools/device/recipes/fused_decode_summary.py bench/results/2026-12-05-lavapipe-fused-decode
#   ab       `wgllm bench ab` decode (decode_ms_p50, 64 steps x 2 repetitions per run, 3 rounds) after a
#            64- and a 512-token prompt, A = product, B = --fused-decode; a null control (A = B) at 64;
#            LFM2 --no-fuse-conv-in (B) against --fuse-conv-in (A), both arms --matvec-subgroup (the
#            matrix-vector kernel, off by default on software adapters, which the fusion needs)
#   diverge  `wgllm bench diverge --b fused_decode=1`, 24 prompts x 64 greedy tokens; a null control
#            with a bit-exact switch (fuse_qk_norm=0)
set -eu
D=bench/results/2026-12-05-lavapipe-fused-decode; R=$D/raw
mkdir -p $R
W="env $(scripts/vulkan_env.sh) build/wgllm"
$W devices 2>/dev/null | grep -m1 -iE "llvmpipe|lavapipe" | sed 's/^ *//' > $R/device.txt || true
[ -s $R/device.txt ] || echo "lavapipe (software Vulkan)" > $R/device.txt
uptime > $R/load.txt
for m in lfm2_trained qwen35_trained; do
  M=tests/fixtures/$m/$m.bf16.gguf
  for p in 64 512; do
    A="bench -m $M --prompt-lengths $p --gen 64 --reps 2"
    $W bench ab --a "$A" --b "$A --fused-decode" --metric decode_ms_p50,decode_tok_s --rounds 3 \
      --json $R/fused_vs_product_${m}_p$p.json > $R/fused_vs_product_${m}_p$p.txt 2>&1
  done
  A="bench -m $M --prompt-lengths 64 --gen 64 --reps 2"
  $W bench ab --a "$A" --b "$A" --metric decode_ms_p50,decode_tok_s --rounds 3 \
    --json $R/null_product_${m}_p64.json > $R/null_product_${m}_p64.txt 2>&1
  $W bench diverge -m $M --prompts 24 --gen 64 --b fused_decode=1 --json $R/diverge_$m.json > $R/diverge_$m.txt 2>&1
done
M=tests/fixtures/lfm2_trained/lfm2_trained.bf16.gguf
A="bench -m $M --prompt-lengths 64 --gen 64 --reps 2 --matvec-subgroup"
$W bench ab --a "$A" --b "$A --no-fuse-conv-in" --metric decode_ms_p50,decode_tok_s --rounds 3 \
  --json $R/conv_in_off_vs_matvec_lfm2_trained_p64.json > $R/conv_in_off_vs_matvec_lfm2_trained_p64.txt 2>&1
$W bench diverge -m $M --prompts 24 --gen 64 --b fuse_qk_norm=0 --json $R/diverge_null_lfm2_trained.json \
  > $R/diverge_null_lfm2_trained.txt 2>&1
uptime >> $R/load.txt
git rev-parse --short HEAD > $D/commit.txt
