#!/usr/bin/env bash
# H200: cold long prefill, dense vs gathered block-sparse attention (issue 14 item 3; --sparse-attn,
# kernels/sparse_attention.h) on Qwen2.5-Coder-1.5B-Instruct Q4_K_M (trained context 32768): per
# context length the time of every 512-token prefill chunk, tokens/s, device bytes, host peak RSS
# and swap (`wgllm bench long-context`). 2048 and 4096 are the below-threshold control (default
# --sparse-threshold 8192: both modes run the same dense kernels; times must agree within noise).
# Also the sparse kernel tests on the device (gather = masked dense, vs the CPU twin).
# Quality (issue 14 item 2): perplexity of one window of 8k / 16k / 30k tokens of Moby-Dick (public
# domain) and retrieval of a planted passcode at ~8k / 16k / 28k tokens, sparse on vs off.
# Staging: python3 tools/device/pack.py --bin wgllm sparse_attention_test \
#     --model ~/.cache/wgllm/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \
#     --extra ~/.cache/wgllm/text/package/moby-dick/data/data.txt=moby.txt
# then the planned calls back to back: `bash tools/device/recipes/long_context.sh store` for all but
# the last, `bash tools/device/recipes/long_context.sh measure` last (PART=speed, then a further
# call with PART=quality: each half fits one call). Results: $OUT/results.tgz.
# Not covered here: 64k and ~100k contexts need a model trained for them (a synthetic one).
set -u
stage=${1:-measure}
source tools/device/remote.sh
[ -f .carry/moby.txt ] && cp .carry/moby.txt $W/moby.txt  # carried by the first call only
[ "$stage" = store ] && { $B devices 2>&1 | head -3; exit 0; }
wg_results  # remote.sh: T0, R=$W/res (emptied), packed into $OUT/results.tgz on exit
GGUF=$(wg_model qwen2.5-coder-1.5b-instruct-q4_k_m.gguf) || exit 1
wg_gpu_check | tee $R/gpu.txt
PART=${PART:-speed quality}  # PART=speed or PART=quality: one of the two halves per call (each fits a call)
if [[ " $PART " == *" speed "* ]]; then
for t in sparse_attention_test qwen2_parity_test; do
  [ -x $W/bin/$t ] && { $W/bin/$t > $R/$t.log 2>&1; echo "$t: exit $? $(grep -E '^\[  (PASSED|FAILED) ' $R/$t.log | tr '\n' ' ')"; }
done
el "tests"
# The real 1.5B in the product configuration (decode and TTFT at a 512-token prompt).
$B bench -m $GGUF --prompt-lengths 512 --gen 128 --reps 2 --json $R/qwen25coder_p512_g128.json 2>&1 | grep -E "^\| product|decode step|dispatch"
el "bench"
# Default selection: blocks of 64 keys, sink + window 4 + top-16 = 21 blocks (1344 keys) per query block.
$B bench long-context -m $GGUF --contexts 2048,4096,8192,16384,32768 --json $R/long_context.json 2>&1 | tail -12
el "long-context"
# A second round for the noise band of the per-chunk times.
$B bench long-context -m $GGUF --contexts 4096,32768 --json $R/long_context_round2.json 2>&1 | tail -6
el "round 2"
# The prefill gather kernel: per-row instead of tiled (--no-sparse-tiled), sparse mode only.
$B bench long-context -m $GGUF --contexts 16384,32768 --modes sparse --no-sparse-tiled --json $R/long_context_rows.json 2>&1 | tail -4
el "per-row gather"
fi
TXT=.carry/moby.txt
[ -f $TXT ] || TXT=$W/moby.txt
if [[ " $PART " == *" quality "* ]] && [ -f $TXT ]; then
  for w in 8192 16384 30000; do
    for m in no-sparse-attn sparse-attn; do
      $B perplexity -m $GGUF -f $TXT --window $w -c 32768 --$m 2>&1 | tail -1 | sed "s/^/ppl w=$w $m: /" | tee -a $R/perplexity.txt
    done
  done
  el "perplexity"
  # Planted fact: the passcode sentence halfway into ~N tokens of text (about 4 characters a token).
  for chars in 30000 62000 110000; do
    half=$((chars / 2))
    { head -c $half $TXT; printf '\n\nThe secret passcode is 7391-ALPHA. Remember it.\n\n'; tail -c +$((half + 1)) $TXT | head -c $half;
      printf '\n\nQuestion: what is the secret passcode given in the text above? Answer with the passcode only.\n'; } > $W/planted_$chars.txt
    for m in no-sparse-attn sparse-attn; do
      out=$($B run -m $GGUF -f $W/planted_$chars.txt -n 16 --temp 0 -c 32768 --$m 2>$R/planted_${chars}_$m.err)
      echo "planted chars=$chars $m: $(echo "$out" | grep -q 7391 && echo FOUND || echo MISSED) | $(echo "$out" | tr '\n' ' ' | head -c 80)" | tee -a $R/planted.txt
    done
  done
  el "planted"
fi
