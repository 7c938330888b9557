#!/usr/bin/env bash
# H200: chunked submission (--submit-chunk N: submit every N dispatches so the GPU starts while the
# host records the rest of the forward). SmolLM2-135M-Instruct Q4_1 (real weights) and the trained
# hybrids. Sweep of N with the per-step split (record / submit / wait / GPU), then interleaved
# `bench ab` of the best candidate against one submission per forward, at prompts 512 and 4096.
# Staging: python3 tools/device/pack.py --bin wgllm fusion_switches_test --model ~/.cache/wgllm/models/SmolLM2-135M-Instruct.Q4_1.gguf --gl
# then `bash tools/device/recipes/submit_chunk.sh store` for all planned calls but the last, `... measure` last.
# CHUNK (default 32): the candidate for the A/B; ROUNDS (default 5).
set -u
stage=${1:-measure}
source tools/device/remote.sh
[ "$stage" = store ] && { $B devices 2>&1 | head -3; exit 0; }
wg_results  # remote.sh: T0, R=$W/res (emptied), packed into $OUT/results.tgz on exit
GGUF=$(wg_model SmolLM2-135M-Instruct.Q4_1.gguf) || exit 1
wg_gpu_check | tee $R/gpu.txt
[ -x $W/bin/fusion_switches_test ] && { $W/bin/fusion_switches_test --gtest_filter='SubmitChunk.*:ShaderRuntimeChecks.*' > $R/test_fusion_switches.log 2>&1; echo "fusion_switches_test (SubmitChunk, ShaderRuntimeChecks): exit $?"; }
for n in 0 8 16 32 64 96; do
  $B bench -m $GGUF --prompt-lengths 512 --gen 256 --reps 2 --submit-chunk $n --step-gpu-times --json $R/sweep_chunk$n.json 2>&1 \
    | grep -E "^\| (product|NON)|decode step" | sed "s/^/chunk $n: /"
done
el "sweep"
C=${CHUNK:-32}
for P in 512 4096; do
  G=128; [ $P = 4096 ] && G=64
  timeout 250 $B bench ab --a "bench -m $GGUF --prompt-lengths $P --gen $G --reps 1" \
    --b "bench -m $GGUF --prompt-lengths $P --gen $G --reps 1 --submit-chunk $C" --rounds ${ROUNDS:-5} \
    --metric ttft_ms,decode_tok_s --json $R/ab_SmolLM2-135M-Instruct-Q4_1__submit-chunk${C}_p$P.json 2>&1 | tail -3
  el "ab p$P"
done
for m in tests/fixtures/qwen35_trained/qwen35_trained.bf16.gguf tests/fixtures/lfm2_trained/lfm2_trained.bf16.gguf; do
  n=$(basename $m .bf16.gguf)
  for c in 0 $C; do
    $B bench -m $m --prompt-lengths 512 --gen 128 --reps 2 --submit-chunk $c --json $R/${n}_chunk$c.json 2>&1 | grep -E "^\| (product|NON)|decode step" | sed "s/^/$n chunk $c: /"
  done
done
el "hybrids"
