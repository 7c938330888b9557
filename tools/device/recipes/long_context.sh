#!/usr/bin/env bash
# H200: cold long prefill, dense vs gathered block-sparse attention (issue 14 item 3; --sparse-attn,
# kernels/sparse_attention.h) on Qwen2.5-Coder-1.5B-Instruct Q4_K_M (trained context 32768): per
# context length the time of every 512-token prefill chunk, tokens/s, device bytes, host peak RSS
# and swap (`wgllm bench long-context`). 2048 and 4096 are the below-threshold control (default
# --sparse-threshold 8192: both modes run the same dense kernels; times must agree within noise).
# Also the sparse kernel tests on the device (gather = masked dense, vs the CPU twin).
# Staging: python3 tools/device/pack.py --bin wgllm sparse_attention_test \
#     --model ~/.cache/wgllm/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
# then the planned calls back to back: `bash tools/device/recipes/long_context.sh store` for all but
# the last, `bash tools/device/recipes/long_context.sh measure` last. Results: $OUT/results.tgz.
# Not covered here: 64k and ~100k contexts need a model trained for them (a synthetic one).
set -u
stage=${1:-measure}
source tools/device/remote.sh
[ "$stage" = store ] && { $B devices 2>&1 | head -3; exit 0; }
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
GGUF=$(wg_model qwen2.5-coder-1.5b-instruct-q4_k_m.gguf) || exit 1
R=$W/res; rm -rf $R; mkdir -p $R
trap 'tar czf $OUT/results.tgz -C $R .' EXIT
wg_gpu_check | tee $R/gpu.txt
$W/bin/sparse_attention_test > $R/sparse_attention_test.log 2>&1; echo "sparse_attention_test: exit $?"
el "tests"
# Default selection: blocks of 64 keys, sink + window 4 + top-16 = 21 blocks (1344 keys) per query block.
$B bench long-context -m $GGUF --contexts 2048,4096,8192,16384,32768 --json $R/long_context.json 2>&1 | tail -12
el "long-context"
# A second round for the noise band of the per-chunk times.
$B bench long-context -m $GGUF --contexts 4096,32768 --json $R/long_context_round2.json 2>&1 | tail -6
el "round 2"
