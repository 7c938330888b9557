#!/usr/bin/env bash
# A Qwen3.5-0.8B-shaped hybrid (248,320-row vocabulary) through the browser build's streaming load,
# under Dawn in Node (NOT a browser) on the CPU Vulkan driver (lavapipe, `--adapter software`,
# 128 MiB storage bindings), 2-core 24 GiB machine, no GPU: the same recipe as
# ../2026-12-05-lavapipe-node-qwen35-0.8b/ (built at b10059b, the embedding's rows gathered on the
# host) after the embedding moved onto the GPU in row blocks (GpuModel::embedding(): one embed
# dispatch per block; the tied table's blocks are the head's), with N greedy tokens (default 6) so
# that pipelined decoding runs several steps:
#   1. a synthetic-weights GGUF of the published Qwen3.5-0.8B config (tools/synth/configs/qwen3.5-0.8b.json),
#      SmolLM2's tokenizer padded to the vocabulary, written under /tmp;
#   2. the native CLI (build/wgllm, same lavapipe driver) on the same file: N greedy tokens of the
#      harness's prompt (chat template applied), --no-warmup;
#   3. web/node/bench.mjs (the wasm build in build-wasm/web and the page's JS): load, the same N
#      greedy tokens through chat.completions, compared with step 2's ids (exit 3 on a mismatch).
# Run from the repository root after `make build` and `make web`. KEEP=1 keeps the GGUF.
set -u
N=${N:-6}
D=bench/results/2026-12-05-lavapipe-node-split-embedding
M=${M:-/tmp/q35-0.8b.synthetic.gguf}
WG=${WG:-web/node_modules/webgpu}
E="$(scripts/vulkan_env.sh)"
PROMPT="Write a short story about a robot who learns to paint."  # web/bench_run.js PROMPT
git rev-parse --short HEAD > $D/commit.txt
[ -f "$M" ] || python3 tools/synth/write_gguf.py --config tools/synth/configs/qwen3.5-0.8b.json \
  --vocab .carry/synth/smollm2.hdr.gz --seed 1 "$M" > $D/write_gguf.log 2>&1 || exit 1
stat -c '%s %n' "$M" > $D/file_size.txt
env $E /usr/bin/time -v build/wgllm run -m "$M" -p "$PROMPT" -n $N --ignore-eos -c 2048 --print-ids --no-warmup \
  > $D/native_run.txt 2> $D/native_run.log
env $E /usr/bin/time -v node web/node/bench.mjs --model "$M" --webgpu "$WG" --adapter software \
  --warmup 0 --greedy $N --lengths 16 --gen $N --greedy-only 1 --native-ids $D/native_run.txt \
  --out $D/greedy.json > $D/greedy.log 2>&1
echo "exit $?" >> $D/greedy.log
python3 $D/make_summary.py
[ "${KEEP:-0}" = 1 ] || rm -f "$M"
