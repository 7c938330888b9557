#!/usr/bin/env bash
# H200: the decode attention's thread count and prefetch (issue 13: Qwen2.5-1.5B decode against
# llama.cpp CUDA; `--attn-decode-threads`, `--attn-decode-prefetch`, with `--attn-decode-key-lanes`),
# on files written here by tools/synth (synthetic weights: the text is noise, the speed is real).
# Parts (PARTS, in this order by default):
#   tests    kernels_test Ops.AttentionDecode* (the CPU reference and PF's bit-exactness), when carried
#   ab       `bench ab` decode after a 512-token prompt, meter decode_ms_p50 (256 steps x 3
#            repetitions per run), 2 interleaved rounds, A = product, B = a candidate: a null control
#            (B = A), then on the Qwen2.5-1.5B shape (12 / 2 heads x 128): prefetch + 256 threads + 2
#            key lanes, the same without prefetch, prefetch alone (128 threads, 1 lane), prefetch + 512
#            threads + 4 lanes, prefetch + 128 threads + 2 lanes (two 64-key tiles per split); the first
#            candidate after a 2048-token prompt; on the SmolLM2 (9 / 3 x 64) and LFM2-1.2B shapes
#   marginal `bench --repeat-kernel attention` (every attention dispatch recorded twice; the step-time
#            difference is the kernel's marginal cost) and plain runs, product and CAND, 2 rounds
#   peers    the product and the product with CAND against llama.cpp CUDA (built here from the
#            carried sdist, ~5.5 min; no A/B runs during the build), decode after 512 and TTFT 512
# Staging: python3 tools/device/pack.py --bin wgllm kernels_test --gl [--llamacpp] --extra /tmp/synth2=synth
# Call: BUDGET_S=520 PARTS="tests ab marginal" bash tools/device/recipes/decode_attn.sh
# Results: $OUT/results.tgz (raw files; summary by tools/device/recipes/decode_attn_summary.py).
set -u
source tools/device/remote.sh
wg_results
CAND=${CAND:---attn-decode-prefetch --attn-decode-threads 256 --attn-decode-key-lanes 2}
case " ${PARTS:-tests ab marginal} " in *" peers "*) wg_start_llamacpp_cuda ;; esac
wg_synth_begin --gpu gpu_before.txt qwen25-1.5b smollm2 lfm2-1.2b
el "synthetic files"
Q=${WG_SYNTH[qwen25-1.5b]}
D="--prompt-lengths 512 --gen 256 --reps 3"
M="--metric decode_ms_p50,decode_tok_s --rounds 2"
for part in ${PARTS:-tests ab marginal}; do
  wg_over && { fail "time budget: part $part not run"; continue; }
  case $part in
  tests)
    if [ -x $W/bin/kernels_test ]; then
      timeout 120 $W/bin/kernels_test --gtest_filter='Ops.AttentionDecode*' > $R/test_kernels.log 2>&1
      echo "kernels_test Ops.AttentionDecode*: exit $?" | tee -a $R/tests.txt; tail -2 $R/test_kernels.log
    fi
    el "tests"
    ;;
  ab)
    A="bench -m $Q $D"
    wg_ab null_qwen25 150 --a "$A" --b "$A" $M
    wg_ab cand_qwen25 150 --a "$A" --b "$A $CAND" $M
    wg_ab t256_kl2_qwen25 150 --a "$A" --b "$A --attn-decode-threads 256 --attn-decode-key-lanes 2" $M
    wg_ab pf_qwen25 150 --a "$A" --b "$A --attn-decode-prefetch" $M
    wg_ab pf_t512_kl4_qwen25 150 --a "$A" --b "$A --attn-decode-prefetch --attn-decode-threads 512 --attn-decode-key-lanes 4" $M
    wg_ab pf_kl2_qwen25 150 --a "$A" --b "$A --attn-decode-prefetch --attn-decode-key-lanes 2" $M
    A2="bench -m $Q --prompt-lengths 2048 --gen 256 --reps 3"
    wg_ab cand_p2048_qwen25 200 --a "$A2" --b "$A2 $CAND" $M
    for m in smollm2 lfm2-1.2b; do
      A="bench -m ${WG_SYNTH[$m]} $D"
      wg_ab cand_$m 150 --a "$A" --b "$A $CAND" $M
    done
    el "ab"
    ;;
  marginal)
    for r in 1 2; do
      for c in product cand; do
        X=""; [ $c = cand ] && X="$CAND"
        for k in none attention; do
          wg_over && { fail "time budget: marginal $c $k r$r not run"; continue; }
          K=""; [ $k = none ] || K="--repeat-kernel $k"
          timeout 60 $B bench -m $Q $D $X $K --json $R/marginal_${c}_${k}_r$r.json > $R/marginal_${c}_${k}_r$r.txt 2>&1 \
            || fail "marginal $c $k r$r (exit $?)"
        done
      done
    done
    el "marginal"
    ;;
  peers)
    # While llama.cpp builds: nothing timed. Then the product and CAND against llama.cpp CUDA.
    wg_wait_llamacpp 420 || { fail "llama.cpp CUDA build not done: $(tail -2 $W/lcpp.log | tr '\n' ' ')"; exit 1; }
    el "llama.cpp built"
    wg_ab vs_cuda_qwen25 200 --a "bench -m $Q --prompt-lengths 512 --gen 128 --reps 1" \
      --b-cmd "bash tools/peers/peer_llamacpp.sh $LB_CUDA $Q 512 128" --metric ttft_ms,decode_tok_s --rounds 2
    wg_ab vs_cuda_cand_qwen25 200 --a "bench -m $Q --prompt-lengths 512 --gen 128 --reps 1 $CAND" \
      --b-cmd "bash tools/peers/peer_llamacpp.sh $LB_CUDA $Q 512 128" --metric ttft_ms,decode_tok_s --rounds 2
    el "peers"
    ;;
  esac
done
wg_gpu_check | tee $R/gpu_after.txt
el "done"
