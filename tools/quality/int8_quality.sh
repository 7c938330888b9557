#!/usr/bin/env bash
# Quality of the int8 switches on real weights (issue 11): llama-perplexity's method
# (`wgllm perplexity`) over the start of Moby-Dick (public domain, installed by `make setup`), each
# switch off (A) and on (B), same tokens:
#   --matmul-int8  prefill matmuls (T > 8): whole chunks, n_ctx 512; both arms with --matmul-tiled
#                  (the tiled kernel the int8 path belongs to: on by default on GPUs, off on software
#                  adapters)
#   --matvec-int8  decode matrix-vector kernels (T <= 8): --ubatch-size 8, so every position of the
#                  chunk runs through the decode kernels as it does when generating; both arms with
#                  --matvec-subgroup (the matvec kernel it belongs to; default on GPUs only)
# So both arms are the GPU product path and its int8 variant, whatever adapter runs them.
# Models: SmolLM2-135M-Instruct Q4_1 (the default model), Qwen2.5-Coder-1.5B-Instruct Q4_K_M and
# gemma-3-270m Q4_K_M (`wgllm pull qwen2.5-coder-1.5b gemma-3-270m`; skipped when not installed).
# Each arm names both int8 switches' settings: since 2026-12-02 they default to on for GPUs. Runs on whatever adapter the
# Vulkan loader gives (scripts/vulkan_env.sh: lavapipe on CPU-only machines): quality figures,
# not speed. Writes one JSON per run and summary.json (tools/quality/summarize_int8.py) into OUT.
# Usage: tools/quality/int8_quality.sh OUT [CHUNKS_SMOL (4)] [CHUNKS_QWEN (1)] [DECODE_CHUNKS (= CHUNKS)]
#        [CHUNKS_GEMMA (0)] (gemma-3: the prefill pair only)
# (the decode path runs every token as its own small forward: on lavapipe ~6 min per 512-token chunk
# of SmolLM2 on 2 busy cores). A run whose JSON exists in OUT is not repeated (resumable).
set -euo pipefail
OUT=${1:?usage: int8_quality.sh OUT [CHUNKS_SMOL] [CHUNKS_QWEN]}
CS=${2:-4} CQ=${3:-1} CD=${4:-} CG=${5:-0}
cd "$(dirname "$0")/../.."
B=${WGLLM:-build/wgllm}
CACHE=${WGLLM_CACHE:-$HOME/.cache/wgllm}
TEXT=$CACHE/text/package/moby-dick/data/data.txt
mkdir -p "$OUT"
cp "$0" "$OUT/recipe_int8_quality.sh"
# COMMIT: the commit the binary was built from (a device copy's .git may name another).
if [ -n "${COMMIT:-}" ]; then echo "$COMMIT" > "$OUT/commit.txt"
else git rev-parse --short HEAD > "$OUT/commit.txt" 2>/dev/null || echo unknown > "$OUT/commit.txt"; fi
env $(scripts/vulkan_env.sh) $B devices > "$OUT/devices.txt" 2>&1 || true
run() {  # run NAME MODEL CHUNKS ARGS...
  local name=$1 model=$2 chunks=$3; shift 3
  [ -f "$OUT/$name.json" ] && { echo "[int8-quality] $name: kept"; grep "Final estimate" "$OUT/$name.txt"; return; }
  echo "[int8-quality] $name"
  env $(scripts/vulkan_env.sh) $B perplexity -m "$model" -f "$TEXT" -c 512 --chunks "$chunks" "$@" \
    --json "$OUT/$name.tmp.json" > "$OUT/$name.txt" 2> "$OUT/$name.err" && mv "$OUT/$name.tmp.json" "$OUT/$name.json"
  grep "Final estimate" "$OUT/$name.txt"
}
for m in smollm2 qwen25; do
  if [ $m = smollm2 ]; then M=$CACHE/models/SmolLM2-135M-Instruct.Q4_1.gguf C=$CS
  else M=$CACHE/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf C=$CQ; fi
  [ -f "$M" ] || { echo "[int8-quality] $M not installed: skipped"; continue; }
  [ "$C" -gt 0 ] || { echo "[int8-quality] $m: 0 chunks: skipped"; continue; }
  run ${m}_prefill_A "$M" $C --matmul-tiled --no-matmul-int8
  run ${m}_prefill_B "$M" $C --matmul-tiled --matmul-int8
  run ${m}_decode_A "$M" ${CD:-$C} --ubatch-size 8 --matvec-subgroup --no-matvec-int8
  run ${m}_decode_B "$M" ${CD:-$C} --ubatch-size 8 --matvec-subgroup --matvec-int8
done
M=$CACHE/models/gemma-3-270m-q4_k_m.gguf
if [ -f "$M" ] && [ "$CG" -gt 0 ]; then
  run gemma3_prefill_A "$M" $CG --matmul-tiled --no-matmul-int8
  run gemma3_prefill_B "$M" $CG --matmul-tiled --matmul-int8
fi
python3 tools/quality/summarize_int8.py "$OUT"
