#!/usr/bin/env bash
# Issue 15 item 3 in a real browser: the real Qwen2.5-Coder-1.5B (1.1 GB) and a 4.68 GB synthetic-weights
# GGUF (Qwen2.5-7B shapes) through the browser build's download -> browser storage (OPFS) -> streamed
# upload path in Debian's Chromium 156, headless, WebGPU on SwiftShader (a CPU-emulated GPU: the CPU
# development machine has no GPU; speeds are not measurements), 2 greedy tokens of the bench prompt,
# against the native CLI's 2 greedy ids on the same file (lavapipe).
# Run from the repository root after `make build web` (2 cores, 24 GiB; ~30 min for the 4.68 GB file).
set -u
D=bench/results/2026-12-07-swiftshader-chromium-large-models/raw
M7=${M7:-/tmp/q7b.gguf}
Q=${Q:-$HOME/.cache/wgllm/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf}
PROMPT="Write a short story about a robot who learns to paint."  # web/bench_run.js PROMPT
mkdir -p $D
# The Qwen2.5 tokenizer for the 7B shape: the 1.5B's header, `python3 tools/synth/gguf_header.py "$Q" $QH`.
QH=${QH:-/tmp/qwen25-coder-1.5b.hdr.gz}
[ -f $QH ] || python3 tools/synth/gguf_header.py "$Q" $QH
[ -f "$M7" ] || python3 tools/synth/write_gguf.py --config tools/synth/configs/qwen2.5-7b.json \
  --vocab $QH "$M7" --seed 0 > $D/write_q7b.log 2>&1
{ git rev-parse HEAD; /usr/lib/chromium/chromium --version; sha256sum build-wasm/web/wgllm.wasm build/wgllm; stat -c '%s %n' "$Q" "$M7"; nproc; free -b; } > $D/machine.txt 2>&1
for m in qwen25-1.5b:$Q q7b-synthetic:$M7; do
  name=${m%%:*} f=${m#*:}
  OUT=/tmp/chr_$name GREEDY=2 VK_DRIVER_FILES=/usr/lib/chromium/vk_swiftshader_icd.json /usr/bin/time -v \
    tools/device/browser/run_chromium.sh --chromium /usr/lib/chromium/chromium --model "$f" --wasm-dir build-wasm/web \
    --lengths 16 --gen 2 --reps 1 --greedy-only --timeout 3000 > $D/chromium_$name.log 2>&1
  cp /tmp/chr_$name/result.json $D/result_$name.json
  env $(scripts/vulkan_env.sh) build/wgllm run -m "$f" -p "$PROMPT" -n 2 --ignore-eos -c 2048 --print-ids > $D/native_$name.txt 2>&1
done
python3 bench/results/2026-12-07-swiftshader-chromium-large-models/make_summary.py
