#!/usr/bin/env bash
# Second H200 round (same staging as bench/results/2026-11-29-h200/recipe_bench.sh: a, b store; c measures):
# split-K attention check and A/B, harness null test, product numbers, multi-turn sessions,
# hybrid tiny models. Results in $OUT/r2. CORE_ONLY=1: parity, product numbers and multi-turn only.
set -u
stage=$1
W=/root/wg
mkdir -p $W/models $W/bin
case $stage in
a) cp .carry/model_part00 $W/; cp -r .carry/bin/* $W/bin/; exit 0 ;;
b) cp .carry/model_part01 $W/; exit 0 ;;
esac
for f in .gl/*.deb; do dpkg -x "$f" / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json LD_LIBRARY_PATH=$W/bin XDG_RUNTIME_DIR=/tmp
export WGLLM_CACHE=$W WGLLM_SOURCE_DIR=$PWD
GGUF=$W/models/SmolLM2-135M-Instruct.Q4_1.gguf
cat $W/model_part00 $W/model_part01 .carry/model_part02 > $GGUF
echo "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  $GGUF" | sha256sum -c || exit 1
mkdir -p $W/text/package/moby-dick/data && cp tests/fixtures/parity/prompt_256.txt $W/text/package/moby-dick/data/data.txt
R=$OUT/r2; mkdir -p $R
B=$W/bin/wgllm
cp $B $W/bin/wgllm-copy
$W/bin/smollm2_parity_test 2>&1 | grep -E "cpu-ref|OK|FAIL|PASSED" | tail -12
$B bench --prompt-lengths 512 --gen 256 --reps 3 --traffic --json $R/smollm2_p512_g256.json --md $R/smollm2_p512_g256.md 2>&1 | tail -25
$B bench --prompt-lengths 4096 --gen 64 --reps 3 --json $R/smollm2_p4096_g64.json --md $R/smollm2_p4096_g64.md 2>&1 | tail -3
if [ -z "${CORE_ONLY:-}" ]; then
$B bench ab --a "bench --prompt-lengths 512 --gen 128 --reps 1" --b "bench --prompt-lengths 512 --gen 128 --reps 1 --no-attn-split" \
  --metric ttft_ms,decode_tok_s --rounds 3 --json $R/ab_attn_split_off.json 2>&1 | tail -3
$B bench ab --a "bench --prompt-lengths 512 --gen 128 --reps 1" --b "bench --prompt-lengths 512 --gen 128 --reps 1" --b-bin $W/bin/wgllm-copy \
  --metric ttft_ms,decode_tok_s --rounds 3 --json $R/selftest_null.json 2>&1 | tail -3
fi
$B bench multi-turn --turns 30 --turn-tokens 32 --reply-tokens 16 --json $R/multiturn_30.json 2>&1 | tail -5
[ -n "${CORE_ONLY:-}" ] && exit 0
$B bench -m tests/fixtures/qwen35_tiny --prompt-lengths 440 --gen 64 --reps 3 --allow-busy --json $R/qwen35_tiny.json 2>&1 | tail -3
$B bench -m tests/fixtures/lfm2_tiny/hf --prompt-lengths 440 --gen 64 --reps 3 --allow-busy --json $R/lfm2_tiny.json 2>&1 | tail -3
