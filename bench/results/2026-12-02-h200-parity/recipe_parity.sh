#!/usr/bin/env bash
# H200: the parity and switch tests on real hardware (the same binaries CI runs on lavapipe):
# kernels, sparse attention, every architecture's WebGPU-vs-CPU parity, the switch combinations,
# decode pipelining, sessions (determinism_test runs in CI only: its probe path is built in). Prints one line per test binary and
# keeps the logs in $OUT/parity/.
# Staging: python3 tools/device/pack.py --build BUILD --bin wgllm kernels_test sparse_attention_test \
#   smollm2_parity_test lfm2_parity_test qwen35_parity_test qwen2_parity_test gemma3_parity_test \
#   switch_combinations_test decode_pipeline_test sparse_attention_e2e_test fusion_switches_test \
#   trained_hybrids_test session_test \
#   --model ~/.cache/wgllm/models/SmolLM2-135M-Instruct.Q4_1.gguf --gl
# then `bash tools/device/recipes/parity.sh store` for all planned calls but the last, and
# `bash tools/device/recipes/parity.sh` last.
set -u
stage=${1:-measure}
source tools/device/remote.sh
[ "$stage" = store ] && { $B devices 2>&1 | head -3; exit 0; }
T0=$(date +%s)
R=$OUT/parity; mkdir -p $R
wg_gpu_check > $R/gpu.txt
# The default model where the tests look for it ($WGLLM_CACHE/models).
mkdir -p $W/models
FAIL=0
for t in kernels_test sparse_attention_test smollm2_parity_test lfm2_parity_test qwen35_parity_test qwen2_parity_test \
         gemma3_parity_test switch_combinations_test decode_pipeline_test sparse_attention_e2e_test fusion_switches_test \
         trained_hybrids_test session_test; do
  [ -x $W/bin/$t ] || { echo "$t: not carried"; continue; }
  s=$(date +%s)
  timeout 300 $W/bin/$t > $R/$t.log 2>&1
  rc=$?
  [ $rc = 0 ] || FAIL=1
  echo "$t: exit $rc ($(( $(date +%s) - s )) s) $(grep -E '^\[  PASSED  \]|^\[  FAILED  \]|tests? ran' $R/$t.log | tr '\n' ' ' | cut -c1-160)"
done
echo "[$(( $(date +%s) - T0 )) s] done"
exit $FAIL
