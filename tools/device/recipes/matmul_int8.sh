#!/usr/bin/env bash
# H200: the int8 prefill matmul (--matmul-int8, kernels/matmul_int8.h; issue 11 item 3) against the
# f32 tiled kernel: first the kernel alone, then TTFT and greedy tokens.
#   kernel   `wgllm bench matmul --int8` at the prefill shapes of LFM2-1.2B and Qwen2.5-1.5B (T = 512
#            and 4096), q4_K / q6_K / q8_0 / q4_1, the f32 default tile and a grid of int8 tiles; the
#            int8 rows include the quantize_q8 dispatch (quantize_us gives it apart). If int8 is not
#            faster than f32 at any tile, suspect naga's polyfill of dot4I8Packed (no OpSDot: the
#            device's VK_KHR_shader_integer_dot_product not enabled by wgpu-hal) before the kernel.
#   ttft     writes the synthetic LFM2-1.2B and Qwen2.5-1.5B-shaped GGUFs (tools/synth) unless
#            present; `bench ab` TTFT at 512 of the switch off (A) vs on (B) on them and on
#            SmolLM2-135M (Q4_1; its real weights), then greedy tokens with and without the switch on
#            SmolLM2 and, if carried, the real Qwen2.5-Coder-1.5B Q4_K_M (first divergence printed).
# Staging (here), as tools/device/recipes/matvec.sh (synth headers), plus the real 1.5B if wanted:
#   python3 tools/device/pack.py --bin wgllm --extra /tmp/synth=synth \
#       --model ~/.cache/wgllm/models/SmolLM2-135M-Instruct.Q4_1.gguf
# Calls: STAGE=kernel, then STAGE=ttft (bash tools/device/recipes/matmul_int8.sh).
# Results: $OUT/results.tgz.
set -u
stage=${STAGE:-${1:-kernel}}
source tools/device/remote.sh
T0=$(date +%s)  # for el (remote.sh)
mkdir -p $W/synth $W/res
[ -d .carry/synth ] && cp .carry/synth/* $W/synth/
trap 'tar czf $OUT/results.tgz -C $W/res .' EXIT
FAILED=0
fail() { echo "FAIL: $*" | tee -a $W/res/FAILED.txt; FAILED=1; }
SMOL=$(wg_model SmolLM2-135M-Instruct.Q4_1.gguf) || fail "SmolLM2 not carried"
QREAL=$(wg_model qwen2.5-coder-1.5b-instruct-q4_k_m.gguf 2>/dev/null) || QREAL=""
QH=$W/synth/qwen25-coder-1.5b.hdr.gz SH=$W/synth/smollm2.hdr.gz
declare -A SRC=([lfm2-1.2b]="--config tools/synth/configs/lfm2-1.2b.json --vocab $SH" [qwen25-1.5b]="--header $QH")
declare -A FILE=([smollm2]=$SMOL [lfm2-1.2b]=$W/synth/lfm2-1.2b.synthetic.gguf [qwen25-1.5b]=$W/synth/qwen25-1.5b.synthetic.gguf)

case $stage in
kernel)
  R=$W/res/matmul_int8; mkdir -p $R
  wg_gpu_check | tee $R/gpu.txt
  # LFM2-1.2B: gate+up, down, conv in_proj, out_proj; Qwen2.5-1.5B: gate+up, down, qkv, o.
  SHAPES=16384:2048,2048:8192,6144:2048,2048:2048,17920:1536,1536:8960,2048:1536,1536:1536
  TILES=64x64/4x4,128x64/8x4,64x128/4x8,128x128/8x8,64x64/8x8,128x32/8x4,32x128/4x8
  for t in q4_K q6_K q8_0 q4_1; do
    timeout 280 $B bench matmul --type $t --int8 --no-per-row --shapes $SHAPES --tokens 512,4096 --tiles $TILES \
      --reps 5 --json $R/matmul_$t.json 2> $R/matmul_$t.txt || fail "bench matmul $t (exit $?): $(tail -2 $R/matmul_$t.txt)"
    grep -A20 "all 8 shapes" $R/matmul_$t.txt | head -40
    el "bench matmul $t"
  done
  ;;
ttft)
  python3 -c "import numpy" || { fail "no numpy on the device"; exit 1; }
  for m in lfm2-1.2b qwen25-1.5b; do
    F=${FILE[$m]}
    [ -f $F ] || python3 tools/synth/write_gguf.py ${SRC[$m]} --seed 1 $F > $W/res/write_$m.txt 2>&1 \
      || { fail "write_gguf.py $m: $(tail -2 $W/res/write_$m.txt)"; continue; }
  done
  for m in smollm2 lfm2-1.2b qwen25-1.5b; do
    F=${FILE[$m]}; R=$W/res/$m; mkdir -p $R
    [ -f $F ] || continue
    [ $m = smollm2 ] || echo "synthetic weights: $m; the text is noise, the speed is real" > $R/LABEL.txt
    timeout 170 $B bench ab --a "bench -m $F --prompt-lengths 512 --gen 2 --reps 1" \
      --b "bench -m $F --prompt-lengths 512 --gen 2 --reps 1 --matmul-int8" --metric ttft_ms --rounds 3 \
      --json $R/ab_int8_ttft512.json > $R/ab_int8_ttft512.txt 2>&1 || fail "bench ab int8 $m (exit $?)"
    tail -2 $R/ab_int8_ttft512.txt
    el "$m TTFT int8 off vs on"
  done
  # Greedy tokens, switch off vs on (real weights only).
  P="The history of the printing press begins in the fifteenth century, when Johannes Gutenberg"
  for F in $SMOL $QREAL; do
    n=$(basename $F .gguf); R=$W/res/tokens_$n; mkdir -p $R
    $B run -m $F --raw -p "$P" -n 64 --temp 0 > $R/off.txt 2> $R/off.err || fail "run $n off"
    $B run -m $F --raw -p "$P" -n 64 --temp 0 --matmul-int8 > $R/on.txt 2> $R/on.err || fail "run $n on"
    python3 - $R/off.txt $R/on.txt <<'PY'
import sys
a, b = (open(f).read() for f in sys.argv[1:3])
i = next((k for k in range(min(len(a), len(b))) if a[k] != b[k]), None)
print(sys.argv[1].split('/')[-2], "identical" if a == b else f"first difference at character {i}: {a[max(0, (i or 0) - 40):(i or 0) + 40]!r} vs {b[max(0, (i or 0) - 40):(i or 0) + 40]!r}")
PY
  done
  ;;
*) echo "FAIL: STAGE must be kernel or ttft"; exit 1 ;;
esac
exit $FAILED
