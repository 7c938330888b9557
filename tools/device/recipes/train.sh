#!/usr/bin/env bash
# Trains the small LFM2 and Qwen3.5 models on the H200 (tools/fixtures/train_hybrids.py), converts
# them with llama.cpp's own converter, and times the trained models with the engine. Produced the
# fixtures tests/fixtures/{lfm2,qwen35}_trained (2026-11-29, 140 s of training each).
# Staging: python3 tools/device/pack.py --bin wgllm --gl --llamacpp --extra ~/.cache/wgllm/text=text
# then one call carrying what the plan prints: `bash tools/device/recipes/train.sh`.
# Results in $OUT: fixtures.tgz (the tests/fixtures/*_trained folders), train.log, *_bench.json.
set -u
source tools/device/remote.sh
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p $W/fx
[ -d $W/llama.cpp ] || tar xzf $W/llama.cpp.tgz -C $W
wg_gpu_check
python3 tools/fixtures/train_hybrids.py --text-dir .carry/text --out $W/fx --seconds ${TRAIN_SECONDS:-140} \
  --llama-cpp $W/llama.cpp 2>&1 | tee $OUT/train.log
tar czf $OUT/fixtures.tgz -C $W/fx lfm2_trained qwen35_trained train_log.json
for f in qwen35 lfm2; do
  $B bench -m $W/fx/${f}_trained/hf --prompt-lengths 512 --gen 64 --reps 3 --allow-busy --json $OUT/${f}_trained_bench.json 2>&1 | tail -4
done
for g in $W/fx/*_trained/*.gguf; do $B run -m $g -p "Call me Ishmael." -n 16 --temp 0 2>&1 | tail -3; done
