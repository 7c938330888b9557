#!/usr/bin/env bash
# A model file larger than 4 GiB through the browser build's streaming load, under Dawn in Node
# (NOT a browser) on the CPU Vulkan driver (lavapipe / llvmpipe, `--adapter software`), 2-core
# 24 GiB machine, no GPU. Issue 15, item 3.
#   1. a synthetic-weights GGUF of Qwen2.5-7B-Instruct's published shapes at Q4_K_M (llama-quantize's
#      type rules) with tools/synth/write_gguf.py: 4,683,075,008 bytes, written under /tmp;
#   2. load only (no kernel warm-up) through web/node/bench.mjs: the same wasm build
#      (build-wasm/web) and page JS (wgllm.js -> worker.js -> model_store.js's File path ->
#      wgllm_load_stream) with Node shims; /usr/bin/time -v for the process's peak RSS;
#   3. the native CLI (build/wgllm, same lavapipe driver) on the same file: 2 greedy tokens of the
#      harness's prompt (chat template applied), --no-warmup, run alone (not beside the Node run);
#   4. the harness again: load, then the same 2 greedy tokens through chat.completions, compared
#      with step 3's ids (--native-ids; exit 3 on a mismatch); --greedy-only: no bench rows.
# Run from the repository root after `make build` and `make web` (needs numpy, node, and the npm
# `webgpu` package in web/node_modules as `make setup` installs it). KEEP=1 keeps the GGUF.
set -u
D=bench/results/2026-12-04-lavapipe-node-4gb
M=${M:-/tmp/qwen2.5-7b-synth.gguf}
WG=${WG:-web/node_modules/webgpu}
WGLLM=${WGLLM:-build/wgllm}
E="$(scripts/vulkan_env.sh)"
PROMPT="Write a short story about a robot who learns to paint."  # web/bench_run.js PROMPT
git rev-parse --short HEAD > $D/commit.txt
{ uname -a; nproc; free -b; node --version; ls -l --time-style=full-iso build-wasm/web/wgllm.wasm build-wasm/web/wgllm.js "$WGLLM";
  sha256sum build-wasm/web/wgllm.wasm "$WGLLM"; } > $D/machine.txt 2>&1
uptime > $D/load_avg.txt

# 1. the file
if [ ! -f "$M" ]; then
  python3 tools/synth/write_gguf.py --config tools/synth/configs/qwen2.5-7b.json \
    --vocab .carry/synth/qwen25-coder-1.5b.hdr.gz "$M" --seed 0 > $D/write_gguf.log 2>&1 || { cat $D/write_gguf.log; exit 1; }
fi
stat -c '%s %n' "$M" > $D/file_size.txt

# 2. load only
env $E /usr/bin/time -v node web/node/bench.mjs --model "$M" --webgpu "$WG" --adapter software \
  --load-only 1 --warmup 0 --out $D/load_only.json > $D/load_only.log 2>&1
echo "exit $?" >> $D/load_only.log
uptime >> $D/load_avg.txt

# 3. native greedy ids (alone)
env $E /usr/bin/time -v "$WGLLM" run -m "$M" -p "$PROMPT" -n 2 --ignore-eos -c 2048 --print-ids --no-warmup \
  > $D/native_run.txt 2> $D/native_run.log
echo "exit $?" >> $D/native_run.log

# 4. wasm greedy ids, compared with the native ones
env $E /usr/bin/time -v node web/node/bench.mjs --model "$M" --webgpu "$WG" --adapter software \
  --warmup 0 --greedy 2 --lengths 16 --gen 2 --greedy-only 1 --native-ids $D/native_run.txt \
  --out $D/greedy.json > $D/greedy.log 2>&1
echo "exit $?" >> $D/greedy.log

python3 $D/layout.py "$M"   # layout.json: which tensors / head rows lie past 2^32 in the file
python3 $D/make_summary.py
[ "${KEEP:-0}" = 1 ] || rm -f "$M"
