#!/usr/bin/env bash
# wgllm (product configuration) vs llama.cpp CUDA and llama.cpp Vulkan on the H200 device machine
# (issue 5, peers), SmolLM2-135M-Instruct Q4_1, through `wgllm bench ab` (A = wgllm as two control
# arms, B = the peer, interleaved A1 B A2 B in separate processes; B/A with a bootstrap CI against
# the noise band of A2/A1). Four calls that keep the machine warm (it is released after ~30 s idle:
# issue each call right after the previous one returns):
#   a  carry .carry/bin .carry/llama.cpp.tgz .carry/model_part00 .gl
#        unpack the wgllm binaries and the Vulkan loader; start the llama.cpp CUDA build (background)
#   b  carry .carry/model_part01 .carry/llama-vk.tar.xz.part00 [.part01 ...]
#        store; unpack the prebuilt llama.cpp Vulkan llama-bench (tools/peers/build_llamacpp_vulkan.sh);
#        wait for the CUDA build (so no compiler runs during the measurements)
#   c  carry .carry/model_part02
#        join + check the model; wgllm bench (+ --traffic: copy bandwidth); vs llama.cpp Vulkan;
#        then vs llama.cpp CUDA if its build finished and the call has time left (else it says
#        "run stage d")
#   d  (nothing to carry; only when c said so)
#        vs llama.cpp CUDA (waits for the build if it is still running)
# PEERS=vulkan: skip the CUDA build (stage a) and the CUDA comparisons. Each stage stays under 10
# minutes (c: about 3 min for Vulkan + 3 min for CUDA).
# Results: $OUT/peers/*.json, *.md, summary.md (copied into bench/results/ by the caller).
set -u
stage=$1
W=/root/wg
PEERS=${PEERS:-cuda,vulkan}
mkdir -p $W/models $W/bin
T0=$(date +%s)
elapsed() { echo $(( $(date +%s) - T0 )); }
gl_and_env() {
  for f in .gl/*.deb; do dpkg -x "$f" / 2>/dev/null; done; ldconfig
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json XDG_RUNTIME_DIR=/tmp
  export LD_LIBRARY_PATH=$W/bin:$W/llama-vk WGLLM_CACHE=$W
}
wait_build() {  # $1: seconds at most
  [ -f $W/lcpp.log ] || { echo "no CUDA build was started"; return 1; }
  for i in $(seq 1 $(( $1 / 5 ))); do grep -q BUILD_DONE $W/lcpp.log && break; sleep 5; done
  tail -2 $W/lcpp.log
  grep -q "BUILD_DONE 0" $W/lcpp.log
}
GGUF=$W/models/SmolLM2-135M-Instruct.Q4_1.gguf
LB_CUDA=$W/lcpp/llama.cpp/build/bin/llama-bench
LB_VK=$W/llama-vk/llama-bench
R=$OUT/peers
B=$W/bin/wgllm
# One comparison: NAME LLAMA_BENCH P N METRICS; B = peer, A = wgllm with the same P and N.
compare() {
  local name=$1 lb=$2 p=$3 n=$4 metrics=$5
  timeout 240 $B bench ab --a "bench --prompt-lengths $p --gen $n --reps 1" \
    --b-cmd "bash tools/peers/peer_llamacpp.sh $lb $GGUF $p $n" \
    --metric $metrics --rounds 3 --json $R/$name.json 2>&1 | tail -3
  echo "[$(elapsed) s] $name done"
}
case $stage in
a)
  cp .carry/model_part00 $W/; cp -r .carry/bin/* $W/bin/
  gl_and_env
  if [[ $PEERS == *cuda* ]]; then
    mkdir -p $W/lcpp && tar xzf .carry/llama.cpp.tgz -C $W/lcpp
    cd $W/lcpp/llama.cpp
    setsid nohup bash -c "cmake -B build -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DLLAMA_CURL=OFF -DGGML_NATIVE=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF > $W/lcpp.log 2>&1 && \
      cmake --build build -j 16 --target llama-bench >> $W/lcpp.log 2>&1; echo BUILD_DONE \$? >> $W/lcpp.log" > /dev/null 2>&1 &
    sleep 2; tail -2 $W/lcpp.log
  fi
  $W/bin/wgllm devices 2>&1 | head -5
  exit 0 ;;
b)
  cp .carry/model_part01 $W/
  gl_and_env
  unxz() { if command -v xz >/dev/null; then xz -d; else python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.stdin.buffer), sys.stdout.buffer)'; fi; }
  cat .carry/llama-vk.tar.xz.part* | unxz | tar xf - -C $W || { echo "llama-vk unpack failed"; exit 1; }
  # The carried libgomp is only a fallback: the system's wins when there is one.
  ldconfig -p | grep -q "libgomp.so.1 " && rm -f $W/llama-vk/libgomp.so.1
  ldd $LB_VK | grep -E "not found|vulkan|gomp"
  if [[ $PEERS == *cuda* ]]; then wait_build 480 || echo "CUDA build not done yet: stage d waits for it"; fi
  echo "[$(elapsed) s] stage b done"; exit 0 ;;
esac
gl_and_env
mkdir -p $R
if [ ! -f $GGUF ]; then
  cat $W/model_part00 $W/model_part01 .carry/model_part02 > $GGUF
fi
echo "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  $GGUF" | sha256sum -c || exit 1
mkdir -p $W/text/package/moby-dick/data && cp tests/fixtures/parity/prompt_256.txt $W/text/package/moby-dick/data/data.txt
cuda_part() {
  $LB_CUDA -m $GGUF -p 512,4096 -n 256 -r 3 > $R/llamacpp_cuda_raw.md 2> $R/llamacpp_cuda_raw.log
  grep -E "^\|" $R/llamacpp_cuda_raw.md | head -8
  echo "[$(elapsed) s] llama-bench cuda raw done"
  compare vs_llamacpp_cuda_p512_g256 $LB_CUDA 512 256 ttft_ms,decode_tok_s
  compare vs_llamacpp_cuda_p4096_g64 $LB_CUDA 4096 64 ttft_ms,decode_tok_s
}
if [ $stage = c ]; then
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,utilization.gpu --format=csv > $R/gpu.txt
  git rev-parse HEAD > $R/commit.txt 2>/dev/null || true
  $B bench --prompt-lengths 512 --gen 256 --reps 3 --traffic --json $R/wgllm_p512_g256.json --md $R/wgllm_p512_g256.md 2>&1 | grep -E "^\| product|copy bandwidth"
  $B bench --prompt-lengths 4096 --gen 64 --reps 3 --json $R/wgllm_p4096_g64.json --md $R/wgllm_p4096_g64.md 2>&1 | grep "^| product"
  echo "[$(elapsed) s] wgllm bench done"
  # The peer's own view (device line: matrix cores, int dot; pipeline creation happens here once).
  $LB_VK -m $GGUF -p 512,4096 -n 256 -r 3 > $R/llamacpp_vulkan_raw.md 2> $R/llamacpp_vulkan_raw.log
  grep -E "ggml_vulkan|^\|" $R/llamacpp_vulkan_raw.log $R/llamacpp_vulkan_raw.md | head -12
  echo "[$(elapsed) s] llama-bench vulkan raw done"
  compare vs_llamacpp_vulkan_p512_g256 $LB_VK 512 256 ttft_ms,decode_tok_s
  compare vs_llamacpp_vulkan_p4096_g64 $LB_VK 4096 64 ttft_ms,decode_tok_s
  if [[ $PEERS == *cuda* ]]; then
    if grep -q "BUILD_DONE 0" $W/lcpp.log 2>/dev/null && [ $(elapsed) -lt 330 ]; then cuda_part
    else echo "CUDA comparisons not run in this call: run stage d"; fi
  fi
else  # d
  wait_build 300 || { echo "CUDA build failed or unfinished"; tail -20 $W/lcpp.log; exit 1; }
  cuda_part
fi
python3 tools/peers/peers_summary.py $R > $R/summary_$stage.md && cat $R/summary_$stage.md
echo "[$(elapsed) s] stage $stage done"
