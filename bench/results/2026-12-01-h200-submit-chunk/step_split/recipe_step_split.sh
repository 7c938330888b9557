#!/usr/bin/env bash
# H200: where the decode step's wall time goes, and what the periodic slow steps are (every 4-9
# steps a step takes ~5 ms instead of ~2.3 ms: bench/results/2026-12-01-h200-shader-checks/
# wgllm_p512_g256.json). SmolLM2-135M-Instruct Q4_1, product bench (host split only) and
# --step-gpu-times (GPU execution per step), prompt 512 + 256 steps.
# Staging: python3 tools/device/pack.py --bin wgllm --model ~/.cache/wgllm/models/SmolLM2-135M-Instruct.Q4_1.gguf --gl
# then `bash tools/device/recipes/step_split.sh store` for all planned calls but the last, `... measure` last.
set -u
stage=${1:-measure}
source tools/device/remote.sh
[ "$stage" = store ] && { $B devices 2>&1 | head -3; exit 0; }
GGUF=$(wg_model SmolLM2-135M-Instruct.Q4_1.gguf) || exit 1
R=$W/res; rm -rf $R; mkdir -p $R
trap 'tar czf $OUT/results.tgz -C $R .' EXIT
wg_gpu_check | tee $R/gpu.txt
$B bench -m $GGUF --prompt-lengths 512 --gen 256 --reps 2 --json $R/wgllm_p512_g256.json --md $R/wgllm_p512_g256.md 2>&1 | grep -E "^\| product|decode step"
$B bench -m $GGUF --prompt-lengths 512 --gen 256 --reps 2 --step-gpu-times --json $R/steptimes_p512_g256.json --md $R/steptimes_p512_g256.md 2>&1 | grep -E "^\| NON|decode step"
nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw,pstate --format=csv | tee -a $R/gpu.txt
