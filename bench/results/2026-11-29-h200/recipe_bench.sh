#!/usr/bin/env bash
# Benchmarks on the H200 device machine (issue 5), in three calls that keep the machine warm:
#   a: carry .carry/bin .carry/llama.cpp.tgz .carry/model_part00 .gl -> start the llama.cpp CUDA build
#   b: carry .carry/model_part01                                       -> store
#   c: carry .carry/model_part02                                       -> join, measure, compare
# Results go to $OUT/bench (copied into bench/results/ by the caller).
set -u
stage=$1
W=/root/wg
mkdir -p $W/models $W/bin
case $stage in
a)
  cp .carry/model_part00 $W/; [ -d .carry/bin ] && cp -r .carry/bin/* $W/bin/
  for f in .gl/*.deb; do dpkg -x "$f" / 2>/dev/null; done; ldconfig
  mkdir -p $W/lcpp && tar xzf .carry/llama.cpp.tgz -C $W/lcpp
  cd $W/lcpp/llama.cpp
  setsid nohup bash -c "cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF > $W/lcpp.log 2>&1 && \
    cmake --build build -j 16 --target llama-bench >> $W/lcpp.log 2>&1; echo BUILD_DONE \$? >> $W/lcpp.log" > /dev/null 2>&1 &
  sleep 2; tail -3 $W/lcpp.log; exit 0 ;;
b)
  [ -f .carry/model_part01 ] && cp .carry/model_part01 $W/
  [ -d .carry/bin ] && cp -r .carry/bin/* $W/bin/   # the binaries may travel here (64 MiB per call)
  tail -2 $W/lcpp.log; exit 0 ;;
esac
# stage c
for f in .gl/*.deb; do dpkg -x "$f" / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json LD_LIBRARY_PATH=$W/bin XDG_RUNTIME_DIR=/tmp
export WGLLM_CACHE=$W
GGUF=$W/models/SmolLM2-135M-Instruct.Q4_1.gguf
cat $W/model_part00 $W/model_part01 .carry/model_part02 > $GGUF
echo "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  $GGUF" | sha256sum -c || exit 1
mkdir -p $W/text/package/moby-dick/data && cp tests/fixtures/parity/prompt_256.txt $W/text/package/moby-dick/data/data.txt
R=$OUT/bench; mkdir -p $R
B=$W/bin/wgllm
cp $B $W/bin/wgllm-copy
$B bench --prompt-lengths 512 --gen 256 --reps 3 --traffic --json $R/smollm2_p512_g256.json --md $R/smollm2_p512_g256.md 2>&1 | tail -25
$B bench --prompt-lengths 4096 --gen 16 --reps 3 --json $R/smollm2_p4096.json --md $R/smollm2_p4096.md 2>&1 | tail -4
# Harness self-tests on the real engine: planted 10% slowdown, and identical binaries.
$B bench ab --a "bench --prompt-lengths 512 --gen 64 --reps 1" --b "bench --prompt-lengths 512 --gen 64 --reps 1 --planted-slowdown 0.1" \
  --metric ttft_ms,decode_tok_s --rounds 3 --json $R/selftest_planted.json 2>&1 | tail -3
$B bench ab --a "bench --prompt-lengths 512 --gen 64 --reps 1" --b "bench --prompt-lengths 512 --gen 64 --reps 1" --b-bin $W/bin/wgllm-copy \
  --metric ttft_ms,decode_tok_s --rounds 3 --json $R/selftest_null.json 2>&1 | tail -3
for i in $(seq 1 60); do grep -q BUILD_DONE $W/lcpp.log && break; sleep 5; done
tail -3 $W/lcpp.log
LB=$W/lcpp/llama.cpp/build/bin/llama-bench
if [ -x $LB ]; then
  $LB -m $GGUF -p 512 -n 256 -r 3 2>&1 | tail -6
  $B bench ab --a "bench --prompt-lengths 512 --gen 256 --reps 1" --b-cmd "bash tools/peers/peer_llamacpp.sh $LB $GGUF 512 256" \
    --metric ttft_ms,decode_tok_s --rounds 3 --json $R/vs_llamacpp_cuda_p512_g256.json 2>&1 | tail -3
  $B bench ab --a "bench --prompt-lengths 4096 --gen 16 --reps 1" --b-cmd "bash tools/peers/peer_llamacpp.sh $LB $GGUF 4096 16" \
    --metric ttft_ms --rounds 3 --json $R/vs_llamacpp_cuda_p4096.json 2>&1 | tail -3
fi
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/gpu.txt
