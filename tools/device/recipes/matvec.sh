#!/usr/bin/env bash
# H200: the decode matrix-vector kernel at size (issue 11 item 2): matvec.wgsl's launch shapes
# (rows per workgroup / rows per thread / lanes) alone, then whole decode on full-size files, then
# against llama.cpp CUDA on the same files.
#   store    every planned call: binaries, Vulkan loader, llama.cpp sdist (starts the CUDA build
#            in the background); then `wgllm bench matvec` over the shapes of LFM2-1.2B and
#            Qwen2.5-1.5B, q4_K / q6_K, prologues none / norm / silu, a grid of launch shapes.
#   decode   writes the synthetic LFM2-1.2B and Qwen2.5-1.5B-shaped GGUFs (tools/synth; the text
#            is noise, the speed is real) unless present; `wgllm bench --traffic` on them and on
#            SmolLM2-135M (product configuration), and `bench ab` of the old launch shape (4 rows,
#            1 per thread: the kernel before rows per thread) against the new default.
#   peers    `bench ab` wgllm vs llama.cpp CUDA (waits for the build): decode after 512 (+128) and
#            TTFT 512 on each of the three files.
#   dequant  (2026-12-02, second session) `bench matvec` of the by-shape default against
#            --no-dequant-magic (+nomagic) and --matvec-int8 (+int8) over q4_K / q6_K / q4_1 / q8_0,
#            prologues none / norm / silu; writes the synthetic files; `bench --traffic` with and
#            without --matvec-int8.
#   dequant_shape  `bench matvec` launch shapes with and without --matvec-int8, long bursts (256
#            dispatches per submission: the GPU clock stays up), q4_K, LFM2-1.2B shapes.
#   dequant_ab  `bench ab` --no-dequant-magic vs default and default vs --matvec-int8 (decode after
#            512) on the three files; greedy text of SmolLM2 with and without --matvec-int8.
# Staging (here):
#   mkdir -p /tmp/synth && python3 tools/synth/gguf_header.py \
#       ~/.cache/wgllm/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf /tmp/synth/qwen25-coder-1.5b.hdr.gz
#   python3 tools/synth/gguf_header.py ~/.cache/wgllm/models/SmolLM2-135M-Instruct.Q4_1.gguf /tmp/synth/smollm2.hdr.gz
#   python3 tools/device/pack.py --bin wgllm --gl --llamacpp --extra /tmp/synth=synth \
#       --model ~/.cache/wgllm/models/SmolLM2-135M-Instruct.Q4_1.gguf
# Calls, back to back: STAGE=store, then STAGE=decode, then STAGE=peers (bash tools/device/recipes/matvec.sh).
# Results: $OUT/results.tgz (summarize: python3 tools/device/summarize.py DIR/<model> ...).
set -u
stage=${STAGE:-${1:-store}}
source tools/device/remote.sh
T0=$(date +%s)  # for el (remote.sh)
mkdir -p $W/synth $W/res
[ -d .carry/synth ] && cp .carry/synth/* $W/synth/
trap 'tar czf $OUT/results.tgz -C $W/res .' EXIT
FAILED=0
fail() { echo "FAIL: $*" | tee -a $W/res/FAILED.txt; FAILED=1; }
wg_start_llamacpp_cuda
SMOL=$(wg_model SmolLM2-135M-Instruct.Q4_1.gguf) || fail "SmolLM2 not carried"
QH=$W/synth/qwen25-coder-1.5b.hdr.gz SH=$W/synth/smollm2.hdr.gz
declare -A SRC=([lfm2-1.2b]="--config tools/synth/configs/lfm2-1.2b.json --vocab $SH" [qwen25-1.5b]="--header $QH")
declare -A FILE=([smollm2]=$SMOL [lfm2-1.2b]=$W/synth/lfm2-1.2b.synthetic.gguf [qwen25-1.5b]=$W/synth/qwen25-1.5b.synthetic.gguf)

case $stage in
store)
  R=$W/res/matvec; mkdir -p $R
  wg_gpu_check | tee $R/gpu.txt
  $B devices 2>&1 | head -4
  # LFM2-1.2B: gate+up, down, conv in_proj, out_proj / attention o, output head; Qwen2.5-1.5B:
  # gate+up, down, qkv, o, output head (151936 rows).
  SHAPES=16384:2048,2048:8192,6144:2048,2048:2048,65536:2048,17920:1536,1536:8960,2048:1536,1536:1536,151936:1536
  VARS=4/1/32,8/2/32,16/4/32,8/4/32,4/4/32,32/4/32,8/2/64,8/4/64,16/4/64,4/2/128,4/4/128,8/4/128,4/4/256,0/0/0
  for t in q4_K q6_K; do
    timeout 240 $B bench matvec --types $t --shapes $SHAPES --variants $VARS --prologues none,norm,silu --reps 4 \
      --json $R/matvec_$t.json 2> $R/matvec_$t.txt || fail "bench matvec $t (exit $?): $(tail -2 $R/matvec_$t.txt)"
    el "bench matvec $t"
  done
  grep -E "copy bandwidth" $R/matvec_q4_K.txt
  ;;
decode)
  python3 -c "import numpy" || { fail "no numpy on the device"; exit 1; }
  for m in lfm2-1.2b qwen25-1.5b; do
    F=${FILE[$m]}
    [ -f $F ] || python3 tools/synth/write_gguf.py ${SRC[$m]} --seed 1 $F > $W/res/write_$m.txt 2>&1 \
      || { fail "write_gguf.py $m: $(tail -2 $W/res/write_$m.txt)"; continue; }
    el "wrote $m ($(stat -c %s $F) bytes)"
  done
  for m in smollm2 lfm2-1.2b qwen25-1.5b; do
    F=${FILE[$m]}; R=$W/res/$m; mkdir -p $R
    [ -f $F ] || continue
    [ $m = smollm2 ] || echo "synthetic weights: $m (tools/synth/write_gguf.py ${SRC[$m]} --seed 1); the text is noise, the speed is real" > $R/LABEL.txt
    wg_gpu_check > $R/gpu.txt
    timeout 120 $B bench -m $F --prompt-lengths 512 --gen 128 --reps 2 --traffic --json $R/wgllm_p512_g128.json \
      --md $R/wgllm_p512_g128.md > $R/bench.txt 2>&1 || fail "bench --traffic $m (exit $?)"
    grep -E "^\| product|copy bandwidth|dispatches per" $R/wgllm_p512_g128.md | head -4
    el "$m traffic"
    timeout 150 $B bench ab --a "bench -m $F --prompt-lengths 512 --gen 128 --reps 1 --matvec-rows 4 --matvec-rows-per-thread 1 --matvec-lanes 32" \
      --b "bench -m $F --prompt-lengths 512 --gen 128 --reps 1" --metric decode_tok_s --rounds 3 \
      --json $R/ab_rpt1_vs_default.json > $R/ab_rpt1_vs_default.txt 2>&1 || fail "bench ab rpt $m (exit $?)"
    tail -2 $R/ab_rpt1_vs_default.txt
    el "$m ab old shape vs default"
  done
  ;;
peers)
  wg_wait_llamacpp 300 || { fail "llama.cpp CUDA build not done: $(tail -2 $W/lcpp.log | tr '\n' ' ')"; exit 1; }
  for m in smollm2 lfm2-1.2b qwen25-1.5b; do
    F=${FILE[$m]}; R=$W/res/$m; mkdir -p $R
    [ -f $F ] || { fail "$m: no file (run STAGE=decode first)"; continue; }
    timeout 170 $B bench ab --a "bench -m $F --prompt-lengths 512 --gen 128 --reps 1" \
      --b-cmd "bash tools/peers/peer_llamacpp.sh $LB_CUDA $F 512 128" --metric ttft_ms,decode_tok_s \
      --rounds ${ROUNDS:-2} --json $R/vs_llamacpp_cuda_p512_g128.json > $R/vs_cuda.txt 2>&1 || fail "ab vs cuda $m (exit $?)"
    tail -3 $R/vs_cuda.txt
    el "$m vs llama.cpp CUDA"
  done
  ;;
dequant)
  R=$W/res/dequant; mkdir -p $R
  wg_gpu_check | tee $R/gpu.txt
  SHAPES=16384:2048,2048:8192,6144:2048,2048:2048,65536:2048,17920:1536,1536:8960,1536:1536,8:256
  for t in q4_K q6_K q4_1 q8_0; do
    timeout 150 $B bench matvec --types $t --shapes $SHAPES --variants 0/0/0,0/0/0+nomagic,0/0/0+int8 \
      --prologues none,norm,silu --reps 6 --json $R/matvec_$t.json 2> $R/matvec_$t.txt \
      || fail "bench matvec $t (exit $?): $(tail -2 $R/matvec_$t.txt)"
    el "bench matvec $t"
  done
  cat $R/matvec_q4_K.txt | head -40
  python3 -c "import numpy" || { fail "no numpy on the device"; exit 1; }
  for m in lfm2-1.2b qwen25-1.5b; do
    F=${FILE[$m]}
    [ -f "$F" ] || python3 tools/synth/write_gguf.py ${SRC[$m]} --seed 1 $F > $W/res/write_$m.txt 2>&1 \
      || { fail "write_gguf.py $m: $(tail -2 $W/res/write_$m.txt)"; continue; }
    el "wrote $m ($(stat -c %s $F) bytes)"
  done
  for m in smollm2 lfm2-1.2b qwen25-1.5b; do
    F=${FILE[$m]}; R=$W/res/$m; mkdir -p $R
    [ -f "$F" ] || continue
    [ $m = smollm2 ] || echo "synthetic weights: $m (tools/synth/write_gguf.py ${SRC[$m]} --seed 1); the text is noise, the speed is real" > $R/LABEL.txt
    for arm in default int8; do
      X=""; [ $arm = int8 ] && X="--matvec-int8"
      timeout 100 $B bench -m $F --prompt-lengths 512 --gen 128 --reps 2 --traffic $X --json $R/traffic_$arm.json \
        --md $R/traffic_$arm.md > $R/traffic_$arm.txt 2>&1 || fail "bench --traffic $m $arm (exit $?)"
      grep -E "^\| product|^\| NON|dispatches per" $R/traffic_$arm.md | head -3
    done
    el "$m traffic"
  done
  ;;
dequant_shape)
  R=$W/res/dequant_shape; mkdir -p $R
  wg_gpu_check | tee $R/gpu.txt
  V=0/0/0,0/0/0+int8,16/4/32,16/4/32+int8,32/4/32,32/4/32+int8,64/4/32+int8,16/4/64+int8,32/4/64+int8
  V=$V,64/4/64+int8,8/4/128+int8,16/4/128+int8,8/2/64+int8,32/2/32+int8,8/4/64,16/4/64,32/4/64
  timeout 300 $B bench matvec --types q4_K --shapes 16384:2048,2048:8192,6144:2048,2048:2048,8:256 --variants $V \
    --prologues none,norm,silu --reps 8 --burst 256 --json $R/matvec_q4_K.json 2> $R/matvec_q4_K.txt \
    || fail "bench matvec (exit $?): $(tail -2 $R/matvec_q4_K.txt)"
  el "bench matvec shapes"
  ;;
dequant_ab)
  for m in lfm2-1.2b qwen25-1.5b; do
    F=${FILE[$m]}
    [ -f $F ] || python3 tools/synth/write_gguf.py ${SRC[$m]} --seed 1 $F > $W/res/write_$m.txt 2>&1 \
      || fail "write_gguf.py $m: $(tail -2 $W/res/write_$m.txt)"
  done
  for m in ${MODELS:-smollm2 lfm2-1.2b qwen25-1.5b}; do
    F=${FILE[$m]}; R=$W/res/$m; mkdir -p $R
    [ -f "$F" ] || { fail "$m: no file (run STAGE=dequant first)"; continue; }
    timeout 110 $B bench ab --a "bench -m $F --prompt-lengths 512 --gen 128 --reps 1 --no-dequant-magic" \
      --b "bench -m $F --prompt-lengths 512 --gen 128 --reps 1" --metric decode_tok_s,ttft_ms --rounds 3 \
      --json $R/ab_nomagic_vs_default.json > $R/ab_nomagic_vs_default.txt 2>&1 || fail "bench ab magic $m (exit $?)"
    tail -3 $R/ab_nomagic_vs_default.txt
    timeout 110 $B bench ab --a "bench -m $F --prompt-lengths 512 --gen 128 --reps 1" \
      --b "bench -m $F --prompt-lengths 512 --gen 128 --reps 1 --matvec-int8" --metric decode_tok_s,ttft_ms --rounds 3 \
      --json $R/ab_default_vs_int8.json > $R/ab_default_vs_int8.txt 2>&1 || fail "bench ab int8 $m (exit $?)"
    tail -3 $R/ab_default_vs_int8.txt
    el "$m ab"
  done
  [ -f "${FILE[smollm2]}" ] || exit $FAILED
  R=$W/res/greedy_int8; mkdir -p $R
  i=0
  while IFS= read -r prompt; do
    i=$((i+1))
    for arm in default int8; do
      X=""; [ $arm = int8 ] && X="--matvec-int8"
      timeout 30 $B run -m ${FILE[smollm2]} -n 64 --ignore-eos --temp 0 $X -p "$prompt" > $R/p${i}_$arm.txt 2>/dev/null
    done
    cmp -s $R/p${i}_default.txt $R/p${i}_int8.txt && echo "prompt $i: same text" || echo "prompt $i: differs"
  done < tools/device/recipes/greedy_prompts.txt | tee $R/summary.txt
  ;;
*) echo "FAIL: STAGE must be store, decode, peers, dequant or dequant_ab"; exit 1 ;;
esac
nvidia-smi --query-gpu=clocks.sm,memory.used --format=csv
exit $FAILED
