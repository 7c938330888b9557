#!/usr/bin/env bash
# Runs on the H200 device machine (see /work/.library/device) from a copy of the repository.
# The default model (93 MB) is larger than one transfer (64 MiB), so it travels in three parts made
# with `split -b 33000000 -d MODEL .carry/model_part`:
#   stage a: carry .carry/bin .carry/model_part00 .gl .whl -> keeps them in /root/wg, probes the machine
#   stage p: carry .carry/model_part01                    -> keeps it
#   stage b: carry .carry/model_part02 .whl               -> joins the model, runs references and checks
# .carry/bin holds wgllm, test binaries and their shared libraries built on a Debian 12 machine.
set -u
stage=${1:-b}
W=/root/wg
mkdir -p $W/models
for f in .gl/*.deb; do dpkg -x "$f" / 2>/dev/null; done
ldconfig
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f $ICD ] && export VK_DRIVER_FILES=$ICD
export LD_LIBRARY_PATH=$PWD/.carry/bin:${LD_LIBRARY_PATH:-}
export WGLLM_CACHE=$W WGLLM_SOURCE_DIR=$PWD XDG_RUNTIME_DIR=/tmp
B=.carry/bin
GGUF=$W/models/SmolLM2-135M-Instruct.Q4_1.gguf
if [ "$stage" = p ]; then cp .carry/model_part01 $W/; exit 0; fi
if [ "$stage" = a ]; then
  cp .carry/model_part00 $W/
  cp -r .carry/bin $W/bin
  cat /etc/os-release | head -2; ldd --version | head -1; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,utilization.gpu --format=csv
  ldd $B/wgllm | grep "not found"
  $B/wgllm devices
  $B/gpu_test 2>&1 | tail -3
  exit 0
fi
[ -d $B ] || { mkdir -p .carry; cp -r $W/bin .carry/bin; }
cat $W/model_part00 $W/model_part01 .carry/model_part02 > $GGUF
echo "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  $GGUF" | sha256sum -c || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,utilization.gpu,memory.used --format=csv
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
fi
mkdir -p $OUT
if [ ! -f tests/fixtures/parity/smollm2_ref.json ] || [ "${REGEN:-0}" = 1 ]; then
  python3 tools/fixtures/reference_logits.py $GGUF tests/fixtures/parity/smollm2_prompts.json $OUT/parity 2>&1 | grep -v Warning | tail -8
  cp $OUT/parity/* tests/fixtures/parity/
fi
$B/wgllm devices | head -3
$B/kernels_test 2>&1 | tail -2
$B/smollm2_parity_test 2>&1 | tail -20
$B/wgllm run -p "What is the capital of France? Answer in one sentence." -n 64 2>&1 | tail -3
$B/wgllm run --backend cpu -p "What is the capital of France? Answer in one sentence." -n 64 2>&1 | tail -3
for i in 1 2 3; do
  $B/wgllm run --raw -f tests/fixtures/parity/prompt_256.txt -n 256 --ignore-eos 2>&1 | tail -1
done
$B/wgllm run --raw -f tests/fixtures/parity/prompt_256.txt -n 16 --ignore-eos --profile 2>&1 | tail -20
