#!/usr/bin/env bash
# H200: cold long prefill, dense vs gathered block-sparse attention (issue 14 item 3), on
# SmolLM2-135M-Instruct Q4_1 with llama.context_length raised to 131072 on the device
# (tools/fixtures/gguf_set_u32.py: real weights, RoPE past the trained 8192 positions; the speed is
# real, the text is not: results labelled "synthetic context"). 2048 and 4096 are the
# below-threshold control (default --sparse-threshold 8192). Also: the sparse and state kernel
# tests, and the per-turn snapshot cost of the trained hybrids (issue 10: `bench multi-turn`,
# snapshot_us / snapshot_done_us / snapshot_turn_bytes).
# Staging: python3 tools/device/pack.py --bin wgllm sparse_attention_test state_test \
#     --model ~/.cache/wgllm/models/SmolLM2-135M-Instruct.Q4_1.gguf --gl
# then `bash tools/device/recipes/long_context_synthetic.sh store` for all planned calls but the
# last, `... measure` last (CONTEXTS overrides the list, default 2048..32768; then
# `LONG_ONLY=1 CONTEXTS=65536,98304 ... measure` as a further call). Results: $OUT/results.tgz.
set -u
stage=${1:-measure}
source tools/device/remote.sh
[ "$stage" = store ] && { $B devices 2>&1 | head -3; exit 0; }
wg_results  # remote.sh: T0, R=$W/res (emptied), packed into $OUT/results.tgz on exit
GGUF=$(wg_model SmolLM2-135M-Instruct.Q4_1.gguf) || exit 1
wg_gpu_check | tee $R/gpu.txt
CTX=${CONTEXTS:-2048,4096,8192,16384,32768}
if [ -z "${LONG_ONLY:-}" ]; then  # LONG_ONLY=1: only the long-context bench (a second call for 64k / 96k)
for t in sparse_attention_test state_test; do
  [ -x $W/bin/$t ] && { $W/bin/$t > $R/$t.log 2>&1; echo "$t: exit $? $(grep -E '^\[  (PASSED|FAILED) ' $R/$t.log | tr '\n' ' ')"; }
done
el "tests"
for m in qwen35_trained lfm2_trained; do
  $B bench multi-turn --turns 30 --turn-tokens 32 --reply-tokens 16 -m tests/fixtures/$m/hf --context 2048 \
    --json $R/multiturn_$m.json 2>&1 | tail -2
done
el "multi-turn"
fi
LONG=$W/models/SmolLM2-135M-Instruct.Q4_1.ctx131072.gguf
python3 tools/fixtures/gguf_set_u32.py $GGUF $LONG llama.context_length 131072
timeout 500 $B bench long-context -m $LONG --contexts $CTX --json $R/long_context_synthetic_${CTX//,/_}.json 2>&1 | tail -20
el "long-context"
nvidia-smi --query-gpu=clocks.sm,memory.used --format=csv | tee -a $R/gpu.txt
