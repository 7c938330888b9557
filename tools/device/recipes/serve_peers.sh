#!/usr/bin/env bash
# Issue 16 on the H200: `wgllm serve` (product configuration: continuous batching, prefix reuse)
# against llama.cpp's `llama-server` (CUDA, built here from the carried llama-cpp-python sdist), on
# the same synthetic-weight files of the SmolLM2-135M and Qwen2.5-1.5B shapes (real tokenizers and
# chat templates from the carried headers; the text is noise, the speed is real), measured by one
# client, `wgllm bench serve`: aggregate decode throughput, TTFT and inter-token latency p50 / p99
# at each concurrency of CONC (default 1,16,64), REQ_X x concurrency requests per level (default 3;
# distinct prompts, so no prefix cache turns the load into hits), 128 tokens each with the end of
# generation ignored. Both servers: 64 slots of 1024 tokens (llama-server: -np 64 -c 65536, all
# layers on the GPU, its defaults otherwise). The engines alternate within each of ROUNDS rounds
# (default 2; wgllm first in odd rounds, llama-server first in even ones; ROUND_FIRST=K starts at round K,
# so that the rounds can be split over calls). WG_ARMS="LABEL:FLAGS;..."
# runs wgllm once per arm (default one arm, "product" with no flags) and LLAMA=0 leaves llama-server
# out (no build), e.g. for an A/B of a serve option:
#   LLAMA=0 WG_ARMS="c256:--serve-prefill-chunk 256;c2048:--serve-prefill-chunk 2048" bash tools/device/recipes/serve_peers.sh
# Staging (here):
#   mkdir -p /tmp/synth && cp .carry/synth/* /tmp/synth/
#   python3 tools/device/pack.py --bin wgllm [test binaries] --gl --llamacpp --extra /tmp/synth=synth
# Calls, back to back (the build lives on the warm machine):
#   STAGE=build bash tools/device/recipes/serve_peers.sh   starts the llama.cpp build (llama-bench,
#       llama-server), writes the files, runs $WHILE_BUILDING (a command; e.g. GPU-timed kernel
#       benches or parity tests) and waits for the build up to BUILD_WAIT_S (default 500) seconds
#   bash tools/device/recipes/serve_peers.sh               the measurement (waits for the build too)
# Results: $OUT/results.tgz: serve_<engine>_<model>_r<round>.json (bench serve rows), .txt (its
# table), the servers' logs, wgllm's /metrics after each run, gpu.txt, FAILED.txt if anything failed.
set -u
source tools/device/remote.sh
T0=$(date +%s)  # for el (remote.sh)
R=$W/res_serve; mkdir -p $R
# A machine's disk can outlive a session: files older than an hour are another session's, not ours.
find $R -type f -mmin +60 -delete
trap 'tar czf $OUT/results.tgz -C $R .' EXIT
fail() { echo "FAIL: $*" | tee -a $R/FAILED.txt; }
MODELS=${MODELS:-smollm2 qwen25-1.5b}
LLAMA=${LLAMA:-1}
[ $LLAMA = 1 ] && wg_start_llamacpp_cuda llama-bench llama-server
wg_synth $MODELS 2> >(tee -a $R/write_errors.txt >&2) || fail "synthetic files"
echo "synthetic weights (tools/synth/write_gguf.py --seed 1): the text is noise, the speed is real" > $R/LABEL.txt
if [ "${STAGE:-measure}" = build ]; then
  el "build started; while building: ${WHILE_BUILDING:-nothing}"
  [ -n "${WHILE_BUILDING:-}" ] && { bash -c "$WHILE_BUILDING" > $R/while_building.txt 2>&1; echo "while-building exit $?" >> $R/while_building.txt; tail -30 $R/while_building.txt; }
  wg_wait_llamacpp ${BUILD_WAIT_S:-500} && el "llama.cpp built" || fail "llama.cpp build not done: $(tail -3 $W/lcpp.log | tr '\n' ' ')"
  exit 0
fi
[ $LLAMA = 1 ] && { wg_wait_llamacpp ${BUILD_WAIT_S:-500} || { fail "llama.cpp build not done: $(tail -3 $W/lcpp.log | tr '\n' ' ')"; exit 1; }; }
wg_gpu_check | tee $R/gpu.txt
http_ok() {  # http_ok PORT: 0 once GET /health answers 200
  python3 -c "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:$1/health', timeout=2).status == 200 else 1)" 2>/dev/null
}
run_one() {  # run_one ENGINE MODEL ROUND [LABEL FLAGS...]: wgllm with FLAGS is named wgllm-LABEL
  local e=$1 m=$2 r=$3 port sp name=$1_$2_r$3
  shift 3
  local label=${1:-}; shift || true
  [ -n "$label" ] && name=$e-${label}_${m}_r$r
  if [ $e = wgllm ]; then
    port=18080; $B serve -m ${WG_SYNTH[$m]} --port $port --parallel 64 -c 1024 "$@" > $R/log_$name.txt 2>&1 &
  else
    port=18081; $LS_CUDA -m ${WG_SYNTH[$m]} -ngl 99 -np 64 -c 65536 --host 127.0.0.1 --port $port > $R/log_$name.txt 2>&1 &
  fi
  sp=$!
  for i in $(seq 1 240); do http_ok $port && break; kill -0 $sp 2>/dev/null || break; sleep 0.5; done
  if ! http_ok $port; then fail "$name: server did not start: $(tail -3 $R/log_$name.txt | tr '\n' ' ')"; kill $sp 2>/dev/null; wait $sp; return; fi
  local conc=${CONC:-1,16,64}
  timeout 240 $B bench serve --url http://127.0.0.1:$port --concurrency $conc --max-tokens 128 --prompt-words 32 \
    --requests-per-client ${REQ_X:-3} \
    --json $R/serve_$name.json > $R/serve_$name.txt 2>&1 || fail "$name: bench serve exit $?"
  [ $e = wgllm ] && python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:$port/metrics').read().decode())" > $R/metrics_$name.txt 2>&1
  kill $sp; wait $sp
  el "$name"; cat $R/serve_$name.txt
}
run_wgllm() {  # run_wgllm MODEL ROUND: every arm of WG_ARMS, in order in odd rounds, reversed in even ones
  local arm label flags i
  IFS=';' read -ra arms <<< "${WG_ARMS:-product:}"
  local order=()
  for i in "${!arms[@]}"; do [ $(($2 % 2)) = 1 ] && order+=("${arms[$i]}") || order=("${arms[$i]}" "${order[@]}"); done
  for arm in "${order[@]}"; do
    label=${arm%%:*} flags=${arm#*:}
    if [ "$label" = product ] && [ -z "$flags" ]; then run_one wgllm $1 $2; else run_one wgllm $1 $2 "$label" $flags; fi
  done
}
for r in $(seq ${ROUND_FIRST:-1} ${ROUNDS:-2}); do
  for m in $MODELS; do
    if [ $LLAMA != 1 ]; then run_wgllm $m $r
    elif [ $((r % 2)) = 1 ]; then run_wgllm $m $r; run_one llama $m $r; else run_one llama $m $r; run_wgllm $m $r; fi
  done
done
