#!/usr/bin/env bash
# H200: what naga's shader runtime checks (bounds checks + loop bounding; since 2026-12-06 `--shader-checks` is the
# bounds checks alone: add --shader-loop-bounding to the checked arms to repeat the 2026-12-01 runs) cost, and what one
# dispatch costs (wgllm bench dispatch). SmolLM2-135M-Instruct Q4_1 (real weights).
# Staging: python3 tools/device/pack.py --bin wgllm kernels_test \
#     --model ~/.cache/wgllm/models/SmolLM2-135M-Instruct.Q4_1.gguf --gl [--llamacpp]
# then the planned calls back to back: `bash tools/device/recipes/shader_checks.sh store` (or
# speed.sh store, which also starts the llama.cpp CUDA build) for all but the last,
# `bash tools/device/recipes/shader_checks.sh measure` last. Results: $OUT/results.tgz.
set -u
stage=${1:-measure}
source tools/device/remote.sh
[ "$stage" = store ] && { $B devices 2>&1 | head -3; exit 0; }
wg_results  # remote.sh: T0, R=$W/res (emptied), packed into $OUT/results.tgz on exit
GGUF=$(wg_model SmolLM2-135M-Instruct.Q4_1.gguf) || exit 1
mkdir -p $W/text/package/moby-dick/data && cp tests/fixtures/parity/prompt_256.txt $W/text/package/moby-dick/data/data.txt
wg_gpu_check | tee $R/gpu.txt
# Same greedy tokens with and without the checks (64 tokens, ids printed).
for c in shader-checks no-shader-checks; do
  $B run -m $GGUF -f tests/fixtures/parity/prompt_256.txt -n 64 --temp 0 --print-ids --$c > $R/run_$c.txt 2> $R/run_$c.err
done
cmp -s $R/run_shader-checks.txt $R/run_no-shader-checks.txt && echo "greedy 64: identical" || echo "greedy 64: DIFFERENT"
$W/bin/kernels_test > $R/kernels_test.log 2>&1; echo "kernels_test: exit $?"
el "parity"
for c in shader-checks no-shader-checks; do
  $B bench dispatch --workgroups 1,132,1056 --count 256 --reps 7 --$c --json $R/dispatch_$c.json 2>&1 | grep -E "chain|split" | head -6
  for kv in 768 4096; do
    $B bench attention --tokens 1 --cache $kv --reps 30 --$c --json $R/attention_t1_c${kv}_$c.json 2>&1 | tail -2
  done
  $B bench matmul --tokens 1 --type q4_1 --no-per-row --reps 30 --$c --json $R/matmul_t1_$c.json 2>&1 | grep -E "all|sum" -A3 | head -6
  $B bench matmul --tokens 512 --type q4_1 --reps 10 --$c --json $R/matmul_t512_$c.json 2>&1 | grep -A2 "all" | head -4
done
el "ops"
# A = the checks on (the old default), B = the product default (off); named for tools/device/summarize.py.
timeout 300 $B bench ab --a "bench --prompt-lengths 512 --gen 128 --reps 1 --shader-checks" \
  --b "bench --prompt-lengths 512 --gen 128 --reps 1" --rounds ${ROUNDS:-3} \
  --metric ttft_ms,decode_tok_s --json $R/ab_SmolLM2-135M-Instruct-Q4_1__shader-checks_p512.json 2>&1 | tail -5
el "ab"
$B bench --prompt-lengths 512 --gen 256 --reps 2 --traffic --json $R/wgllm_p512_g256.json \
  --md $R/wgllm_p512_g256.md 2>&1 | grep -E "^\| (product|NON)|dispatch" | head -4
el "traffic"
