#!/usr/bin/env bash
# Issue 15 item 2 ("greedy tokens in the browser equal the native engine's for every supported
# architecture"), on this CPU machine: the browser build (build-wasm/web wgllm.{js,wasm} and the
# page's JS, web/node/bench.mjs) under Dawn in Node (NOT a browser) on lavapipe (`--adapter software`,
# 128 MiB storage bindings) against the native CLI (build/wgllm, same driver), one model per
# architecture the engine supports:
#   llama   SmolLM2-135M-Instruct Q4_1 (real weights)
#   qwen2   Qwen2.5-Coder-1.5B-Instruct Q4_K_M (real; 151,936-row tied table: head and embedding in
#           row blocks under the 128 MiB binding)
#   gemma3  gemma-3-270m Q4_K_M (real; 262,144-row tied table: in row blocks)
#   lfm2    the trained LFM2 fixture (tests/fixtures/lfm2_trained, bf16)
#   qwen35  the trained Qwen3.5 fixture (tests/fixtures/qwen35_trained, bf16)
# For each: the native CLI's N greedy ids of the harness's chat prompt (--no-warmup, context 2048),
# then the harness's load and the same N greedy tokens compared with them (exit 3 on a mismatch);
# make_summary.py. Run from the repository root after `make build`, `make web` and
# `build/wgllm pull qwen2.5-coder-1.5b gemma-3-270m`. N=8 by default; MODELS selects a subset.
set -u
D=bench/results/2026-12-05-lavapipe-node-architectures
N=${N:-8}
WG=${WG:-web/node_modules/webgpu}
E="$(scripts/vulkan_env.sh)"
C=${WGLLM_CACHE:-$HOME/.cache/wgllm}/models
PROMPT="Write a short story about a robot who learns to paint."  # web/bench_run.js PROMPT
declare -A M=(
  [llama]=$C/SmolLM2-135M-Instruct.Q4_1.gguf
  [qwen2]=$C/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
  [gemma3]=$C/gemma-3-270m-q4_k_m.gguf
  [lfm2]=tests/fixtures/lfm2_trained/lfm2_trained.bf16.gguf
  [qwen35]=tests/fixtures/qwen35_trained/qwen35_trained.bf16.gguf
)
git rev-parse --short HEAD > $D/commit.txt
for a in ${MODELS:-llama qwen2 gemma3 lfm2 qwen35}; do
  m=${M[$a]}
  [ -f "$m" ] || { echo "$a: missing $m" | tee -a $D/missing.txt; continue; }
  env $E build/wgllm run -m "$m" -p "$PROMPT" -n $N --ignore-eos -c 2048 --print-ids --no-warmup \
    > $D/native_$a.txt 2> $D/native_$a.log
  env $E /usr/bin/time -v node web/node/bench.mjs --model "$m" --webgpu "$WG" --adapter software \
    --warmup 0 --greedy $N --lengths 16 --gen $N --greedy-only 1 --native-ids $D/native_$a.txt \
    --out $D/greedy_$a.json > $D/greedy_$a.log 2>&1
  echo "$a: exit $?" | tee -a $D/exits.txt
done
python3 $D/make_summary.py
