#!/usr/bin/env bash
# H200: wgllm vs llama.cpp CUDA and Vulkan on full-size SYNTHETIC-WEIGHT GGUFs (issue 13 items 5-6),
# written on the device by tools/synth/write_gguf.py from small inputs (the text is noise, the
# speed is real: every result is labelled "synthetic weights"):
#   qwen25-1.5b   the exact header of Qwen2.5-Coder-1.5B-Instruct Q4_K_M (tensor table and tokenizer)
#   lfm2-1.2b     tools/synth/configs/lfm2-1.2b.json   (vocab: SmolLM2's, padded to 65536)
#   lfm2-350m     tools/synth/configs/lfm2-350m.json
#   qwen35-0.8b   tools/synth/configs/qwen3.5-0.8b.json (vocab: Qwen2.5's, padded to 248320)
#   qwen35-2b     tools/synth/configs/qwen3.5-2b.json
# Product configuration, `wgllm bench ab` (A = wgllm as two control arms, B = the peer through
# tools/peers/peer_llamacpp.sh, interleaved, bootstrap CI): TTFT and decode at prompt 512 (+128)
# and 4096 (+64); `wgllm bench --traffic` for decode as a fraction of copy bandwidth.
#
# Staging (here):
#   mkdir -p /tmp/synth && python3 tools/synth/gguf_header.py \
#       ~/.cache/wgllm/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf /tmp/synth/qwen25-coder-1.5b.hdr.gz
#   python3 tools/synth/gguf_header.py ~/.cache/wgllm/models/SmolLM2-135M-Instruct.Q4_1.gguf /tmp/synth/smollm2.hdr.gz
#   python3 tools/device/pack.py --bin wgllm synth_gguf_test --gl --llamacpp --extra /tmp/synth=synth
#   (optional, for the Vulkan peer: the .carry/llama-vk.tar.xz.partNN of tools/peers/build_llamacpp_vulkan.sh,
#    added to the last planned call's carry list)
# Calls, back to back (the machine is released when idle; the written files live in /root/wg/synth
# while it stays warm):
#   bash tools/device/recipes/synth_bench.sh store            every planned call (starts the CUDA build)
#   MODEL=lfm2-1.2b bash tools/device/recipes/synth_bench.sh measure      one call per model (~8-9 min)
#   ... MODEL=qwen25-1.5b, qwen35-2b, qwen35-0.8b, lfm2-350m
# (`... write` instead of `measure`: only write, verify and smoke-test the file: ~1 min.)
# PEERS="vulkan cuda" (default; Vulkan first so the CUDA build has longer) picks the peers; ROUNDS
# (default 2) the bench ab rounds; a call that runs short of time (400 s) says which comparisons it
# left out (run them again with PEERS=...).
# Results: $OUT/results.tgz with <model>/ per model (summarize: python3 tools/device/summarize.py
# DIR/<model> --model <model>-synthetic --commit C --device "NVIDIA H200 (...)").
# Fails loudly (exit 1, FAIL lines) when a file does not write or verify, wgllm cannot run it or
# gives a non-finite perplexity, or llama.cpp cannot load it.
set -u
stage=${1:-measure}
source tools/device/remote.sh
T0=$(date +%s)  # for el (remote.sh)
mkdir -p $W/synth
[ -d .carry/synth ] && cp .carry/synth/* $W/synth/
wg_llamacpp_vk
wg_start_llamacpp_cuda
[ "$stage" = store ] && { $B devices 2>&1 | head -3; exit 0; }
[ "$stage" = measure ] || [ "$stage" = write ] || { echo "FAIL: stage must be store, write or measure"; exit 1; }

FAILED=0
fail() { echo "FAIL: $*" | tee -a $R/FAILED.txt; FAILED=1; }
MODEL=${MODEL:?set MODEL to one of qwen25-1.5b lfm2-1.2b lfm2-350m qwen35-0.8b qwen35-2b}
QH=$W/synth/qwen25-coder-1.5b.hdr.gz SH=$W/synth/smollm2.hdr.gz
case $MODEL in
  qwen25-1.5b) SRC="--header $QH" ;;
  lfm2-1.2b) SRC="--config tools/synth/configs/lfm2-1.2b.json --vocab $SH" ;;
  lfm2-350m) SRC="--config tools/synth/configs/lfm2-350m.json --vocab $SH" ;;
  qwen35-0.8b) SRC="--config tools/synth/configs/qwen3.5-0.8b.json --vocab $QH" ;;
  qwen35-2b) SRC="--config tools/synth/configs/qwen3.5-2b.json --vocab $QH" ;;
  *) echo "FAIL: unknown MODEL $MODEL"; exit 1 ;;
esac
R=$W/res/$MODEL; rm -rf $R; mkdir -p $R
for h in $QH $SH; do [ -f $h ] || { echo "FAIL: missing $h (carry .carry/synth: see Staging)"; exit 1; }; done
trap 'tar czf $OUT/results.tgz -C $W/res .' EXIT
echo "synthetic weights: $MODEL (tools/synth/write_gguf.py $SRC --seed 1); the text is noise, the speed is real" > $R/LABEL.txt
wg_gpu_check | tee $R/gpu.txt
python3 -c "import numpy; print('numpy', numpy.__version__)" || { fail "no numpy on the device"; exit 1; }

# ---- 1. write and verify the file
F=$W/synth/$MODEL.synthetic.gguf
if [ ! -f $F ]; then
  python3 tools/synth/write_gguf.py $SRC --seed 1 $F > $R/write.txt 2>&1 || { cat $R/write.txt; fail "write_gguf.py $MODEL"; exit 1; }
  cat $R/write.txt
fi
[ -f $F ] || { fail "write_gguf.py did not write $F"; exit 1; }
python3 tools/synth/gguf_header.py --dump $F | grep -vE "^tokenizer.ggml.(tokens|token_type|merges|scores)" > $R/header.txt
tail -1 $R/header.txt
if [ "$MODEL" = qwen25-1.5b ]; then
  python3 tools/synth/gguf_header.py --compare $QH $F || fail "$F: tensor table differs from the source header"
fi
el "file: $(stat -c %s $F) bytes"
[ $FAILED = 0 ] || exit 1

# ---- 2. smoke: wgllm runs it with finite numbers; llama.cpp loads it
$B run -m $F -p "The quick brown fox" -n 8 --temp 0 --ignore-eos > $R/run.txt 2>&1 || fail "wgllm run $MODEL (exit $?): $(tail -2 $R/run.txt)"
head -c 4000 tests/fixtures/parity/prompt_256.txt > $W/ppl.txt
$B perplexity -m $F -f $W/ppl.txt --window 128 -c 256 > $R/perplexity.txt 2>&1 || fail "wgllm perplexity $MODEL (exit $?)"
tail -1 $R/perplexity.txt
pp=$(tail -1 $R/perplexity.txt | grep -oE "perplexity [^ ]+" | cut -d' ' -f2)
python3 -c "import math, sys; sys.exit(0 if math.isfinite(float(sys.argv[1])) else 1)" "${pp:-nan}" 2>/dev/null \
  || fail "wgllm perplexity on $MODEL is not a finite number: '${pp}'"
el "wgllm smoke"
[ "$stage" = write ] && exit $FAILED

# ---- 3. measurements: wgllm alone (--traffic: decode vs copy bandwidth), then per peer (Vulkan
# first by default, so the CUDA build started by `store` has longer to finish) bench ab at 512 / 4096
$B bench -m $F --prompt-lengths 512 --gen 128 --reps 2 --traffic --json $R/wgllm_p512_g128.json --md $R/wgllm_p512_g128.md 2>&1 \
  | grep -E "^\| product|copy bandwidth|dispatch" | head -6
el "wgllm bench"
declare -A LB=([cuda]=$LB_CUDA [vulkan]=$LB_VK)
LEFT=""
for p in ${PEERS:-vulkan cuda}; do
  lb=${LB[$p]:-}
  if [ "$p" = cuda ] && [ -f $W/lcpp.log ]; then  # wait for the build, within the call's budget
    wg_wait_llamacpp 380 || { fail "llama.cpp CUDA build not done or failed: $(tail -2 $W/lcpp.log | tr '\n' ' ')"; LEFT="$LEFT cuda"; continue; }
  fi
  if [ ! -x "$lb" ]; then fail "llama.cpp $p: no llama-bench at $lb"; continue; fi
  if ! "$lb" -m $F -p 32 -n 4 -r 1 -o json > $R/llamacpp_${p}_smoke.json 2> $R/llamacpp_${p}_smoke.err; then
    fail "llama.cpp $p cannot run $F: $(grep -iE "error|fail|except" $R/llamacpp_${p}_smoke.err | head -3 | tr '\n' ' ')"
    continue
  fi
  el "llama.cpp $p loads and runs the file"
  for pg in "512 128" "4096 64"; do
    set -- $pg
    name=vs_llamacpp_${p}_p$1_g$2
    if [ $(( $(date +%s) - T0 )) -gt 400 ]; then LEFT="$LEFT $name"; continue; fi
    timeout 170 $B bench ab --a "bench -m $F --prompt-lengths $1 --gen $2 --reps 1" \
      --b-cmd "bash tools/peers/peer_llamacpp.sh $lb $F $1 $2" --metric ttft_ms,decode_tok_s \
      --rounds ${ROUNDS:-2} --json $R/$name.json 2>&1 | tail -3
    [ -s $R/$name.json ] || fail "$name produced no result"
    el "$name"
  done
done
[ -n "$LEFT" ] && echo "NOT RUN (call time):$LEFT -> run again with the same MODEL and PEERS=<those peers>"
nvidia-smi --query-gpu=clocks.sm,memory.used --format=csv | tee -a $R/gpu.txt
exit $FAILED
