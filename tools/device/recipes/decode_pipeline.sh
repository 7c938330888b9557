#!/usr/bin/env bash
# H200: pipelined greedy decode (--decode-pipeline: the argmax id stays on the GPU, step i+1 is
# recorded and submitted before step i's id is read). SmolLM2-135M-Instruct Q4_1 (real weights)
# and the trained hybrids (Qwen3.5: the speculated step also copies the recurrent state for its
# undo). First the parity tests on the device (tokens and final state identical to the plain
# loop), then the per-step split with GPU times (record / submit / wait / GPU and the host work
# hidden behind the GPU, overlap_us_p50) for off / on at the product --submit-chunk, then
# interleaved `bench ab` (two control arms + candidate, noise band) at prompts 512 and 4096.
# Staging: python3 tools/device/pack.py --bin wgllm decode_pipeline_test fusion_switches_test --model ~/.cache/wgllm/models/SmolLM2-135M-Instruct.Q4_1.gguf --gl
# then `bash tools/device/recipes/decode_pipeline.sh store` for all planned calls but the last, `... measure` last.
# ROUNDS (default 5); CHUNK: also A/B the pipeline at --submit-chunk CHUNK (e.g. 0 or 64; unset: skipped).
set -u
stage=${1:-measure}
source tools/device/remote.sh
[ "$stage" = store ] && { $B devices 2>&1 | head -3; exit 0; }
wg_results  # remote.sh: T0, R=$W/res (emptied), packed into $OUT/results.tgz on exit
GGUF=$(wg_model SmolLM2-135M-Instruct.Q4_1.gguf) || exit 1
wg_gpu_check | tee $R/gpu.txt
[ -x $W/bin/decode_pipeline_test ] && { $W/bin/decode_pipeline_test > $R/test_decode_pipeline.log 2>&1; echo "decode_pipeline_test: exit $?"; }
[ -x $W/bin/fusion_switches_test ] && { $W/bin/fusion_switches_test --gtest_filter='SubmitChunk.*' > $R/test_fusion_switches.log 2>&1; echo "fusion_switches_test (SubmitChunk): exit $?"; }
for p in off on; do
  f=--no-decode-pipeline; [ $p = on ] && f=--decode-pipeline
  $B bench -m $GGUF --prompt-lengths 512 --gen 256 --reps 2 $f --step-gpu-times --json $R/split_$p.json 2>&1 \
    | grep -E "^\| (product|NON)|decode step" | sed "s/^/pipeline $p: /"
done
el "split"
for P in 512 4096; do
  G=128; [ $P = 4096 ] && G=64
  timeout 250 $B bench ab --a "bench -m $GGUF --prompt-lengths $P --gen $G --reps 1" \
    --b "bench -m $GGUF --prompt-lengths $P --gen $G --reps 1 --decode-pipeline" --rounds ${ROUNDS:-5} \
    --metric ttft_ms,decode_tok_s --json $R/ab_SmolLM2-135M-Instruct-Q4_1__decode-pipeline_p$P.json 2>&1 | tail -3
  el "ab p$P"
done
if [ -n "${CHUNK:-}" ]; then
  timeout 250 $B bench ab --a "bench -m $GGUF --prompt-lengths 512 --gen 128 --reps 1 --submit-chunk $CHUNK" \
    --b "bench -m $GGUF --prompt-lengths 512 --gen 128 --reps 1 --submit-chunk $CHUNK --decode-pipeline" --rounds ${ROUNDS:-5} \
    --metric decode_tok_s --json $R/ab_SmolLM2-135M-Instruct-Q4_1__decode-pipeline_chunk${CHUNK}_p512.json 2>&1 | tail -3
  el "ab chunk $CHUNK"
fi
for m in tests/fixtures/qwen35_trained/qwen35_trained.bf16.gguf tests/fixtures/lfm2_trained/lfm2_trained.bf16.gguf; do
  n=$(basename $m .bf16.gguf)
  for p in off on; do
    f=--no-decode-pipeline; [ $p = on ] && f=--decode-pipeline
    $B bench -m $m --prompt-lengths 512 --gen 128 --reps 2 $f --step-gpu-times --json $R/${n}_$p.json 2>&1 | grep -E "^\| (product|NON)|decode step" | sed "s/^/$n pipeline $p: /"
  done
done
el "hybrids"
