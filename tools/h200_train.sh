#!/usr/bin/env bash
# H200 round for issue 3: train the small LFM2 and Qwen3.5 models (tools/train_hybrids.py), convert
# them with llama.cpp's converter, and time the trained Qwen3.5 with the engine (prefill 512 vs 64
# decode steps). One device call:
#   run(command="bash tools/h200_train.sh", carry=[".gl", ".carry/bin", ".carry/text", ".carry/llama.cpp.tgz"])
# .carry/text holds package/moby-dick/data/data.txt and package/sotu/data/*.txt from the setup cache
# (~/.cache/wgllm/text); .carry/bin the wgllm binary with its shared libraries; .carry/llama.cpp.tgz
# the llama.cpp source from the llama-cpp-python 0.3.36 sdist. Results in $OUT: fixtures.tgz (the
# tests/fixtures/*_trained folders), train.log, qwen35_trained_bench.json.
set -u
for f in .gl/*.deb; do dpkg -x "$f" / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json LD_LIBRARY_PATH=$PWD/.carry/bin XDG_RUNTIME_DIR=/tmp
export PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
W=/root/wg; mkdir -p $W/fx
tar xzf .carry/llama.cpp.tgz -C $W
nvidia-smi --query-gpu=name,driver_version,utilization.gpu,memory.used --format=csv
python3 tools/train_hybrids.py --text-dir .carry/text --out $W/fx --seconds ${TRAIN_SECONDS:-140} --llama-cpp $W/llama.cpp 2>&1 | tee $OUT/train.log
tar czf $OUT/fixtures.tgz -C $W/fx lfm2_trained qwen35_trained train_log.json
ls -la $W/fx/*_trained
B=.carry/bin/wgllm
$B bench -m $W/fx/qwen35_trained/hf --prompt-lengths 512 --gen 64 --reps 3 --allow-busy --json $OUT/qwen35_trained_bench.json 2>&1 | tail -8
$B bench -m $W/fx/lfm2_trained/hf --prompt-lengths 512 --gen 64 --reps 3 --allow-busy --json $OUT/lfm2_trained_bench.json 2>&1 | tail -4
for g in $W/fx/*_trained/*.gguf; do $B run -m $g -p "Call me Ishmael." -n 16 --temp 0 2>&1 | tail -3; done
